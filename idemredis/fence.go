package idemredis

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis/internal/lua"
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

// write runs a fenced script: ErrLeaseLost when it changed nothing.
func (f *fence) write(ctx context.Context, sc *redis.Script, keys []string, durable bool, args ...any) error {
	v, err := f.s.run(ctx, sc, keys, durable, append([]any{f.s.millis(), f.token}, args...)...)
	if n, _ := v.(int64); n == 0 && err == nil {
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
	return f.write(ctx, lua.Complete, []string{f.k.record, f.k.due, f.k.running}, false,
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
	return f.write(ctx, lua.Extend, []string{f.k.record, f.k.due}, false,
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
