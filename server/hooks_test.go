package server

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recorder collects hook calls in order.
type recorder struct {
	mu     sync.Mutex
	events []string
}

func (r *recorder) hook(name string, check func(Event)) func(context.Context, Event) {
	return func(_ context.Context, e Event) {
		if check != nil {
			check(e)
		}
		r.mu.Lock()
		defer r.mu.Unlock()
		r.events = append(r.events, name)
	}
}

func (r *recorder) take() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := strings.Join(r.events, " ")
	r.events = nil
	return s
}

func TestHooksRunInOrder(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		var rec recorder
		durable := func(want bool) func(Event) {
			return func(e Event) {
				if k.pool == nil {
					return
				}
				var n int
				err := k.monitor.QueryRow(context.Background(), `SELECT count(*) FROM idem_records WHERE idem_key = $1 AND state = 'done'`, e.Key).Scan(&n)
				assert.NoError(t, err)
				assert.Equal(t, want, n == 1, "hook sees the record committed = %v", want)
			}
		}
		if k.pool != nil {
			k.monitor = k.pool // the pool is not exhausted here
		}
		hooks := Hooks{
			Claimed: rec.hook("claimed", nil), Handled: rec.hook("handled", durable(false)),
			Committed: rec.hook("committed", durable(true)), Released: rec.hook("released", nil),
			Replayed: rec.hook("replayed", nil), Refused: rec.hook("refused", nil),
		}
		mux, _ := payServer(t, k, Config{Hooks: hooks})
		srv := serve(t, mux)
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-h", `{"amount": 1}`).status)
		assert.Equal(t, "claimed handled committed", rec.take())
		post(t, srv, "/v1/payments", "k-h", `{"amount": 1}`)
		assert.Equal(t, "replayed", rec.take())
		post(t, srv, "/v1/payments", "k-h", `{"amount": 2}`)
		assert.Equal(t, "refused", rec.take())
		post(t, srv, "/v1/payments", "k-h2", `{"amount": -1}`)
		assert.Equal(t, "claimed handled released", rec.take())
		post(t, srv, "/v1/payments", "", `{"amount": 1}`)
		assert.Equal(t, "refused", rec.take(), "key-missing")
	})
}

// A refusal made before the claim (key-missing, key-invalid) still names
// the caller's scope.
func TestRefusalEventsCarryTheScope(t *testing.T) {
	var mu sync.Mutex
	var seen []Event
	refused := func(_ context.Context, e Event) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, e)
	}
	scope := func(*http.Request) (string, string) { return "acme", "alice" }
	mw := Middleware(NewMemoryStore(), quiet(Config{Scope: scope, Hooks: Hooks{Refused: refused}}))
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})))
	srv := serve(t, mux)
	post(t, srv, "/v1/payments", "", `{}`)
	post(t, srv, "/v1/payments", "bad key", `{}`)
	mu.Lock()
	defer mu.Unlock()
	require.Len(t, seen, 2)
	for _, e := range seen {
		assert.Equal(t, "acme", e.Tenant, "problem %s", e.Problem)
		assert.Equal(t, "alice", e.Principal, "problem %s", e.Problem)
	}
}

// A hook that panics before the outcome is settled releases the attempt as
// a panicking handler does: the retry runs, and no connection, transaction
// or scope lock is left held.
func TestPanickingHookReleasesTheAttempt(t *testing.T) {
	for _, name := range []string{"Claimed", "Handled"} {
		t.Run(name, func(t *testing.T) {
			eachStore(t, func(t *testing.T, k *kit) {
				var once sync.Once
				panicOnce := func(context.Context, Event) { once.Do(func() { panic("hook bug") }) }
				var hooks Hooks
				if name == "Claimed" {
					hooks.Claimed = panicOnce
				} else {
					hooks.Handled = panicOnce
				}
				mux, p := payServer(t, k, Config{Hooks: hooks, WaitBound: 100 * time.Millisecond})
				srv := serve(t, mux)
				first := post(t, srv, "/v1/payments", "k-hook", `{"amount": 1}`)
				require.Error(t, first.err, "the panic aborts the response")
				retry := post(t, srv, "/v1/payments", "k-hook", `{"amount": 1}`)
				assert.Equal(t, http.StatusCreated, retry.status, "the retry runs: %s", retry.body)
				assert.False(t, retry.replayed())
				if k.pool != nil {
					assert.EqualValues(t, 0, k.pool.Stat().AcquiredConns(), "connections still acquired")
					assert.Equal(t, 1, k.count(t, "pay"), "only the retry's effect committed")
				}
				assert.Equal(t, map[string]int64{"Claimed": 1, "Handled": 2}[name], p.runs.Load(), "handler runs")
			})
		})
	}
}

// events collects the events of each hook by name.
type events struct {
	mu sync.Mutex
	by map[string][]Event
}

func (e *events) hooks() Hooks {
	rec := func(name string) func(context.Context, Event) {
		return func(_ context.Context, ev Event) {
			e.mu.Lock()
			defer e.mu.Unlock()
			if e.by == nil {
				e.by = map[string][]Event{}
			}
			e.by[name] = append(e.by[name], ev)
		}
	}
	return Hooks{Claimed: rec("claimed"), Handled: rec("handled"), Committed: rec("committed"),
		Released: rec("released"), Replayed: rec("replayed"), Refused: rec("refused")}
}

func (e *events) get(name string) []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.by[name]...)
}

// Events say how long the claim and the commit took, and whether the
// claim waited for a running duplicate: a duplicate that waits past the
// bound (409) and one that waits for the first to commit (a replay) both
// did; the first did not.
func TestEventsTimeTheStoreAndTellAWait(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		g := newGate(t, k)
		var ev events
		node := func(wait time.Duration) *httptest.Server {
			mux := http.NewServeMux()
			mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{WaitBound: wait, Hooks: ev.hooks()}))(g))
			return serve(t, mux)
		}
		patient, hasty := node(time.Minute), node(50*time.Millisecond)
		first := make(chan reply)
		go func() { first <- post(t, patient, "/v1/payments", "k-timed", "{}") }()
		recv(t, g.entered)
		require.Equal(t, http.StatusConflict, post(t, hasty, "/v1/payments", "k-timed", "{}").status)
		k.drainWaiters()
		waiter := make(chan reply)
		go func() { waiter <- post(t, patient, "/v1/payments", "k-timed", "{}") }()
		k.waitForWaiters(t, 1)
		g.open()
		recv(t, first)
		require.True(t, recv(t, waiter).replayed())

		claimed, committed := ev.get("claimed"), ev.get("committed")
		require.Len(t, claimed, 1)
		assert.False(t, claimed[0].Waited, "the first claim found no duplicate")
		assert.Positive(t, claimed[0].Elapsed, "the claim's time")
		require.Len(t, committed, 1)
		assert.Positive(t, committed[0].Elapsed, "the commit's time")
		assert.False(t, committed[0].Unavailable, "the response is stored")
		assert.Zero(t, ev.get("handled")[0].Elapsed)
		refused := ev.get("refused")
		require.Len(t, refused, 1)
		assert.True(t, refused[0].Waited, "the hasty duplicate waited, then got 409")
		assert.GreaterOrEqual(t, refused[0].Elapsed, 40*time.Millisecond, "it waited about its bound")
		replayed := ev.get("replayed")
		require.Len(t, replayed, 1)
		assert.True(t, replayed[0].Waited, "the patient duplicate waited for the commit")
	})
}
