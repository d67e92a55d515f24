package e2e

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// errStalled ends a load run that made no progress for its stall bound.
var errStalled = errors.New("no operation finished within the stall bound")

// progress bounds a load run by its progress instead of a wall-clock
// deadline: the run goes on while operations finish, however slowly a
// loaded machine makes them, and its context ends (with errStalled as the
// cause) once none has finished for stall. Since every operation ends
// within its own bound (a payer's deadline and resend period), a run
// that makes no progress for longer than that is stuck, and the test
// stops by itself.
type progress struct {
	ctx   context.Context
	start time.Time
	stall time.Duration
	done  atomic.Int64
	last  atomic.Int64 // unix nanoseconds of the last finished operation
	stop  func()
}

// watchProgress returns a progress whose context ends when no operation
// has finished for stall; its onDone is the run's onDone (runLoad's), and
// its close must be called when the run ends.
func watchProgress(stall time.Duration) *progress {
	ctx, cancel := context.WithCancelCause(context.Background())
	p := &progress{ctx: ctx, start: time.Now(), stall: stall}
	p.last.Store(p.start.UnixNano())
	quit := make(chan struct{})
	p.stop = func() { close(quit); cancel(nil) }
	go func() {
		tick := time.NewTicker(stall / 20) // checking for progress, not testing time
		defer tick.Stop()
		for {
			select {
			case <-quit:
				return
			case now := <-tick.C:
				if p.stalled(now) {
					cancel(errStalled)
					return
				}
			}
		}
	}()
	return p
}

// onDone records that an operation finished, done in all so far.
func (p *progress) onDone(done int) {
	p.done.Store(int64(done))
	p.last.Store(time.Now().UnixNano())
}

// stalled reports whether no operation has finished for longer than the
// stall bound at now.
func (p *progress) stalled(now time.Time) bool {
	return now.Sub(time.Unix(0, p.last.Load())) > p.stall
}

func (p *progress) close() { p.stop() }

// err returns nil when the run made progress to its end, else a message
// with the diagnostics: how many of the operations finished, when the
// last did, and the operations still unfinished with the requests put on
// the wire for each (up to 20), and detail (the fault proxy's summary).
func (p *progress) err(ops []operation, verdicts []verdict, attempts func(key string) int, detail string) error {
	if !errors.Is(context.Cause(p.ctx), errStalled) {
		return nil
	}
	var open []string
	for i, op := range ops {
		if verdicts[i] == (verdict{}) {
			open = append(open, fmt.Sprintf("%s (%d requests)", op.key, attempts(op.key)))
		}
	}
	sort.Strings(open)
	return fmt.Errorf("%w: %d of %d operations finished in %s, the last %s ago (stall bound %s); unfinished: %s\n%s",
		context.Cause(p.ctx), p.done.Load(), len(ops), time.Since(p.start).Round(time.Millisecond),
		time.Since(time.Unix(0, p.last.Load())).Round(time.Millisecond), p.stall,
		strings.Join(open[:min(len(open), 20)], ", "), detail)
}

// A run is stalled once no operation has finished for longer than the
// bound, from its start or its last finished operation; its error names
// the cause and the operations unfinished.
func TestProgressStalls(t *testing.T) {
	p := watchProgress(time.Hour) // the watchdog never fires here: stalled is asked directly
	require.False(t, p.stalled(p.start.Add(time.Hour)), "at the bound")
	require.True(t, p.stalled(p.start.Add(time.Hour+time.Millisecond)), "past the bound with nothing finished")
	p.onDone(1)
	last := time.Unix(0, p.last.Load())
	require.False(t, p.stalled(last.Add(59*time.Minute)), "an operation finished within the bound")
	require.True(t, p.stalled(last.Add(time.Hour+time.Millisecond)))

	require.NoError(t, p.err(nil, nil, nil, ""), "a run not ended")
	p.close()
	require.NoError(t, p.err(nil, nil, nil, ""), "a run that ended by itself")
	ctx, cancel := context.WithCancelCause(context.Background())
	cancel(errStalled)
	p.ctx = ctx
	ops := []operation{{key: "a"}, {key: "b"}}
	err := p.err(ops, []verdict{{status: 201}, {}}, func(string) int { return 3 }, "proxy summary")
	require.ErrorIs(t, err, errStalled)
	require.Contains(t, err.Error(), "1 of 2 operations finished")
	require.Contains(t, err.Error(), "unfinished: b (3 requests)")
	require.Contains(t, err.Error(), "proxy summary")
}
