//go:build unix

package e2e

import (
	"context"
	"fmt"
	"io"
	"iter"
	"net/http"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// faultPlan says when a failover run's faults strike, in operations done,
// and what they are.
type faultPlan struct {
	stallAt int          // when to stall replication; 0: never
	stall   func() error // stalls it (stops the primary's WAL sender)
	killAt  int          // when to kill the primary
	kill    func() error
	// promoteAfter is how long after the kill promote is called: the time
	// an HA manager would take to decide.
	promoteAfter time.Duration
	// promote makes a standby the primary, or waits until the HA manager
	// made one; it returns once the new primary takes writes.
	promote func() error
	// managed is true when an HA manager promotes by itself and promote
	// only waits for it: the promotion is then when promote returned.
	managed bool
	// tail is how long the load goes on after the API served again.
	tail time.Duration
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
	// promotion is when the new primary was made: when the test asked for
	// it, or when the HA manager had made it.
	promotion time.Time
	err       error
}

// faults is a plan being carried out.
type faults struct {
	done  chan struct{}
	times faultTimes
}

// run carries out the plan in a goroutine: it waits for the load to reach
// stallAt and killAt operations (onDone, for runFed, counts them),
// strikes, promotes, probes the API at url until it serves, and closes
// stop the tail after that. wait returns the times.
func (plan faultPlan) run(ctx context.Context, url string) (f *faults, onDone func(int), stop <-chan struct{}) {
	stalled, killed, stopped := make(chan struct{}), make(chan struct{}), make(chan struct{})
	f = &faults{done: make(chan struct{})}
	go func() {
		defer close(f.done)
		defer close(stopped)
		if f.times.err = plan.strike(ctx, url, stalled, killed, &f.times); f.times.err == nil {
			select {
			case <-time.After(plan.tail):
			case <-ctx.Done():
			}
		}
	}()
	onDone = func(n int) {
		switch n {
		case plan.stallAt:
			close(stalled)
		case plan.killAt:
			close(killed)
		}
	}
	return f, onDone, stopped
}

// wait waits until the plan is carried out, the API served again and the
// tail passed.
func (f *faults) wait() *faultTimes {
	<-f.done
	return &f.times
}

func (plan faultPlan) strike(ctx context.Context, url string, stall, kill <-chan struct{}, at *faultTimes) error {
	if plan.stallAt > 0 {
		if err := await(ctx, stall); err != nil {
			return err
		}
		if err := plan.stall(); err != nil {
			return err
		}
		at.stalled = time.Now()
	}
	if err := await(ctx, kill); err != nil {
		return err
	}
	at.killed = time.Now()
	if err := plan.kill(); err != nil {
		return err
	}
	serving := make(chan time.Time, 1)
	go func() { serving <- probe(ctx, url) }()
	select {
	case <-time.After(plan.promoteAfter):
	case <-ctx.Done():
		return ctx.Err()
	}
	at.promoteAsked = time.Now()
	if err := plan.promote(); err != nil {
		return err
	}
	at.promoted = time.Now()
	at.promotion = at.promoteAsked
	if plan.managed {
		at.promotion = at.promoted
	}
	at.serving = <-serving
	if at.serving.IsZero() {
		return fmt.Errorf("the API did not serve again: %w", ctx.Err())
	}
	return nil
}

// paced yields 0, 1, ..., n-1, one every every, until stop is closed.
func paced(n int, every time.Duration, stop <-chan struct{}) iter.Seq[int] {
	return func(yield func(int) bool) {
		tick := time.NewTicker(every)
		defer tick.Stop()
		for i := range n {
			if !yield(i) {
				return
			}
			select {
			case <-tick.C:
			case <-stop:
				return
			}
		}
	}
}

func await(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// walSender returns the process id of the primary's WAL sender: stopping
// it (SIGSTOP) stalls replication, and the standby receives nothing from
// then on, while the primary, replicating asynchronously, goes on
// answering commits. It is looked up before the load, so that the stall
// strikes at once.
func walSender(t *testing.T, primaryURL string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, primaryURL)
	require.NoError(t, err)
	defer conn.Close(ctx)
	var pid int
	require.NoError(t, conn.QueryRow(ctx, `SELECT pid FROM pg_stat_replication`).Scan(&pid), "the WAL sender")
	return pid
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

// waitReplayed waits until the standby at url has replayed the run's
// accounts: the asynchronous run's stall must find them there.
func waitReplayed(t *testing.T, url string, accounts int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, url)
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
