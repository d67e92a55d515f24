package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// runner is one claimed run of the handler: it captures the response,
// settles the outcome (commit and store, or roll back and release) and only
// then lets the response out.
type runner struct {
	h       *handler
	w       http.ResponseWriter
	r       *http.Request // the request as the handler was given it: its protocol answers a refusal
	ex      Exchange      // the framework's view of the request (answerer: takes a refusal as a value)
	cw      *capture
	att     Attempt
	ls      *Lease // Leased mode: the handler's view of att
	c       *Claim
	ctx     context.Context
	ev      Event
	settled bool      // att completed or aborted: never touch it again
	expires time.Time // when the record's retention ends, if it is kept
	joined  *sent     // the response the app's transaction stored (StoreInTx)
}

func (h *handler) run(w http.ResponseWriter, r *http.Request, ev Event, c *Claim, att Attempt, ex Exchange, expires time.Time) {
	x := &runner{h: h, w: w, r: r, ex: ex, att: att, c: c, ev: ev, expires: expires}
	if c.Mode == Leased {
		x.ls = newLease(leasedOf(att), c.Lease)
	}
	x.ctx = context.WithValue(r.Context(), runnerKey{}, x)
	x.ev.Attempt = att.Number()
	x.cw = newCapture(w, h.s.MaxResponseBytes)
	x.cw.onStream = x.settleEarly
	defer x.onPanic() // also for a hook that panics
	call(h.s.Hooks.Claimed, x.ctx, x.ev)
	if att.Number() > 1 {
		h.s.log(x.ctx, slog.LevelWarn, "idem: took over an expired lease", x.ev)
	} else {
		h.s.log(x.ctx, slog.LevelDebug, "idem: claimed", x.ev)
	}
	h.callNext(x.cw, r.WithContext(x.ctx), ex)
	x.finish()
}

// finish settles the outcome of a handler that returned.
func (x *runner) finish() {
	if x.settled {
		return // settled when the response started streaming
	}
	if x.joined != nil {
		x.finishJoined()
		return
	}
	x.cw.finish()
	x.ev.Status, x.ev.Elapsed = x.cw.status, 0
	call(x.h.s.Hooks.Handled, x.ctx, x.ev)
	o := x.h.s.outcome(x.cw.status)
	switch o {
	case outcomeStore:
		if err := x.complete(stateDone); err != nil {
			x.commitFailed(err)
			return
		}
	case outcomeReject:
		x.release(true, nil)
	case outcomeFail:
		x.release(false, nil)
	}
	x.tell(x.standing(o))
	x.cw.send(true)
}

// settleEarly settles the outcome when the handler streams (Flush,
// Hijack, a body over the cap), before any byte leaves, by the status it
// chose: the operation's own outcome commits as result-unavailable, so a
// retry never runs it again; a 5xx or a rejection status rolls back or
// releases as it would unstreamed, so a retry runs afresh.
func (x *runner) settleEarly() error {
	if x.joined != nil {
		return errJoinedStream
	}
	x.ev.Status, x.ev.Elapsed = x.cw.status, 0
	call(x.h.s.Hooks.Handled, x.ctx, x.ev)
	o := x.h.s.outcome(x.cw.status)
	st := x.standing(o)
	switch o {
	case outcomeReject:
		x.release(true, nil)
	case outcomeFail:
		x.release(false, nil)
	default:
		x.ev.Unavailable = true
		if err := x.complete(stateUnavailable); err != nil {
			x.commitFailed(err)
			return err
		}
		st.state = wire.StateUnavailable
	}
	x.tell(st)
	return nil
}

func (x *runner) complete(state recordState) error {
	ctx, cancel := x.settleContext()
	defer cancel()
	start := time.Now()
	err := x.att.Complete(ctx, x.cw.response(state, x.h.s.allow))
	x.settled, x.ev.Elapsed = true, time.Since(start)
	if err != nil {
		return err
	}
	call(x.h.s.Hooks.Committed, x.ctx, x.ev)
	x.h.s.log(x.ctx, slog.LevelDebug, "idem: committed", x.ev)
	return nil
}

// commitFailed answers for an outcome that did not become durable: never
// the handler's response, which would claim effects that did not commit.
func (x *runner) commitFailed(err error) {
	x.ev.Err = err
	if errors.Is(err, ErrLeaseLost) {
		x.ev.Problem = wire.ProblemKeyInFlight
		call(x.h.s.Hooks.StaleCompletion, x.ctx, x.ev)
		x.h.s.log(x.ctx, slog.LevelWarn, "idem: stale completion refused: another attempt owns the key", x.ev)
		p := keyInFlight(time.Second)
		p.st.ref = refOf(x.c.Scope)
		x.h.s.answerRefusal(x.w, x.r, x.ex, p)
		return
	}
	x.ev.Problem = problemCommitFailed
	call(x.h.s.Hooks.Released, x.ctx, x.ev)
	x.h.s.log(x.ctx, slog.LevelError, "idem: commit failed", x.ev)
	p := commitFailed(err)
	p.st.ref = refOf(x.c.Scope)
	x.h.s.answerRefusal(x.w, x.r, x.ex, p)
}

// release rolls the attempt back ([Transactional]), or releases the key or
// ends the lease ([Leased]); reject says the request itself was refused.
func (x *runner) release(reject bool, cause error) {
	ctx, cancel := x.settleContext()
	defer cancel()
	start := time.Now()
	x.ev.Err = errors.Join(cause, x.att.Abort(ctx, reject))
	x.settled, x.ev.Elapsed = true, time.Since(start)
	call(x.h.s.Hooks.Released, x.ctx, x.ev)
	level := slog.LevelInfo
	if errors.Is(x.ev.Err, ErrTxEnded) { // what the handler committed itself stays, with no record
		level = slog.LevelError
	}
	x.h.s.log(x.ctx, level, "idem: released", x.ev)
}

// settleContext is the context of the attempt's Complete or Abort:
// [detached], or, for an attempt that settles in memory without reading
// its context, x.ctx without its cancellation and with no timer to start
// and stop on every request.
func (x *runner) settleContext() (context.Context, context.CancelFunc) {
	if _, ok := x.att.(inMemory); ok {
		return context.WithoutCancel(x.ctx), func() {}
	}
	return detached(x.ctx)
}

// onPanic releases the attempt of a handler or hook that panicked, unless
// the attempt was already completed or aborted, and panics on.
func (x *runner) onPanic() {
	p := recover()
	if p == nil {
		return
	}
	if !x.settled {
		x.release(false, fmt.Errorf("server: handler panicked: %v", p))
	}
	panic(p)
}

// leasedOf is att as the [LeasedAttempt] that a store must give a [Leased]
// claim; a store that does not breaks its contract, and the request
// panics (net/http recovers it) after the attempt is aborted.
func leasedOf(att Attempt) LeasedAttempt {
	a, ok := att.(LeasedAttempt)
	if !ok {
		ctx, cancel := detached(context.Background())
		defer cancel()
		_ = att.Abort(ctx, true)
		panic(fmt.Sprintf("server: a store answered a Leased claim with a %T, which is not a LeasedAttempt", att))
	}
	return a
}
