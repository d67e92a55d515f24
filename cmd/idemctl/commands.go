package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"strconv"

	"github.com/idemkit/idem/internal/opsview"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

func runKey(ctx context.Context, t *tool, args []string) error {
	fs := t.flags("key")
	op := scopeFlags(fs)
	payload := fs.Bool("payload", false, "show the stored request and response (never a sensitive header)")
	ref := fs.Bool("ref", false, "the argument is an operation reference (an answer's Idempotency-Operation-Ref), not a key")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	if *ref {
		return lookupRef(ctx, t, fs, *payload)
	}
	op.Key = fs.Arg(0)
	if !scopeGiven(fs) && !*payload {
		return lookupKey(ctx, t, op.Key)
	}
	if err := checkRoute(op.Route); err != nil {
		return err
	}
	rec, err := t.ops.Lookup(ctx, *op, *payload)
	if err != nil {
		return err
	}
	return t.printRecord(rec)
}

// lookupKey prints the records of key in every scope: an operator who
// knows the key alone learns where it was used.
func lookupKey(ctx context.Context, t *tool, key string) error {
	recs, err := t.ops.LookupKey(ctx, key)
	if err != nil {
		return err
	}
	if len(recs) == 0 {
		return notFound(fmt.Sprintf("no record of key %q in any scope: a retry with it, on any route, runs the handler as a first request", key))
	}
	return t.printKeyRecords(key, recs)
}

// lookupRef prints the record whose operation reference is fs's argument:
// the reference names the scope, so no scope flag may come with it.
func lookupRef(ctx context.Context, t *tool, fs *flag.FlagSet, payload bool) error {
	if scopeGiven(fs) {
		return fmt.Errorf("%w: -ref names the whole scope: give no -tenant, -principal or -route with it", server.ErrBadScope)
	}
	rec, err := t.ops.LookupRef(ctx, fs.Arg(0), payload)
	if errors.Is(err, server.ErrUnknownKey) {
		return notFound(fmt.Sprintf("no record has operation reference %s (never made, swept after its retention, or evicted)", fs.Arg(0)))
	}
	if err != nil {
		return err
	}
	return t.printRecord(rec)
}

// checkRoute refuses a route typed without its method ("/v1/orders"):
// the middleware names a route by its method and pattern, so no record
// has such a route, and "no record" would mislead.
func checkRoute(route string) error {
	if msg := opsview.RouteProblem(route); msg != "" {
		return fmt.Errorf("%w: %s", server.ErrBadScope, msg)
	}
	return nil
}

func runInFlight(ctx context.Context, t *tool, args []string) error {
	fs := t.flags("inflight")
	var q server.InFlightQuery
	fs.BoolVar(&q.Stuck, "stuck", false, "only the stuck ones: lease ended, not yet settled")
	fs.StringVar(&q.Route, "route", "", "only this route")
	fs.IntVar(&q.Limit, "limit", 50, "the most records to print (at most 1000)")
	after := fs.String("after", "", "continue after this position (printed after a full page)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := checkLimit(t, "inflight", q.Limit); err != nil {
		return err
	}
	var err error
	if q.After, err = server.ParsePosition(*after); err != nil {
		fmt.Fprintln(t.e.stderr, "idemctl inflight: -after:", err)
		return errUsage
	}
	page, err := t.ops.InFlight(ctx, q)
	if err != nil {
		return err
	}
	return t.printInFlight(page)
}

func runEvict(ctx context.Context, t *tool, args []string) error {
	fs := t.flags("evict")
	op := scopeFlags(fs)
	force := fs.Bool("force", false, "evict even while the record's lease is live (an attempt may be running)")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	op.Key = fs.Arg(0)
	if !scopeGiven(fs) {
		fmt.Fprintf(t.e.stderr, "idemctl evict: name the record's scope (-route, and -tenant and -principal as stored): idemctl key %s lists the scopes that hold the key\n", opsview.Text(op.Key))
		return errUsage
	}
	if err := checkRoute(op.Route); err != nil {
		return err
	}
	rec, err := t.ops.Lookup(ctx, *op, false) // a bad scope or an unknown key asks nothing
	if err != nil {
		return err
	}
	if !*yes {
		q := fmt.Sprintf("Evict the %s record of key %q on %q (tenant %q, principal %q)? The next request with this key runs the handler again.",
			rec.State, op.Key, op.Route, op.Tenant, op.Principal)
		if err := t.confirm(q); err != nil {
			return err
		}
	}
	rec, err = t.ops.Evict(ctx, *op, *force)
	if err != nil {
		return err
	}
	if t.g.json {
		return t.printJSON(map[string]any{"evicted": recordJSON(rec)})
	}
	fmt.Fprintf(t.e.stdout, "evicted: %s %q (%s, attempt %d): the next request with this key runs the handler again\n",
		op.Route, op.Key, rec.State, rec.Attempt)
	return nil
}

func runParked(ctx context.Context, t *tool, args []string) error {
	fs := t.flags("parked")
	after := fs.Int64("after", 0, "list the messages whose ID is over this one")
	limit := fs.Int("limit", 50, "the most messages to print (at most 1000)")
	if err := parse(fs, args, 0); err != nil {
		return err
	}
	if err := checkLimit(t, "parked", *limit); err != nil {
		return err
	}
	msgs, err := t.outbox.Parked(ctx, *after, *limit)
	if missing := missingTable(err); missing != "" {
		return t.printNoOutbox(missing)
	}
	if err != nil {
		return err
	}
	return t.printParked(msgs, *limit)
}

func runMessage(ctx context.Context, t *tool, args []string) error {
	fs := t.flags("message")
	key := fs.String("key", "", "the message's Idempotency-Key instead of its ID")
	if err := parse(fs, args, -1); err != nil {
		return err
	}
	if want := map[bool]int{true: 0, false: 1}[*key != ""]; fs.NArg() != want {
		fmt.Fprintln(t.e.stderr, "idemctl message: give a message ID or -key, not both")
		return errUsage
	}
	if *key != "" {
		st, err := t.outbox.LookupKey(ctx, *key)
		if err != nil {
			return err
		}
		return t.printMessage(st)
	}
	id, err := messageID(t, fs.Arg(0))
	if err != nil {
		return err
	}
	st, err := t.outbox.Lookup(ctx, id)
	if err != nil {
		return err
	}
	return t.printMessage(st)
}

func runRedrive(ctx context.Context, t *tool, args []string) error {
	fs := t.flags("redrive")
	past := fs.Bool("past-retention", false, "send it even when the downstream may have forgotten its key (may run the operation twice)")
	yes := fs.Bool("yes", false, "with -past-retention, do not ask for confirmation")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	id, err := messageID(t, fs.Arg(0))
	if err != nil {
		return err
	}
	// An unknown or unparked message is refused before the question.
	st, err := t.outbox.Lookup(ctx, id)
	if err != nil {
		return err
	}
	if st.State != outbox.StateParked {
		return fmt.Errorf("%w: message %d is %s", outbox.ErrNotParked, id, st.State)
	}
	if *past {
		if !*yes {
			q := fmt.Sprintf("Re-drive message %d even if the downstream may have forgotten its key? It may run the operation a second time there.", id)
			if err := t.confirm(q); err != nil {
				return err
			}
		}
		err = t.outbox.RedrivePastRetention(ctx, id)
	} else {
		err = t.outbox.Redrive(ctx, id)
	}
	if err != nil {
		return err
	}
	if t.g.json {
		return t.printJSON(map[string]any{"redriven": id})
	}
	fmt.Fprintf(t.e.stdout, "redriven: message %d is due again, with its key and a new retry window\n", id)
	return nil
}

func runStats(ctx context.Context, t *tool, args []string) error {
	if err := parse(t.flags("stats"), args, 0); err != nil {
		return err
	}
	counts, err := t.ops.Counts(ctx)
	if err != nil {
		return err
	}
	s := stats{Records: counts}
	if t.outbox == nil {
		s.NoOutbox = "no database given (-db)"
		return t.printStats(s)
	}
	st, err := t.outbox.Stats(ctx)
	switch s.NoOutbox = missingTable(err); {
	case s.NoOutbox != "":
	case err != nil:
		return err
	default:
		s.Outbox = &st
	}
	return t.printStats(s)
}

// messageID reads a message ID argument.
func messageID(t *tool, arg string) (int64, error) {
	id, err := strconv.ParseInt(arg, 10, 64)
	if err != nil || id <= 0 {
		fmt.Fprintf(t.e.stderr, "idemctl: %q is not a message ID\n", arg)
		return 0, errUsage
	}
	return id, nil
}

// maxLimit is the most records or messages a page may hold (the
// Operator's own bound on [server.InFlightQuery.Limit]).
const maxLimit = 1000

// checkLimit refuses a -limit outside 1 to maxLimit.
func checkLimit(t *tool, cmd string, limit int) error {
	if limit < 1 || limit > maxLimit {
		fmt.Fprintf(t.e.stderr, "idemctl %s: -limit is %d: it must be 1 to %d\n", cmd, limit, maxLimit)
		return errUsage
	}
	return nil
}

// scopeGiven reports whether fs was given a scope flag (-tenant,
// -principal or -route), even an empty one.
func scopeGiven(fs *flag.FlagSet) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == "tenant" || f.Name == "principal" || f.Name == "route" })
	return given
}

// notFound is an error that says msg and matches [server.ErrUnknownKey].
type notFound string

func (e notFound) Error() string { return string(e) }
func (e notFound) Unwrap() error { return server.ErrUnknownKey }
