//go:build unix

package e2e

import (
	"context"
	"errors"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgcluster"
)

// patroniEnv turns TestPatroniFailover on. It needs Patroni and etcd
// (Debian: apt-get install patroni etcd-server) and takes about a minute,
// so CI does not run it.
const patroniEnv = "IDEM_PATRONI"

// TestPatroniFailover (IDEM_PATRONI=1): the synchronous failover of
// TestFailover under an HA manager that fences. Two PostgreSQL servers
// managed by Patroni (synchronous_mode), one etcd; the server program on
// the multi-host URL, with target_session_attrs=read-write. The leader's
// node is lost (Patroni and its server killed with SIGKILL) under keyed
// load; Patroni promotes the synchronous standby once the leader key's
// TTL ends. Then the lost node comes back: Patroni starts its server as a
// standby of the new leader (rewinding what it had that the leader has
// not), and it never takes a write, though it is the first host of the
// URL: every new payment lands on the new leader, and the old node ends
// with exactly the new leader's payments. Across it all, no payment is
// doubled, none answered ok is lost, and every unknown is resolved by a
// resend with its key.
//
//	IDEM_PATRONI=1 go test -race -count=1 -run TestPatroniFailover -v ./e2e
func TestPatroniFailover(t *testing.T) {
	if os.Getenv(patroniEnv) != "1" {
		t.Skipf("set %s=1 to run the failover under Patroni and etcd (apt-get install patroni etcd-server); CI does not", patroniEnv)
	}
	bin := buildServerProgram(t)
	cluster := pgcluster.StartPatroni(t, pgcluster.PatroniConfig{Synchronous: true})
	old, next := cluster.Nodes[0], cluster.Nodes[1]
	rig := failoverRig{name: "Patroni, synchronous_mode", primary: old.URL(), leader: next.URL(), synchronous: true,
		cluster: multiHost(old.Addr(), next.Addr()),
		plan: faultPlan{killAt: killAt, kill: old.Kill, managed: true, tail: failoverTail,
			promote: func() error { return waitPrimary(next, time.Minute) }}}
	r := runFailover(t, bin, rig)

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	stopSampling := sampleRecovery(ctx, old.URL())
	took := rejoin(ctx, t, old, next)
	requireReadOnly(ctx, t, old)
	r.more(ctx, t, freshOps) // the old node is the URL's first host again
	requireSameAsLeader(ctx, t, old, next)
	samples, writable := stopSampling()
	r.finish(t)
	r.requireKept(t)
	t.Logf("the lost node came back as a standby %.1fs after its Patroni restarted (pg_rewind run: %t); its server answered %d samples "+
		"from its restart until the end, read-write in %d; a write on it was refused (read-only); %d payments made after its return all landed on the new leader",
		took.Seconds(), old.Logged("running pg_rewind from"), samples, writable, freshOps)
	require.NotZero(t, samples, "the returning old primary never answered the sampler")
	require.Zero(t, writable, "the old primary took writes after it came back: no fencing")
}

// waitPrimary waits until Patroni reports n the primary (it leads, and its
// server takes writes).
func waitPrimary(n *pgcluster.PatroniNode, within time.Duration) error {
	for deadline := time.Now().Add(within); !n.Is("/primary"); {
		if time.Now().After(deadline) {
			return errors.New("no new primary within " + within.String() + "; its log:\n" + n.LogTail())
		}
		time.Sleep(20 * time.Millisecond) // polling the HA manager's state
	}
	return nil
}

// rejoin restarts the lost node's Patroni and waits until Patroni reports
// its server a standby and the leader streams to it (Patroni may start the
// server more than once on the way: to recover it, to rewind it, to follow
// the leader). It returns how long that took.
func rejoin(ctx context.Context, t *testing.T, n, leader *pgcluster.PatroniNode) time.Duration {
	t.Helper()
	start := time.Now()
	n.Start(t)
	for !n.Is("/replica") || !streamsTo(ctx, leader, n.Name) {
		require.NoError(t, ctx.Err(), "the lost node did not come back as a standby; its log:\n%s", n.LogTail())
		time.Sleep(20 * time.Millisecond) // polling the HA manager's state
	}
	return time.Since(start)
}

// sampleRecovery asks the server at url, every 10 ms until stop, whether
// it takes writes; stop returns how many times it answered, and how many
// of those it was read-write.
func sampleRecovery(ctx context.Context, url string) (stop func() (samples, writable int)) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	var samples, writable int
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			if inRecovery, ok := recovering(ctx, url); ok {
				samples++
				if !inRecovery {
					writable++
				}
			}
			select {
			case <-time.After(10 * time.Millisecond):
			case <-ctx.Done():
			}
		}
	}()
	return func() (int, int) { cancel(); <-done; return samples, writable }
}

// streamsTo reports whether leader streams WAL to the standby named name
// (its application_name, which Patroni sets to the node's name).
func streamsTo(ctx context.Context, leader *pgcluster.PatroniNode, name string) bool {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, leader.URL())
	if err != nil {
		return false
	}
	defer conn.Close(ctx)
	var n int
	err = conn.QueryRow(ctx, `SELECT count(*) FROM pg_stat_replication WHERE application_name = $1 AND state = 'streaming'`, name).Scan(&n)
	return err == nil && n == 1
}

// recovering reports whether the server at url is in recovery (a standby,
// read-only); ok is false when it did not answer within a second.
func recovering(ctx context.Context, url string) (inRecovery, ok bool) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return false, false
	}
	defer conn.Close(ctx)
	if err := conn.QueryRow(ctx, `SELECT pg_is_in_recovery()`).Scan(&inRecovery); err != nil {
		return false, false
	}
	return inRecovery, true
}

// requireReadOnly requires a write made directly on n's server to be
// refused as read-only (SQLSTATE 25006).
func requireReadOnly(ctx context.Context, t *testing.T, n *pgcluster.PatroniNode) {
	t.Helper()
	conn, err := pgx.Connect(ctx, n.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, `UPDATE accounts SET balance_cents = balance_cents + 1 WHERE tenant = $1`, tenant)
	var pgErr *pgconn.PgError
	require.ErrorAs(t, err, &pgErr, "a write on the returned old primary")
	require.Equal(t, "25006", pgErr.Code, "a write on the returned old primary: %v", err)
}

// requireSameAsLeader waits (at most 30 s) until the returned node has
// replayed the leader's payments, and requires it to hold exactly those:
// no payment landed on it alone.
func requireSameAsLeader(ctx context.Context, t *testing.T, returned, leader *pgcluster.PatroniNode) {
	t.Helper()
	want, err := paymentIDs(ctx, leader.URL())
	require.NoError(t, err, "the leader's payments")
	deadline := time.Now().Add(30 * time.Second)
	for {
		got, err := paymentIDs(ctx, returned.URL())
		if err == nil && slices.Equal(got, want) {
			return
		}
		require.True(t, time.Now().Before(deadline), "the returned node has %d payments (%v), the leader %d; its log:\n%s",
			len(got), err, len(want), returned.LogTail())
		time.Sleep(50 * time.Millisecond) // polling for the standby's replay
	}
}

// paymentIDs returns the ids of the tenant's payments at url, sorted.
func paymentIDs(ctx context.Context, url string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return nil, err
	}
	defer conn.Close(ctx)
	rows, err := conn.Query(ctx, `SELECT id FROM payments WHERE tenant = $1 ORDER BY id`, tenant)
	if err != nil {
		return nil, err
	}
	return pgx.CollectRows(rows, pgx.RowTo[string])
}
