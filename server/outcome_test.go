package server

import (
	"errors"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// standingOf reads an answer's outcome headers, and checks that a problem
// document says the same.
func standingOf(t *testing.T, r reply) (state, ref, safe string) {
	t.Helper()
	state, ref, safe = r.header.Get(wire.HeaderOperationState), r.header.Get(wire.HeaderOperationRef), r.header.Get(wire.HeaderSafeNewKey)
	if wire.IsProblem(r.header.Get("Content-Type")) {
		p, ok := wire.ReadProblem(r.header.Get("Content-Type"), strings.NewReader(r.body), 1<<16)
		require.True(t, ok)
		require.NotNil(t, p.SafeNewKey, "a problem without safe_new_key: %s", r.body)
		assert.Equal(t, []string{state, ref, safe}, []string{p.OperationState, p.OperationRef, map[bool]string{true: "true", false: "false"}[*p.SafeNewKey]},
			"the problem's members and the headers differ: %s", r.body)
	}
	return state, ref, safe
}

func TestEveryKeyedAnswerSaysWhereTheOperationStands(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux := http.NewServeMux()
		cfg := quiet(Config{Scope: func(*http.Request) (string, string) { return "acme", "alice" }, MaxRequestBytes: 64})
		mux.Handle("POST /v1/orders", Middleware(k.store, cfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.Header.Get("X-Answer") {
			case "reject":
				w.WriteHeader(http.StatusBadRequest)
			case "fail":
				w.WriteHeader(http.StatusServiceUnavailable)
			default:
				w.WriteHeader(http.StatusCreated)
			}
		})))
		srv := serve(t, mux)
		ref := OperationRef("acme", "alice", "POST /v1/orders", "k-1")
		before := time.Now()
		tests := []struct {
			name, key, body string
			extra           []string
			status          int
			state, ref      string
			safe            string
		}{
			{"first run", "k-1", `{}`, nil, http.StatusCreated, wire.StateCompleted, ref, "false"},
			{"replay", "k-1", `{}`, nil, http.StatusCreated, wire.StateCompleted, ref, "false"},
			{"key-reused", "k-1", `{"a":1}`, nil, http.StatusUnprocessableEntity, wire.StateNone, ref, "true"},
			{"rejected", "k-2", `{}`, []string{"X-Answer", "reject"}, http.StatusBadRequest, wire.StateNone,
				OperationRef("acme", "alice", "POST /v1/orders", "k-2"), "true"},
			{"5xx rolled back", "k-3", `{}`, []string{"X-Answer", "fail"}, http.StatusServiceUnavailable, wire.StateNone,
				OperationRef("acme", "alice", "POST /v1/orders", "k-3"), "true"},
			{"key-missing", "", `{}`, nil, http.StatusBadRequest, wire.StateNone, "", "true"},
			{"key-invalid", "a b", `{}`, nil, http.StatusBadRequest, wire.StateNone, "", "true"},
			{"request-too-large", "k-4", strings.Repeat("x", 65), nil, http.StatusRequestEntityTooLarge, wire.StateNone,
				OperationRef("acme", "alice", "POST /v1/orders", "k-4"), "true"},
		}
		for _, tt := range tests {
			r := post(t, srv, "/v1/orders", tt.key, tt.body, tt.extra...)
			require.Equal(t, tt.status, r.status, "%s: %s", tt.name, r.body)
			state, ref, safe := standingOf(t, r)
			assert.Equal(t, []string{tt.state, tt.ref, tt.safe}, []string{state, ref, safe}, tt.name)
		}

		// Key lifetime: the record's retention from its claim, on the first
		// answer and on every replay.
		first := post(t, srv, "/v1/orders", "k-5", `{}`)
		replay := post(t, srv, "/v1/orders", "k-5", `{}`)
		for _, r := range []reply{first, replay} {
			expires, err := http.ParseTime(r.header.Get(wire.HeaderKeyExpires))
			require.NoError(t, err, "%s: %q", wire.HeaderKeyExpires, r.header.Get(wire.HeaderKeyExpires))
			assert.WithinRange(t, expires, before.Add(defaultRetention-2*time.Second), time.Now().Add(defaultRetention+time.Second))
		}
		assert.True(t, replay.replayed())
		rejected := post(t, srv, "/v1/orders", "k-6", `{}`, "X-Answer", "reject")
		assert.Empty(t, rejected.header.Get(wire.HeaderKeyExpires), "no record is kept")
	})
}

func TestLeasedInFlightStanding(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		srv := abandoningServer(t, k, &abandoning{k: k})
		first := post(t, srv, "/v1/accounts/a-1/charges", "k-1", `{}`)
		require.Equal(t, http.StatusBadGateway, first.status)
		state, _, safe := standingOf(t, first)
		assert.Equal(t, []string{wire.StateInFlight, "false"}, []string{state, safe},
			"a 5xx after a recovery point leaves the record for a takeover")
	})
}

// A rejection status releases a first Leased attempt's key only when it
// recorded no recovery point: after one, the record stays, and the answer
// says a new key is not safe.
func TestLeasedRejectionStanding(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		mux := http.NewServeMux()
		cfg := quiet(Config{Mode: Leased})
		mux.Handle("POST /v1/charges", Middleware(k.store, cfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("X-Point") != "" {
				ls, _ := LeaseFrom(r.Context())
				_ = ls.Checkpoint(r.Context(), "called", nil)
			}
			w.WriteHeader(http.StatusBadRequest)
		})))
		srv := serve(t, mux)
		plain := post(t, srv, "/v1/charges", "k-plain", `{}`)
		state, _, safe := standingOf(t, plain)
		assert.Equal(t, []string{wire.StateNone, "true"}, []string{state, safe}, "released: nothing was done")
		pointed := post(t, srv, "/v1/charges", "k-point", `{}`, "X-Point", "1")
		state, _, safe = standingOf(t, pointed)
		assert.Equal(t, []string{wire.StateInFlight, "false"}, []string{state, safe}, "kept with its recovery point")
	})
}

func TestAuthorizeReplay(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		var revoked atomic.Bool
		var asked atomic.Int64
		mux := http.NewServeMux()
		cfg := quiet(Config{Scope: func(r *http.Request) (string, string) { return "acme", "alice" },
			AuthorizeReplay: func(r *http.Request, op Operation) error {
				asked.Add(1)
				if op.Tenant != "acme" || op.Key != "k-1" || op.Route != "POST /v1/orders" {
					return errors.New("not the operation asked about")
				}
				if revoked.Load() {
					return errors.New("alice's rights were revoked")
				}
				return nil
			}})
		mux.Handle("POST /v1/orders", Middleware(k.store, cfg)(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusCreated)
			_, _ = w.Write([]byte(`{"order":"secret"}`))
		})))
		srv := serve(t, mux)
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/orders", "k-1", `{}`).status)
		assert.Zero(t, asked.Load(), "a first request is not a replay")
		ok := post(t, srv, "/v1/orders", "k-1", `{}`)
		assert.True(t, ok.replayed())
		revoked.Store(true)
		denied := post(t, srv, "/v1/orders", "k-1", `{}`)
		require.Equal(t, http.StatusForbidden, denied.status, denied.body)
		assert.Equal(t, problemReplayForbidden, problemName(t, denied))
		assert.NotContains(t, denied.body, "secret")
		assert.False(t, denied.replayed())
		state, _, safe := standingOf(t, denied)
		assert.Equal(t, []string{wire.StateUnknown, "false"}, []string{state, safe})
		assert.EqualValues(t, 2, asked.Load())
	})
}

// TestStandingNamesCanonical guards standing.write, which sets its headers
// by their names as given, as Header.Set would only for canonical names.
func TestStandingNamesCanonical(t *testing.T) {
	for _, name := range []string{wire.HeaderOperationState, wire.HeaderOperationRef, wire.HeaderSafeNewKey, wire.HeaderKeyExpires} {
		if got := http.CanonicalHeaderKey(name); got != name {
			t.Errorf("CanonicalHeaderKey(%q) = %q, want it unchanged", name, got)
		}
	}
}
