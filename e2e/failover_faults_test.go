//go:build unix

package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgcluster"
)

// faultPlan says when a failover run's faults strike, in operations done.
type faultPlan struct {
	stallAt      int // stall the primary's WAL sender (SIGSTOP); 0: never
	killAt       int // kill the primary (SIGKILL)
	promoteAfter time.Duration
}

// faultTimes are when a run's faults struck, and when the API served
// again.
type faultTimes struct {
	stalled      time.Time // zero without a stall
	killed       time.Time
	promoteAsked time.Time // pg_ctl promote started
	promoted     time.Time // pg_ctl promote returned: the standby takes writes
	// serving is the end of the first GET /v1/accounts/{id} answered 200
	// after the kill: the server reads through a read-write connection to
	// the new primary.
	serving time.Time
	err     error
}

// faults is a plan being carried out.
type faults struct {
	done  chan struct{}
	times faultTimes
}

// run carries out the plan in a goroutine: it waits for the load to reach
// stallAt and killAt operations (onDone, for runTimedLoad, counts them),
// strikes, promotes the standby, and probes the API at url until it
// serves. wait returns the times.
func (plan faultPlan) run(ctx context.Context, primary, standby *pgcluster.Cluster, url string) (*faults, func(int)) {
	stall, kill := make(chan struct{}), make(chan struct{})
	f := &faults{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		f.times.err = plan.strike(ctx, primary, standby, url, stall, kill, &f.times)
	}()
	onDone := func(n int) {
		switch n {
		case plan.stallAt:
			close(stall)
		case plan.killAt:
			close(kill)
		}
	}
	return f, onDone
}

// wait waits until the plan is carried out and the API served again.
func (f *faults) wait() *faultTimes {
	<-f.done
	return &f.times
}

func (plan faultPlan) strike(ctx context.Context, primary, standby *pgcluster.Cluster, url string, stall, kill <-chan struct{}, at *faultTimes) error {
	if plan.stallAt > 0 {
		if err := await(ctx, stall); err != nil {
			return err
		}
		if err := stallWALSender(ctx, primary); err != nil {
			return err
		}
		at.stalled = time.Now()
	}
	if err := await(ctx, kill); err != nil {
		return err
	}
	at.killed = time.Now()
	if err := primary.Kill(); err != nil {
		return err
	}
	serving := make(chan time.Time, 1)
	go func() { serving <- probe(ctx, url) }()
	select {
	case <-time.After(plan.promoteAfter): // the outage an HA manager would take to decide
	case <-ctx.Done():
		return ctx.Err()
	}
	at.promoteAsked = time.Now()
	if err := standby.Promote(); err != nil {
		return err
	}
	at.promoted = time.Now()
	at.serving = <-serving
	if at.serving.IsZero() {
		return fmt.Errorf("the API did not serve again: %w", ctx.Err())
	}
	return nil
}

func await(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// stallWALSender stops (SIGSTOP) the process that streams the primary's
// WAL to its standby: from then on the standby receives nothing, while the
// primary, replicating asynchronously, goes on answering commits.
func stallWALSender(ctx context.Context, primary *pgcluster.Cluster) error {
	conn, err := pgx.Connect(ctx, primary.URL())
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var pid int
	if err := conn.QueryRow(ctx, `SELECT pid FROM pg_stat_replication`).Scan(&pid); err != nil {
		return fmt.Errorf("the WAL sender: %w", err)
	}
	return syscall.Kill(pid, syscall.SIGSTOP)
}

// probe reads an account every 10 ms until the API answers 200, and
// returns when that answer ended (zero when ctx ended first).
func probe(ctx context.Context, url string) time.Time {
	client := &http.Client{Timeout: time.Second}
	for ctx.Err() == nil {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/v1/accounts/"+fundedAccount(0), nil)
		if err != nil {
			return time.Time{}
		}
		req.Header.Set("Authorization", token)
		if resp, err := client.Do(req); err == nil {
			_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return time.Now()
			}
		}
		select {
		case <-time.After(10 * time.Millisecond):
		case <-ctx.Done():
		}
	}
	return time.Time{}
}

// waitReplayed waits until the standby has replayed the run's accounts:
// the asynchronous run's stall must find them there.
func waitReplayed(t *testing.T, standby *pgcluster.Cluster, accounts int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, standby.URL())
	require.NoError(t, err)
	defer conn.Close(ctx)
	for {
		var n int
		err := conn.QueryRow(ctx, `SELECT count(*) FROM accounts WHERE tenant = $1`, tenant).Scan(&n) // fails until the table is replayed
		if err == nil && n == accounts {
			return
		}
		require.NoError(t, ctx.Err(), "the standby has %d of %d accounts (%v)", n, accounts, err)
		time.Sleep(10 * time.Millisecond) // polling for the standby's replay
	}
}
