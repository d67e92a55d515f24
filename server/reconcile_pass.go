package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"time"
)

// pass takes over and settles abandoned operations, batch after batch,
// until none is due or ctx is done, and returns how many it took over.
// An operation answered [NotKnown] is due again only after its backoff, so
// a pass ends.
func (rc *reconciler) pass(ctx context.Context) (int, error) {
	total := 0
	for ctx.Err() == nil {
		batch, err := rc.store.TakeAbandoned(ctx, rc.routes, rc.cfg.Lease, rc.cfg.Batch)
		if err != nil {
			return total, fmt.Errorf("server: reconcile: %w", err)
		}
		rc.settleAll(ctx, batch)
		total += len(batch)
		if len(batch) < rc.cfg.Batch {
			return total, nil
		}
	}
	return total, ctx.Err()
}

// settleAll settles batch concurrently, and waits for each operation
// until its lease and the grace have passed, or the grace once ctx is
// done: an operation still not settled then is left (see leave).
func (rc *reconciler) settleAll(ctx context.Context, batch []*Taken) {
	settled := make(chan *Taken, len(batch))
	for _, t := range batch {
		go func() {
			rc.settle(ctx, t)
			settled <- t
		}()
	}
	pending := make(map[*Taken]bool, len(batch))
	for _, t := range batch {
		pending[t] = true
	}
	timeout := time.NewTimer(rc.cfg.Lease + rc.cfg.Grace)
	defer timeout.Stop()
	stopping := ctx.Done()
	for len(pending) > 0 {
		select {
		case t := <-settled:
			delete(pending, t)
		case <-stopping:
			stopping = nil
			timeout.Reset(rc.cfg.Grace)
		case <-timeout.C:
			for t := range pending {
				rc.leave(ctx, t)
			}
			return
		}
	}
}

// leave gives up waiting for t's function, which ignores its context: the
// operation is settled [NotKnown] with errStuck, looked at again after its
// backoff (at once when ctx is done, for another reconciler), unless the
// function's own answer is stored first; the function runs on.
func (rc *reconciler) leave(ctx context.Context, t *Taken) {
	wait := rc.backoff(t.Attempt)
	if ctx.Err() != nil {
		wait = 0
	}
	wctx, cancel := detached(ctx)
	defer cancel()
	ev := ReconcileEvent{Operation: t.Operation, Answer: NotKnown, Err: errStuck}
	if err := t.Settler.Postpone(wctx, wait); err != nil {
		ev.Err = errors.Join(ev.Err, err)
	}
	call(rc.cfg.Hooks.Settled, ctx, ev)
	rc.log(ctx, slog.LevelError, "idem: reconciler went on without a ReconcileFunc that outlived its lease", ev, false)
}

// errStuck is the error of an operation whose [ReconcileFunc] outlived its
// lease and the grace.
var errStuck = errors.New("server: the ReconcileFunc did not return within its lease and ReconcileConfig.Grace: it ignores its context")

// settle asks the route's function about t and stores its answer. The
// answer is stored even when ctx is done: the function's work is done.
func (rc *reconciler) settle(ctx context.Context, t *Taken) {
	ev := ReconcileEvent{Operation: t.Operation}
	call(rc.cfg.Hooks.TakenOver, ctx, ev)
	rc.log(ctx, slog.LevelWarn, "idem: reconciler took over an abandoned operation", ev, false)
	st, err := rc.ask(ctx, t)
	wctx, cancel := detached(ctx)
	defer cancel()
	ev.Answer, ev.Err = st.Answer, err
	switch {
	case err == nil && st.Answer == Completed:
		ev.Status = st.Status
		ev.Err = t.Settler.Complete(wctx, st.response())
	case err == nil && st.Answer == NotHappened:
		ev.Err = t.Settler.Free(wctx)
	case t.Age >= rc.cfg.MaxAge && ctx.Err() == nil:
		rc.park(ctx, wctx, t, ev)
		return
	default:
		ev.Answer = NotKnown
		wait := rc.backoff(t.Attempt)
		if ctx.Err() != nil {
			wait = 0 // stopping: due at once, for another reconciler
		}
		ev.Err = errors.Join(ev.Err, t.Settler.Postpone(wctx, wait))
	}
	call(rc.cfg.Hooks.Settled, ctx, ev)
	rc.log(ctx, settledLevel(ev), "idem: reconciled", ev, true)
}

// park leaves an operation still not known at MaxAge uncertain, for an
// operator to resolve; a store that cannot hold it so ([UncertainSettler])
// settles it as result-unavailable.
func (rc *reconciler) park(ctx, wctx context.Context, t *Taken, ev ReconcileEvent) {
	msg := "idem: operation still not known at its maximum age: uncertain until an operator resolves it"
	var err error
	if u, ok := t.Settler.(UncertainSettler); ok {
		err = u.Uncertain(wctx)
	} else {
		msg = "idem: operation still not known at its maximum age: settled as result-unavailable (the store cannot hold it uncertain)"
		err = t.Settler.Complete(wctx, &Response{Unavailable: true})
	}
	if err != nil {
		ev.Err = errors.Join(ev.Err, err)
		rc.log(ctx, slog.LevelError, "idem: reconciler could not park an operation", ev, false)
		return
	}
	call(rc.cfg.Hooks.Parked, ctx, ev)
	rc.log(ctx, slog.LevelError, msg, ev, true)
}

func settledLevel(ev ReconcileEvent) slog.Level {
	if ev.Err != nil {
		return slog.LevelWarn
	}
	return slog.LevelInfo
}

// ask runs the route's function on t, bounded by the reconciler's lease,
// and checks its answer. A panic in the function is an error.
func (rc *reconciler) ask(ctx context.Context, t *Taken) (st Settlement, err error) {
	fctx, cancel := context.WithTimeout(ctx, rc.cfg.Lease)
	defer cancel()
	r, err := decodeRequest(fctx, t.Request)
	if err != nil {
		return Settlement{}, err
	}
	defer func() {
		if p := recover(); p != nil {
			st, err = Settlement{}, fmt.Errorf("server: ReconcileFunc panicked: %v", p)
		}
	}()
	op := &Abandoned{Operation: t.Operation, Request: r, Recovery: t.Recovery, Age: t.Age}
	st, err = rc.cfg.Routes[t.Route](fctx, op)
	if err == nil {
		err = rc.check(st)
	}
	return st, err
}

// check refuses a [Completed] settlement that the middleware would not
// store.
func (rc *reconciler) check(st Settlement) error {
	switch {
	case st.Answer != Completed:
		return nil
	case st.Status < 200 || st.Status > 499:
		return fmt.Errorf("server: a Completed settlement has status %d: want the operation's own outcome, 2xx to 4xx", st.Status)
	case len(st.Body) > rc.cfg.MaxResponseBytes:
		return fmt.Errorf("server: a Completed settlement's body of %d bytes is over MaxResponseBytes (%d)", len(st.Body), rc.cfg.MaxResponseBytes)
	}
	return nil
}

// response is the stored form of a [Completed] settlement: its header
// without what the middleware never stores.
func (st Settlement) response() *Response {
	never := headerSet(neverReplayed)
	h := http.Header{}
	for name, values := range st.Header {
		if canon := http.CanonicalHeaderKey(name); !never[canon] {
			h[canon] = append(h[canon], values...)
		}
	}
	return &Response{Status: st.Status, Header: h, Body: st.Body}
}

// log writes ev; answered says whether ev.Answer is the function's (it is
// not yet when the operation was just taken over).
func (rc *reconciler) log(ctx context.Context, level slog.Level, msg string, ev ReconcileEvent, answered bool) {
	if !rc.cfg.Logger.Enabled(ctx, level) {
		return
	}
	attrs := []slog.Attr{
		slog.String("tenant", ev.Tenant), slog.String("principal", ev.Principal),
		slog.String("route", ev.Route), slog.String("key", ev.Key), slog.Int("attempt", ev.Attempt),
	}
	if answered {
		attrs = append(attrs, slog.String("answer", ev.Answer.String()))
	}
	if ev.Status > 0 {
		attrs = append(attrs, slog.Int("status", ev.Status))
	}
	if ev.Err != nil {
		attrs = append(attrs, slog.Any("err", ev.Err))
	}
	rc.cfg.Logger.LogAttrs(ctx, level, msg, attrs...)
}
