package idemredis

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis/internal/lua"
	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

var (
	_ server.UncertainSettler = (*fence)(nil)
	_ server.Resolver         = (*Store)(nil)
)

// Uncertain leaves the reconciler's operation uncertain (lua.Uncertain):
// the record loses its expiry until an operator resolves it.
func (f *fence) Uncertain(ctx context.Context) error {
	return f.write(ctx, lua.Uncertain, []string{f.k.record, f.k.due}, true, f.k.dueMember)
}

// Resolve settles an uncertain operation in one script (lua.Resolve) that
// checks the state as it writes (see [server.Resolver]). The record it
// returns names the operation, its state and the resolution; the rest of
// a [server.Record] is not read.
func (s *Store) Resolve(ctx context.Context, op server.Operation, r server.Resolution) (server.Record, error) {
	k := keysOf(s.cfg.Prefix, fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key), op.Route)
	applied, status, stored, wrote := "0", "", []byte(nil), "not-applied"
	if r.Applied {
		applied, status, wrote = "1", fmt.Sprint(r.Response.Status), "done"
		stored, _ = r.Response.MarshalBinary() // never fails
	}
	token, start := uuid.NewString(), trace.Begin()
	v, err := s.run(ctx, lua.Resolve, []string{k.record, k.running}, true, s.millis(), token, applied,
		status, r.Retention.Milliseconds(), stored, r.By, r.Reason, k.runMember)
	reply, _ := v.([]any)
	kind, _ := at(reply, 0).(string)
	traceResolve(k, kind, wrote, token, start, err)
	switch {
	case (err == nil || errors.Is(err, redis.Nil)) && reply == nil: // the script's false
		return server.Record{}, fmt.Errorf("%w (%s %q)", server.ErrUnknownKey, op.Route, op.Key)
	case err != nil && kind == "":
		return server.Record{}, fmt.Errorf("idemredis: resolve: %w", err)
	case kind == "not":
		state := str(at(reply, 1))
		return server.Record{Operation: op, State: state},
			fmt.Errorf("%w: it is %s (%s %q)", server.ErrNotUncertain, state, op.Route, op.Key)
	}
	rec := resolvedRecord(reply, r)
	return rec, err // err: the replicas did not acknowledge the resolution in time
}

// resolvedRecord is the record that lua.Resolve's reply describes.
func resolvedRecord(reply []any, r server.Resolution) server.Record {
	attempt, _ := at(reply, 5).(int64)
	created, _ := at(reply, 6).(int64)
	now, _ := at(reply, 7).(int64)
	rec := server.Record{State: "not-applied", Mode: server.Leased, CreatedAt: time.UnixMilli(created), ReadAt: time.UnixMilli(now),
		Resolved: &server.Resolved{By: r.By, Reason: r.Reason, At: time.UnixMilli(now), Applied: r.Applied}}
	rec.Operation = server.Operation{Tenant: str(at(reply, 1)), Principal: str(at(reply, 2)), Route: str(at(reply, 3)),
		Key: str(at(reply, 4)), Attempt: int(attempt)}
	if r.Applied {
		rec.State, rec.Status = "done", r.Response.Status
	}
	return rec
}
