package idemredis

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis/internal/lua"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
)

// fence is one attempt on a record, under its token: a claim's
// ([server.LeasedAttempt]) or a reconciler's ([server.Settler]). Each write is
// a script that changes nothing and answers 0 when the token is stale.
type fence struct {
	s     *Store
	k     keys
	token string
	n     int
	rec   *server.Recovery // nil on a first attempt
}

var (
	_ server.LeasedAttempt = (*fence)(nil)
	_ server.Settler       = (*fence)(nil)
)

func (f *fence) Number() int { return f.n }

func (f *fence) Recovery() (server.Recovery, bool) {
	if f.rec == nil {
		return server.Recovery{}, false
	}
	return *f.rec, true
}

// verdict turns the claim script's reply into a ClaimResult.
func (f *fence) verdict(kind string, reply []any) (server.ClaimResult, error) {
	switch kind {
	case "claimed":
		n, _ := at(reply, 1).(int64)
		f.n = int(n)
		if n > 1 {
			f.rec = &server.Recovery{}
			f.rec.Point, _ = at(reply, 2).(string)
			if data, ok := at(reply, 3).(string); ok {
				f.rec.Data = json.RawMessage(data)
			}
		}
		return server.ClaimResult{Verdict: server.VerdictClaimed, Attempt: f}, nil
	case "replay":
		res, err := decodeResponse(reply[1:])
		out := server.ClaimResult{Verdict: server.VerdictReplay, Response: res}
		if ex, ok := at(reply, 4).(int64); ok {
			out.Expires = time.UnixMilli(ex) // the record's expiry, by the store's clock
		}
		return out, err
	case "inflight":
		left, _ := at(reply, 1).(int64)
		return server.ClaimResult{Verdict: server.VerdictInFlight, RetryAfter: time.Duration(left) * time.Millisecond}, nil
	case "mismatch":
		return server.ClaimResult{Verdict: server.VerdictMismatch}, nil
	case "unavailable":
		return server.ClaimResult{Verdict: server.VerdictUnavailable}, nil
	case "uncertain":
		return server.ClaimResult{Verdict: server.VerdictUncertain}, nil
	}
	return server.ClaimResult{}, fmt.Errorf("idemredis: the claim script answered %q", kind)
}

// write runs a fenced script: ErrLeaseLost when it changed nothing (0),
// after the store reads maxmemory-policy again when the record is gone
// (-1): an eviction takes the records of running operations too.
func (f *fence) write(ctx context.Context, sc *redis.Script, keys []string, durable bool, args ...any) error {
	start := trace.Begin()
	err := f.runFenced(ctx, sc, keys, durable, args...)
	if trace.On() {
		f.traceWrite(sc, args, start, err)
	}
	return err
}

func (f *fence) runFenced(ctx context.Context, sc *redis.Script, keys []string, durable bool, args ...any) error {
	v, err := f.s.run(ctx, sc, keys, durable, append([]any{f.s.millis(), f.token}, args...)...)
	if n, _ := v.(int64); n <= 0 && err == nil {
		if n < 0 {
			f.s.recordGone(ctx)
		}
		return server.ErrLeaseLost
	}
	if err != nil {
		return fmt.Errorf("idemredis: %w", err)
	}
	return nil
}

func (f *fence) Complete(ctx context.Context, res *server.Response) error {
	state, status := "done", fmt.Sprint(res.Status)
	if res.Unavailable {
		state = "unavailable"
	}
	// The header field holds the whole response in its stored form, the
	// body field nothing: see decodeResponse.
	stored, _ := res.MarshalBinary() // never fails
	return f.write(ctx, lua.Complete, []string{f.k.record, f.k.due, f.k.running}, completeDurable(),
		state, status, stored, "", f.k.dueMember, f.k.runMember)
}

func (f *fence) Abort(ctx context.Context, reject bool) error {
	refused := "0"
	if reject {
		refused = "1"
	}
	return f.write(ctx, lua.Abort, []string{f.k.record, f.k.due, f.k.running}, false,
		refused, f.k.dueMember, f.k.runMember)
}

func (f *fence) Extend(ctx context.Context, d, margin time.Duration) error {
	return f.write(ctx, lua.Extend, []string{f.k.record, f.k.due}, true,
		d.Milliseconds(), margin.Milliseconds(), f.k.dueMember)
}

func (f *fence) Checkpoint(ctx context.Context, point string, data []byte) error {
	has := "0"
	if data != nil {
		has = "1"
	}
	return f.write(ctx, lua.Checkpoint, []string{f.k.record}, true, point, data, has)
}

func (f *fence) Free(ctx context.Context) error {
	return f.write(ctx, lua.Free, []string{f.k.record, f.k.due, f.k.running}, false, f.k.dueMember, f.k.runMember)
}

func (f *fence) Postpone(ctx context.Context, wait time.Duration) error {
	return f.write(ctx, lua.Postpone, []string{f.k.record, f.k.due}, false, wait.Milliseconds(), f.k.dueMember)
}
