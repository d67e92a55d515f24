package server

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
)

const reconciledRoute = "POST /v1/accounts/{acct}/charges"

// abandoning is a Leased handler whose first attempt charges (one
// "gateway" effect, recovery point "charged") and then answers 502, so
// that the operation is abandoned with its lease ended; a later attempt
// answers 201 with what it recovered.
type abandoning struct {
	k    *kit
	runs atomic.Int64
}

func (a *abandoning) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	a.runs.Add(1)
	ls, _ := LeaseFrom(r.Context())
	if rec, took := ls.Recovery(); took {
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(map[string]any{"attempt": ls.Attempt(), "point": rec.Point})
		return
	}
	_ = a.k.effect(r.Context(), "gateway")
	_ = ls.Checkpoint(r.Context(), "charged", json.RawMessage(`{"charge":"ch_1"}`))
	w.WriteHeader(http.StatusBadGateway)
}

func abandoningServer(t *testing.T, k *kit, h http.Handler) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	cfg := Config{Mode: Leased, Lease: 30 * time.Second, FingerprintHeaders: []string{"X-Api-Version"},
		Scope: func(*http.Request) (string, string) { return "acme", "alice" }}
	mux.Handle(reconciledRoute, Middleware(k.store, quiet(cfg))(h))
	return serve(t, mux)
}

// testReconciler is a reconciler over k's store with a jitter of zero:
// the backoff of attempt n is half of Interval * 2^(n-2).
func testReconciler(t *testing.T, k *kit, cfg ReconcileConfig) *reconciler {
	t.Helper()
	cfg.Logger = quiet(Config{}).Logger
	rc, err := newReconciler(k.store, cfg)
	require.NoError(t, err)
	rc.rand = func() float64 { return 0 }
	return rc
}

func answer(st Settlement) map[string]ReconcileFunc {
	return map[string]ReconcileFunc{reconciledRoute: func(context.Context, *Abandoned) (Settlement, error) { return st, nil }}
}

func runPass(t *testing.T, rc *reconciler) int {
	t.Helper()
	n, err := rc.pass(context.Background())
	require.NoError(t, err)
	return n
}

func TestReconcileCompleted(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		h := &abandoning{k: k}
		srv := abandoningServer(t, k, h)
		first := post(t, srv, "/v1/accounts/a-1/charges?src=app", "k-rec", `{"amount": 5}`,
			"Authorization", "Bearer secret", "X-Api-Version", "7", "Content-Type", "application/json")
		require.Equal(t, http.StatusBadGateway, first.status)

		var seen *Abandoned
		var body []byte
		rc := testReconciler(t, k, ReconcileConfig{Routes: map[string]ReconcileFunc{
			reconciledRoute: func(_ context.Context, op *Abandoned) (Settlement, error) {
				seen = op
				body, _ = io.ReadAll(op.Request.Body)
				return Settlement{Answer: Completed, Status: http.StatusCreated,
					Header: http.Header{"Content-Type": {"application/json"}, "Set-Cookie": {"no"}},
					Body:   []byte(`{"charge":"ch_1","reconciled":true}`)}, nil
			}}})
		assert.Equal(t, 1, runPass(t, rc))
		require.NotNil(t, seen)
		assert.Equal(t, Operation{Tenant: "acme", Principal: "alice", Route: reconciledRoute, Key: "k-rec", Attempt: 2}, seen.Operation)
		assert.Equal(t, Recovery{Point: "charged", Data: json.RawMessage(`{"charge": "ch_1"}`)}.Point, seen.Recovery.Point)
		assert.JSONEq(t, `{"charge":"ch_1"}`, string(seen.Recovery.Data))
		assert.Equal(t, http.MethodPost, seen.Request.Method)
		assert.Equal(t, "/v1/accounts/a-1/charges?src=app", seen.Request.URL.RequestURI())
		assert.Equal(t, "a-1", seen.Request.PathValue("acct"))
		assert.Equal(t, reconciledRoute, seen.Request.Pattern)
		assert.Equal(t, `{"amount": 5}`, string(body))
		assert.Equal(t, "application/json", seen.Request.Header.Get("Content-Type"))
		assert.Equal(t, "7", seen.Request.Header.Get("X-Api-Version"), "a fingerprinted header")
		assert.Empty(t, seen.Request.Header.Get("Authorization"), "credentials are never stored")

		again := post(t, srv, "/v1/accounts/a-1/charges?src=app", "k-rec", `{"amount": 5}`, "X-Api-Version", "7")
		require.Equal(t, http.StatusCreated, again.status, again.body)
		assert.True(t, again.replayed())
		assert.Equal(t, `{"charge":"ch_1","reconciled":true}`, again.body)
		assert.Equal(t, "application/json", again.header.Get("Content-Type"))
		assert.Empty(t, again.header.Get("Set-Cookie"))
		assert.EqualValues(t, 1, h.runs.Load(), "the handler never ran again")
		assert.Zero(t, runPass(t, rc), "a settled operation is not taken again")
	})
}

func TestReconcileNotHappenedFreesTheKey(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		h := &abandoning{k: k}
		srv := abandoningServer(t, k, h)
		require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/accounts/a-1/charges", "k-gone", `{}`).status)
		var settled []ReconcileEvent
		rc := testReconciler(t, k, ReconcileConfig{Routes: answer(Settlement{Answer: NotHappened}),
			Hooks: ReconcileHooks{Settled: func(_ context.Context, e ReconcileEvent) { settled = append(settled, e) }}})
		assert.Equal(t, 1, runPass(t, rc))
		require.Len(t, settled, 1)
		assert.Equal(t, NotHappened, settled[0].Answer)
		assert.NoError(t, settled[0].Err)

		h.runs.Store(100) // the fresh attempt must not take the earlier one's recovery path
		fresh := post(t, srv, "/v1/accounts/a-1/charges", "k-gone", `{"other": "body"}`)
		assert.Equal(t, http.StatusBadGateway, fresh.status, "a first attempt again, with any body: nothing is stored")
		assert.Equal(t, 2, k.count(t, "gateway"), "the retry executed afresh")
	})
}

func TestReconcileNotKnownBacksOff(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		srv := abandoningServer(t, k, &abandoning{k: k})
		require.Equal(t, http.StatusBadGateway, post(t, srv, "/v1/accounts/a-1/charges", "k-wait", `{}`).status)
		var calls atomic.Int64
		rc := testReconciler(t, k, ReconcileConfig{Interval: time.Minute, Routes: map[string]ReconcileFunc{
			reconciledRoute: func(context.Context, *Abandoned) (Settlement, error) { calls.Add(1); return Settlement{}, nil }}})

		assert.Equal(t, 1, runPass(t, rc))
		assert.Zero(t, runPass(t, rc), "not due again before its backoff")
		k.clock.Advance(29 * time.Second)
		assert.Zero(t, runPass(t, rc), "attempt 2: half of one Interval, no jitter")
		k.clock.Advance(2 * time.Second)
		assert.Equal(t, 1, runPass(t, rc))
		k.clock.Advance(59 * time.Second)
		assert.Zero(t, runPass(t, rc), "attempt 3: half of two Intervals")
		assert.EqualValues(t, 2, calls.Load())

		retry := post(t, srv, "/v1/accounts/a-1/charges", "k-wait", `{}`)
		require.Equal(t, http.StatusCreated, retry.status, "a retry between passes takes over as usual: %s", retry.body)
		assert.JSONEq(t, `{"attempt":4,"point":"charged"}`, retry.body)
		k.clock.Advance(time.Hour)
		assert.Zero(t, runPass(t, rc), "a completed operation is never taken")
	})
}

func TestReconcileLeavesLiveLeasesAndOtherRoutes(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		live := leasedClaim(t, k, "k-live", 30*time.Second, time.Hour)
		require.Equal(t, VerdictClaimed, live.Verdict)
		other := leasedClaim(t, k, "k-other", 30*time.Second, time.Hour) // route "POST /v1/charges"
		require.NoError(t, other.Attempt.Abort(context.Background(), false))
		var calls atomic.Int64
		rc := testReconciler(t, k, ReconcileConfig{Routes: map[string]ReconcileFunc{
			"POST /v1/refunds": func(context.Context, *Abandoned) (Settlement, error) { calls.Add(1); return Settlement{}, nil }}})
		assert.Zero(t, runPass(t, rc), "another route's abandoned operation")
		rc.routes = []string{"POST /v1/charges"}
		rc.cfg.Routes = map[string]ReconcileFunc{"POST /v1/charges": rc.cfg.Routes["POST /v1/refunds"]}
		assert.Equal(t, 1, runPass(t, rc), "the abandoned one; never the live lease")
		assert.EqualValues(t, 1, calls.Load())
	})
}

func TestReconcileFencesTheStalledAttempt(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		entered, release := make(chan struct{}, 1), make(chan struct{})
		c := &charge{k: k, act: func(_ context.Context, _ *Lease, w http.ResponseWriter) {
			entered <- struct{}{}
			hold(t, release) // the node stalls past its lease
			w.WriteHeader(http.StatusCreated)
		}}
		mux := http.NewServeMux()
		mux.Handle(reconciledRoute, Middleware(k.store, quiet(Config{Mode: Leased, Lease: 30 * time.Second}))(c))
		srv := serve(t, mux)
		owner := make(chan reply)
		go func() { owner <- post(t, srv, "/v1/accounts/a-1/charges", "k-stall", `{}`) }()
		recv(t, entered)

		inFn, letGo := make(chan struct{}), make(chan struct{})
		rc := testReconciler(t, k, ReconcileConfig{Routes: map[string]ReconcileFunc{
			reconciledRoute: func(ctx context.Context, op *Abandoned) (Settlement, error) {
				close(inFn)
				hold(t, letGo)
				return Settlement{Answer: Completed, Status: 201, Body: []byte(`{"by":"reconciler"}`)}, nil
			}}})
		assert.Zero(t, runPass(t, rc), "the lease is live")
		k.clock.Advance(31 * time.Second)
		passed := make(chan int)
		go func() { n, _ := rc.pass(context.Background()); passed <- n }()
		recv(t, inFn)

		busy := post(t, srv, "/v1/accounts/a-1/charges", "k-stall", `{}`)
		assert.Equal(t, http.StatusConflict, busy.status, "a retry while the reconciler holds the lease")
		assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, busy))
		close(letGo)
		assert.Equal(t, 1, recv(t, passed))

		close(release)
		late := recv(t, owner)
		assert.Equal(t, http.StatusConflict, late.status, "the stalled attempt's completion is refused: %s", late.body)
		settled := post(t, srv, "/v1/accounts/a-1/charges", "k-stall", `{}`)
		assert.True(t, settled.replayed())
		assert.Equal(t, `{"by":"reconciler"}`, settled.body)
		assert.Equal(t, 1, k.count(t, "gateway"))
	})
}

// abandon makes n abandoned operations of "POST /v1/charges" at the store
// level, keys k-0 .. k-(n-1).
func abandon(t *testing.T, k *kit, n int) {
	t.Helper()
	for i := range n {
		res := leasedClaim(t, k, "k-"+strconv.Itoa(i), 30*time.Second, time.Hour)
		require.Equal(t, VerdictClaimed, res.Verdict)
		require.NoError(t, res.Attempt.(LeasedAttempt).Checkpoint(context.Background(), "charged", nil))
		require.NoError(t, res.Attempt.Abort(context.Background(), false))
	}
}

func TestTwoReconcilersSettleEachOperationOnce(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		const n = 1000
		abandon(t, k, n)
		var mu sync.Mutex
		calls := map[string]int{}
		routes := map[string]ReconcileFunc{"POST /v1/charges": func(_ context.Context, op *Abandoned) (Settlement, error) {
			mu.Lock()
			calls[op.Key]++
			mu.Unlock()
			return Settlement{Answer: Completed, Status: 201, Body: []byte(op.Key)}, nil
		}}
		second := k
		if k.pool != nil { // a second node: its own pool on the same schema
			second = postgresKitOn(t, pgtest.NewPool(t, k.url))
			second.clock = k.clock
			second.store.(*PostgresStore).clock = k.clock.offset
		}
		a := testReconciler(t, k, ReconcileConfig{Routes: routes, Batch: 25})
		b := testReconciler(t, second, ReconcileConfig{Routes: routes, Batch: 25})
		var wg sync.WaitGroup
		var took [2]int
		for i, rc := range []*reconciler{a, b} {
			wg.Go(func() { took[i], _ = rc.pass(context.Background()) })
		}
		wg.Wait()
		assert.Equal(t, n, took[0]+took[1], "taken over %d and %d", took[0], took[1])
		assert.Len(t, calls, n)
		for key, c := range calls {
			if c != 1 {
				t.Errorf("%s reconciled %d times, want 1", key, c)
			}
		}
		assert.Zero(t, runPass(t, a))
	})
}

func TestReconcilerKilledMidSettlement(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		abandon(t, k, 1)
		inFn, letGo := make(chan struct{}), make(chan struct{})
		var stored atomic.Int64
		hooks := ReconcileHooks{Settled: func(_ context.Context, e ReconcileEvent) {
			if e.Err == nil {
				stored.Add(1)
			}
		}}
		deadErr := make(chan error, 1)
		dead := testReconciler(t, k, ReconcileConfig{Hooks: ReconcileHooks{Settled: func(_ context.Context, e ReconcileEvent) { deadErr <- e.Err }},
			Routes: map[string]ReconcileFunc{"POST /v1/charges": func(context.Context, *Abandoned) (Settlement, error) {
				close(inFn)
				<-letGo // never returns while it is "dead"
				return Settlement{Answer: Completed, Status: 201, Body: []byte("dead")}, nil
			}}})
		go func() { _, _ = dead.pass(context.Background()) }()
		recv(t, inFn)

		var attempts []int
		alive := testReconciler(t, k, ReconcileConfig{Hooks: hooks, Routes: map[string]ReconcileFunc{
			"POST /v1/charges": func(_ context.Context, op *Abandoned) (Settlement, error) {
				attempts = append(attempts, op.Attempt)
				return Settlement{Answer: Completed, Status: 201, Body: []byte("alive")}, nil
			}}})
		assert.Zero(t, runPass(t, alive), "the dead reconciler's lease is live")
		k.clock.Advance(defaultLease + time.Second)
		assert.Equal(t, 1, runPass(t, alive))
		assert.Equal(t, []int{3}, attempts, "a higher fencing token than the dead reconciler's attempt 2")
		close(letGo) // the "dead" one wakes up: its settlement must be refused
		assert.ErrorIs(t, recv(t, deadErr), ErrLeaseLost)
		assert.EqualValues(t, 1, stored.Load())

		res := leasedClaim(t, k, "k-0", 30*time.Second, time.Hour)
		require.Equal(t, VerdictReplay, res.Verdict)
		assert.Equal(t, "alive", string(res.Response.Body))
	})
}

func TestReconcileRefusesBadAnswers(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		abandon(t, k, 3)
		var errs []error
		rc := testReconciler(t, k, ReconcileConfig{Interval: time.Minute,
			Hooks: ReconcileHooks{Settled: func(_ context.Context, e ReconcileEvent) { errs = append(errs, e.Err) }},
			Routes: map[string]ReconcileFunc{"POST /v1/charges": func(_ context.Context, op *Abandoned) (Settlement, error) {
				switch op.Key {
				case "k-0":
					return Settlement{Answer: Completed, Status: 503}, nil
				case "k-1":
					panic("lookup bug")
				default:
					return Settlement{Answer: Completed, Status: 201, Body: make([]byte, defaultMaxResponseBytes+1)}, nil
				}
			}}})
		rc.cfg.Batch = 1 // one at a time: errs in key order
		assert.Equal(t, 3, runPass(t, rc))
		require.Len(t, errs, 3)
		for _, err := range errs {
			assert.Error(t, err, "answered NotKnown")
		}
		k.clock.Advance(time.Minute)
		assert.Equal(t, 3, runPass(t, rc), "each is looked at again")
	})
}

func TestReconcileConfig(t *testing.T) {
	_, err := newReconciler(nil, ReconcileConfig{})
	assert.ErrorIs(t, err, errNoRoutes)
	_, err = newReconciler(nil, ReconcileConfig{Routes: map[string]ReconcileFunc{"POST /x": nil}})
	assert.Error(t, err)
	assert.Error(t, RunReconciler(context.Background(), NewMemoryStore(), ReconcileConfig{}), "returns at once")
	rc, err := newReconciler(nil, ReconcileConfig{Routes: answer(Settlement{})})
	require.NoError(t, err)
	assert.Equal(t, defaultReconcileInterval, rc.cfg.Interval)
	assert.Equal(t, defaultLease, rc.cfg.Lease)
	assert.Equal(t, defaultReconcileMaxAge, rc.cfg.MaxAge)
	rc.rand = func() float64 { return 1 }
	assert.Equal(t, 10*time.Second, rc.backoff(2))
	assert.Equal(t, 40*time.Second, rc.backoff(4))
	assert.Equal(t, defaultReconcileMaxBackoff, rc.backoff(40))
}

func TestRunReconcilerStopsGracefully(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		abandon(t, k, 1)
		inFn := make(chan struct{})
		ctx, cancel := context.WithCancel(context.Background())
		cfg := ReconcileConfig{Logger: quiet(Config{}).Logger, Routes: map[string]ReconcileFunc{
			"POST /v1/charges": func(fctx context.Context, _ *Abandoned) (Settlement, error) {
				close(inFn)
				<-fctx.Done() // a lookup that only ends when it is cancelled
				return Settlement{}, fctx.Err()
			}}}
		done := make(chan error)
		go func() { done <- RunReconciler(ctx, k.store, cfg) }()
		recv(t, inFn)
		cancel()
		assert.ErrorIs(t, recv(t, done), context.Canceled)
		rc := testReconciler(t, k, ReconcileConfig{Routes: map[string]ReconcileFunc{"POST /v1/charges": cfg.Routes["POST /v1/charges"]}})
		rc.cfg.Routes["POST /v1/charges"] = func(context.Context, *Abandoned) (Settlement, error) { return Settlement{Answer: NotHappened}, nil }
		assert.Equal(t, 1, runPass(t, rc), "left due at once for another reconciler")
	})
}
