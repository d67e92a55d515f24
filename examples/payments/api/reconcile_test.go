package api

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/internal/testwait"
	"github.com/idemkit/idem/server"
)

// reconcileConfig is newConfig with a gateway at url and a Store of its
// own even in memory, which the reconciler shares with the handler.
func reconcileConfig(t *testing.T, backend, url string) Config {
	t.Helper()
	cfg := newConfig(t, backend)
	if cfg.Store == nil {
		cfg.Store = server.NewMemoryStore()
	}
	cfg.GatewayURL, cfg.GatewayClient = url, fastGatewayClient()
	return cfg
}

// reconcileOnce runs a reconciler with ReconcileRoutes(cfg) on cfg.Store
// until it settled one operation, and returns its event.
func reconcileOnce(t *testing.T, cfg Config) server.ReconcileEvent {
	t.Helper()
	settled := make(chan server.ReconcileEvent, 1)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		done <- server.RunReconciler(ctx, cfg.Store, server.ReconcileConfig{Routes: ReconcileRoutes(cfg), Logger: quietLogger(),
			Hooks: server.ReconcileHooks{Settled: func(_ context.Context, e server.ReconcileEvent) { settled <- e }}})
	}()
	ev := testwait.Recv(t, settled, "a settlement")
	cancel()
	require.ErrorIs(t, testwait.Recv(t, done, "the reconciler's return"), context.Canceled)
	return ev
}

// crashOnce makes the first attempt of a charge die at point: a step of
// the handler, or "claimed" (before the handler, no recovery point) or
// "declined" (after the gateway declined, before the 402 is stored). The
// panic ends the attempt's lease at once, as a dead node's would end.
func crashOnce(cfg *Config, point string) {
	var armed atomic.Bool
	armed.Store(true)
	crash := func() {
		if armed.CompareAndSwap(true, false) {
			panic(errCrash(point))
		}
	}
	switch point {
	case "claimed":
		cfg.Hooks.Claimed = func(context.Context, server.Event) { crash() }
	case "declined":
		cfg.Hooks.Handled = func(_ context.Context, e server.Event) {
			if e.Status == http.StatusPaymentRequired {
				crash()
			}
		}
	default:
		cfg.OnStep = func(_ context.Context, step string) {
			if step == point {
				crash()
			}
		}
	}
}

func TestReconcileAbandonedCharge(t *testing.T) {
	cases := []struct {
		crashAt string
		want    server.Answer
	}{
		{"claimed", server.NotHappened},         // no recovery point
		{StepGatewayCalled, server.NotHappened}, // the lookup finds no charge
		{StepGatewayAnswered, server.Completed}, // the lookup finds the charge
		{StepRecorded, server.Completed},        // the point names the charge
	}
	for _, backend := range apiBackends {
		for _, c := range cases {
			t.Run(backend+"/"+c.crashAt, func(t *testing.T) {
				gw, url := newGatewayServer(t)
				cfg := reconcileConfig(t, backend, url)
				crashOnce(&cfg, c.crashAt)
				h := New(cfg)
				putAccount(t, h, "acc-1", 1000)
				require.Panics(t, func() { do(t, h, call{method: "POST", path: "/v1/charges", key: "c-1", body: charge3000}) })

				ev := reconcileOnce(t, cfg)
				require.NoError(t, ev.Err)
				assert.Equal(t, c.want, ev.Answer)
				assert.Equal(t, server.Operation{Tenant: "acme", Principal: "alice", Route: "POST /v1/charges", Key: "c-1", Attempt: 2}, ev.Operation)

				retry := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-1", body: charge3000})
				require.Equal(t, http.StatusCreated, retry.Code, retry.Body.String())
				if c.want == server.Completed {
					assert.Equal(t, "true", retry.Header().Get("Idempotent-Replayed"), "the settled charge is replayed")
					assertHandlersCharge(t, cfg, retry)
				} else {
					assert.Empty(t, retry.Header().Get("Idempotent-Replayed"), "the freed record: the retry runs afresh")
				}
				assert.Equal(t, GatewayStats{Charges: 1, AmountCents: 3000}, gw.Stats(), "charged once")
				assert.Equal(t, int64(4000), getAccount(t, h, "acc-1").BalanceCents, "credited once")
			})
		}
	}
}

// assertHandlersCharge checks that a settled charge's replay is what the
// handler writes for the recorded charge, byte for byte.
func assertHandlersCharge(t *testing.T, cfg Config, replay *httptest.ResponseRecorder) {
	t.Helper()
	var ch Charge
	require.NoError(t, json.Unmarshal(replay.Body.Bytes(), &ch))
	ch.Tenant, ch.Key = "acme", "c-1"
	recorded, err := cfg.Backend.RecordCharge(context.Background(), ch) // a no-op: returns the charge recorded
	require.NoError(t, err)
	assert.Equal(t, ch, recorded, "the replay names the recorded charge")
	want := httptest.NewRecorder()
	writeJSON(want, http.StatusCreated, recorded) // what createCharge writes
	assert.Equal(t, want.Body.String(), replay.Body.String())
	assert.Equal(t, want.Header().Get("Content-Type"), replay.Header().Get("Content-Type"))
}

// An attempt that dies after the gateway declined the card, before its 402
// is stored: the reconciler stores the 402 the handler writes, byte for
// byte, and a retry replays it without calling the gateway.
func TestReconcileDeclinedCharge(t *testing.T) {
	for _, backend := range apiBackends {
		t.Run(backend, func(t *testing.T) {
			gw, url := newGatewayServer(t)
			cfg := reconcileConfig(t, backend, url)
			crashOnce(&cfg, "declined")
			h := New(cfg)
			putAccount(t, h, "acc-1", 1000)
			big := `{"account_id":"acc-1","amount_cents":2000000,"currency":"EUR"}`
			require.Panics(t, func() { do(t, h, call{method: "POST", path: "/v1/charges", key: "c-big", body: big}) })

			ev := reconcileOnce(t, cfg)
			require.NoError(t, ev.Err)
			assert.Equal(t, server.Completed, ev.Answer)
			assert.Equal(t, http.StatusPaymentRequired, ev.Status)

			replay := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-big", body: big})
			handler := do(t, h, call{method: "POST", path: "/v1/charges", key: "c-big-2", body: big})
			assert.Equal(t, "true", replay.Header().Get("Idempotent-Replayed"))
			assert.Equal(t, http.StatusPaymentRequired, replay.Code)
			assert.Equal(t, handler.Body.String(), replay.Body.String(), "the handler's 402, byte for byte")
			assert.Equal(t, handler.Header().Get("Content-Type"), replay.Header().Get("Content-Type"))
			assert.Equal(t, GatewayStats{}, gw.Stats())
		})
	}
}

func TestReconcileChargeNotKnown(t *testing.T) {
	cases := map[int]error{http.StatusConflict: errChargeRunning, http.StatusServiceUnavailable: errGateway}
	for status, want := range cases {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(status) }))
		t.Cleanup(srv.Close)
		fn := ReconcileRoutes(Config{Backend: NewMemoryBackend(), GatewayURL: srv.URL,
			GatewayClient: idem.NewClient(idem.Config{MaxAttempts: 1})})["POST /v1/charges"]
		require.NotNil(t, fn)
		st, err := fn(context.Background(), abandonedCharge(charge3000, StepGatewayCalled))
		assert.ErrorIs(t, err, want, "the lookup answered %d", status)
		assert.Equal(t, server.NotKnown, st.Answer)
	}
	fn := ReconcileRoutes(Config{Backend: NewMemoryBackend(), GatewayURL: "http://127.0.0.1:1"})["POST /v1/charges"]
	_, err := fn(context.Background(), abandonedCharge(`{"account_id":"acc-1"}`, StepGatewayCalled))
	assert.ErrorContains(t, err, "not a valid charge")
}

func abandonedCharge(body, point string) *server.Abandoned {
	return &server.Abandoned{
		Operation: server.Operation{Tenant: "acme", Principal: "alice", Route: "POST /v1/charges", Key: "c-1", Attempt: 2},
		Request:   httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(body)),
		Recovery:  server.Recovery{Point: point, Data: json.RawMessage(`{}`)},
	}
}

func TestReconcileRoutesNeedsTheAPIsBackendAndGateway(t *testing.T) {
	assert.Nil(t, ReconcileRoutes(Config{Backend: NewMemoryBackend()}), "no gateway: no POST /v1/charges")
	assert.Nil(t, ReconcileRoutes(Config{GatewayURL: "http://127.0.0.1:1"}), "no Backend: not New's")
	routes := ReconcileRoutes(Config{Backend: NewMemoryBackend(), GatewayURL: "http://127.0.0.1:1"})
	assert.Len(t, routes, 1)
	assert.NotNil(t, routes["POST /v1/charges"])
}
