package idemredis

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/idemredis/internal/lua"
	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// Store implements the optional [server.RecordStore], so that idemctl's
// library, the [server.Operator], and the admin page read and evict its
// records, and the optional [server.RefReader] (a lookup by operation
// reference). Lookups and evictions are one script each; the lists read each
// bucket's running index; the counts and a lookup by key alone scan the
// keyspace (see [Store.CountRecords] and [Store.FindKey]).
var (
	_ server.RecordStore = (*Store)(nil)
	_ server.RefReader   = (*Store)(nil)
)

// recordFields are the fields of a record an operator reads, in the order
// of parseRecord; payloadFields follow them when the payload is asked for.
var (
	recordFields  = []any{"st", "att", "lu", "ra", "ca", "ex", "fa", "tn", "pr", "rt", "ky", "rp", "rd", "sc"}
	payloadFields = []any{"rq", "hd", "bd"}
)

// ReadRecord returns the record of op's scope (see [server.RecordStore]),
// in one script.
func (s *Store) ReadRecord(ctx context.Context, op server.Operation, payload bool) (server.Record, error) {
	k := keysOf(s.cfg.Prefix, fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key), op.Route)
	rec, found, err := s.read(ctx, k, payload)
	switch {
	case err != nil:
		return server.Record{}, fmt.Errorf("idemredis: read record: %w", err)
	case !found:
		return server.Record{}, fmt.Errorf("%w (%s)", server.ErrUnknownKey, describe(op))
	}
	return rec, nil
}

// ReadRef returns the record whose scope hash is scope (see
// [server.RefReader]), in one script: the record's key is its scope's.
func (s *Store) ReadRef(ctx context.Context, scope [32]byte, payload bool) (server.Record, error) {
	rec, found, err := s.read(ctx, keysOf(s.cfg.Prefix, scope, ""), payload)
	switch {
	case err != nil:
		return server.Record{}, fmt.Errorf("idemredis: read record: %w", err)
	case !found:
		return server.Record{}, fmt.Errorf("%w (operation reference %x)", server.ErrUnknownKey, scope)
	}
	return rec, nil
}

// read reads the record at k's keys; found is false when there is none.
func (s *Store) read(ctx context.Context, k keys, payload bool) (rec server.Record, found bool, err error) {
	fields := recordFields
	if payload {
		fields = append(slices.Clone(recordFields), payloadFields...)
	}
	v, err := lua.Read.Run(ctx, s.c, []string{k.record}, append([]any{s.millis()}, fields...)...).Slice()
	if err != nil {
		return server.Record{}, false, err
	}
	values, _ := at(v, 1).([]any)
	if values == nil {
		return server.Record{}, false, nil
	}
	rec, err = parseRecord(at(v, 0), values, payload)
	return rec, err == nil, err
}

// DeleteRecord deletes the record of op's scope and its members of the
// indexes (see [server.RecordStore]), in one script that refuses a live
// lease unless force. The attempt that held it then finds its record gone:
// its later writes fail with [server.ErrLeaseLost].
func (s *Store) DeleteRecord(ctx context.Context, op server.Operation, force bool) (server.Record, error) {
	k := keysOf(s.cfg.Prefix, fingerprint.Scope(op.Tenant, op.Principal, op.Route, op.Key), op.Route)
	flag := "0"
	if force {
		flag = "1"
	}
	args := append([]any{s.millis(), flag, k.dueMember, k.runMember}, recordFields...)
	start := trace.Begin()
	v, err := s.run(ctx, lua.Evict, []string{k.record, k.due, k.running}, true, args...)
	reply, _ := v.([]any)
	if trace.On() {
		kind, _ := at(reply, 0).(string)
		emitRedis(k, trace.Step{Op: trace.Evict, OK: kind == "deleted"}, start, err)
	}
	if err != nil {
		return server.Record{}, fmt.Errorf("idemredis: evict: %w", err)
	}
	kind, _ := at(reply, 0).(string)
	if kind == "none" {
		return server.Record{}, fmt.Errorf("%w (%s)", server.ErrUnknownKey, describe(op))
	}
	values, _ := at(reply, 2).([]any)
	rec, err := parseRecord(at(reply, 1), values, false)
	if err != nil {
		return server.Record{}, err
	}
	if kind == "live" {
		return rec, fmt.Errorf("%w (%s)", server.ErrLeaseLive, describe(op))
	}
	return rec, nil
}

// ListRunning returns a page of running records (see [server.RecordStore]):
// it reads every member of each bucket's running index, then each record.
func (s *Store) ListRunning(ctx context.Context, q server.InFlightQuery) ([]server.Record, error) {
	all, err := s.running(ctx)
	if err != nil {
		return nil, fmt.Errorf("idemredis: list running records: %w", err)
	}
	var out []server.Record
	for _, r := range all {
		if (q.Route == "" || r.Route == q.Route) && (!q.Stuck || r.Stuck()) && comparePositions(positionOf(r), q.After) > 0 {
			out = append(out, r)
		}
	}
	return out[:min(len(out), max(q.Limit, 0))], nil
}

// running reads the running records of every bucket, in list order.
func (s *Store) running(ctx context.Context) ([]server.Record, error) {
	var out []server.Record
	for b := range buckets {
		members, err := s.c.ZRange(ctx, bucketTag(s.cfg.Prefix, b)+":run", 0, -1).Result()
		if err != nil {
			return nil, err
		}
		for _, m := range members {
			k, ok := keysOfRunning(s.cfg.Prefix, b, m)
			if !ok {
				continue
			}
			rec, found, err := s.read(ctx, k, false)
			if err != nil {
				return nil, err
			}
			if found && rec.State == "running" {
				out = append(out, rec)
			}
		}
	}
	slices.SortFunc(out, func(a, b server.Record) int { return comparePositions(positionOf(a), positionOf(b)) })
	return out, nil
}

// positionOf is rec's place in the list of operations in flight.
func positionOf(rec server.Record) server.Position {
	return server.Position{CreatedAt: rec.CreatedAt, Tenant: rec.Tenant, Principal: rec.Principal, Route: rec.Route, Key: rec.Key}
}

// comparePositions orders positions by CreatedAt, then tenant, principal,
// route and key, as bytes (as [server.RecordStore.ListRunning] says).
func comparePositions(a, b server.Position) int {
	return cmp.Or(a.CreatedAt.Compare(b.CreatedAt), strings.Compare(a.Tenant, b.Tenant),
		strings.Compare(a.Principal, b.Principal), strings.Compare(a.Route, b.Route), strings.Compare(a.Key, b.Key))
}

// describe names op's scope in an error.
func describe(op server.Operation) string {
	return fmt.Sprintf("tenant %q, principal %q, route %q, key %q", op.Tenant, op.Principal, op.Route, op.Key)
}

// millisTime is a record's time field (Unix milliseconds) as a time; the
// zero time for 0 or a missing field.
func millisTime(v any) time.Time {
	n, _ := strconv.ParseInt(str(v), 10, 64)
	if n == 0 {
		return time.Time{}
	}
	return time.UnixMilli(n)
}

// parseRecord builds a record from the clock and the values of
// recordFields (and payloadFields when payload) that a script read.
func parseRecord(now any, v []any, payload bool) (server.Record, error) {
	clock, _ := now.(int64)
	rec := server.Record{State: str(at(v, 0)), Mode: server.Leased, CreatedAt: millisTime(at(v, 4)),
		ExpiresAt: millisTime(at(v, 5)), ReconcileAt: millisTime(at(v, 3)), FingerprintAlg: str(at(v, 6)),
		ReadAt: time.UnixMilli(clock)}
	rec.Tenant, rec.Principal, rec.Route, rec.Key = str(at(v, 7)), str(at(v, 8)), str(at(v, 9)), str(at(v, 10))
	rec.Attempt, _ = strconv.Atoi(str(at(v, 1)))
	rec.Status, _ = strconv.Atoi(str(at(v, 13)))
	if rec.State == "running" {
		rec.LeaseEnds = millisTime(at(v, 2))
	}
	if point, ok := at(v, 11).(string); ok {
		rec.Recovery = &server.Recovery{Point: point, Data: []byte(str(at(v, 12)))}
	}
	if !payload {
		return rec, nil
	}
	return rec, setPayload(&rec, at(v, 14), at(v, 15), at(v, 16))
}

// setPayload decodes a record's stored request and response into rec.
func setPayload(rec *server.Record, request, header, body any) error {
	if req := str(request); req != "" {
		r, err := server.ParseStoredRequest([]byte(req))
		if err != nil {
			return fmt.Errorf("idemredis: stored request: %w", err)
		}
		rec.Request = r
	}
	if rec.State != "done" && rec.State != "unavailable" {
		return nil
	}
	res, err := decodeResponse([]any{strconv.Itoa(rec.Status), header, body})
	if err != nil {
		return err
	}
	rec.Header, rec.Body = res.Header, res.Body
	return nil
}
