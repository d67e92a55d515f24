package storetest

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

var replayAreas = []area{
	{"ReplayIsByteForByte", bothModes, testReplayIsByteForByte},
	{"ReplayedHeaderIsACopy", bothModes, testReplayedHeaderIsACopy},
	{"SameKeyDifferentRequestIsRefused", bothModes, testSameKeyDifferentRequest},
	{"NamesThatFoldTogetherInAnotherOrder", bothModes, testNamesThatFoldTogether},
	{"CatchAllPatternFingerprintsThePath", bothModes, testCatchAllPattern},
	{"ScopeSeparatesRecords", bothModes, testScopeSeparatesRecords},
	{"FailureReleasesTheKey", bothModes, testFailureReleasesTheKey},
	{"RejectionStoresNothing", bothModes, testRejectionStoresNothing},
	{"RetentionExpiryRunsAgain", bothModes, testRetentionExpiryRunsAgain},
	{"StreamedResults", bothModes, testStreamedResults},
}

func testReplayIsByteForByte(t *testing.T, e *env, m mode) {
	mux, p := e.payServer(m, server.Config{})
	srv := serve(t, mux)
	first := post(t, srv, "/v1/payments", "k-replay", `{"amount": 10}`)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	assert.False(t, first.replayed())
	assert.Equal(t, "session=secret", first.header.Get("Set-Cookie"), "the first response is the handler's own")

	again := post(t, srv, "/v1/payments", "k-replay", `{"amount": 10}`)
	require.Equal(t, http.StatusCreated, again.status, again.body)
	assert.True(t, again.replayed(), "Idempotent-Replayed")
	assert.Equal(t, `{"id":1,  "status":"paid" ,"amount":10,"z":{"b":1,"a":[3, 2,1]}}`, again.body, "the body byte for byte")
	assert.Equal(t, "application/json", again.header.Get("Content-Type"))
	assert.Equal(t, "/v1/payments/1", again.header.Get("Location"))
	assert.Equal(t, []string{"first", "second"}, again.header.Values("X-Trace"), "a multi-valued header, in order")
	assert.Empty(t, again.header.Values("Set-Cookie"), "Set-Cookie is never replayed")
	assert.Empty(t, again.header.Get("X-Not-Allowlisted"))
	assert.Equal(t, strconv.Itoa(len(first.body)), again.header.Get("Content-Length"))
	assert.EqualValues(t, 1, p.runs.Load(), "handler runs")
	assert.Equal(t, 1, e.count("pay"), "effects")
}

// A replay's header values are the replay's own: code after the middleware
// that changes them in place does not change the stored record.
func testReplayedHeaderIsACopy(t *testing.T, e *env, m mode) {
	inner, _ := e.payServer(m, server.Config{})
	outer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		inner.ServeHTTP(w, r)
		if v := w.Header()["X-Trace"]; len(v) > 0 {
			v[0] = "changed after the replay"
		}
	})
	srv := serve(t, outer)
	first := post(t, srv, "/v1/payments", "k-copy", `{"amount": 1}`)
	require.Equal(t, http.StatusCreated, first.status)
	for range 2 {
		r := post(t, srv, "/v1/payments", "k-copy", `{"amount": 1}`)
		require.True(t, r.replayed())
		assert.Equal(t, []string{"first", "second"}, r.header.Values("X-Trace"), "the stored record changed")
	}
}

func testSameKeyDifferentRequest(t *testing.T, e *env, m mode) {
	mux, p := e.payServer(m, server.Config{})
	srv := serve(t, mux)
	first := post(t, srv, "/v1/payments", "k-fp", `{"amount": 10, "currency": "EUR"}`)
	require.Equal(t, http.StatusCreated, first.status)
	same := post(t, srv, "/v1/payments", "k-fp", "{\n  \"currency\" : \"EUR\",\n  \"amount\":10\n}")
	assert.True(t, same.replayed(), "equivalent JSON replays: %d %s", same.status, same.body)
	for _, body := range []string{`{"amount": 11, "currency": "EUR"}`, `{"amount": 10.0, "currency": "EUR"}`, `{"amount": 10}`} {
		r := post(t, srv, "/v1/payments", "k-fp", body)
		assert.Equal(t, http.StatusUnprocessableEntity, r.status, "body %s", body)
		assert.Equal(t, wire.ProblemKeyReused, problemName(t, r))
	}
	assert.EqualValues(t, 1, p.runs.Load(), "handler runs")
}

// Two bodies that differ only in the order of names a case-insensitive
// decoder matches as one field are two requests: the second under the
// first's key gets 422, in either order, not a replay of the first.
func testNamesThatFoldTogether(t *testing.T, e *env, m mode) {
	lower, upper := `{"amount":100,"AMOUNT":5000}`, `{"AMOUNT":5000,"amount":100}`
	mux, p := e.payServer(m, server.Config{})
	srv := serve(t, mux)
	for i, order := range [][2]string{{lower, upper}, {upper, lower}} {
		key := fmt.Sprintf("k-fold-%d", i)
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", key, order[0]).status)
		retry := post(t, srv, "/v1/payments", key, " "+order[0]+"\n")
		assert.True(t, retry.replayed(), "an honest retry of %s replays: %d %s", order[0], retry.status, retry.body)
		other := post(t, srv, "/v1/payments", key, order[1])
		assert.Equal(t, http.StatusUnprocessableEntity, other.status, "%s after %s: %s", order[1], order[0], other.body)
	}
	assert.EqualValues(t, 2, p.runs.Load(), "handler runs")
}

// A catch-all pattern routes many paths to one handler: the path under it
// is part of the request, so the key of one path is refused on another.
func testCatchAllPattern(t *testing.T, e *env, m mode) {
	p := &payments{e: e}
	mux := http.NewServeMux()
	e.mount(mux, "POST /v1/accounts/", m, server.Config{}, p)
	srv := serve(t, mux)
	body := `{"amount": 5}`
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/accounts/1", "k-sub", body).status)
	assert.True(t, post(t, srv, "/v1/accounts/1", "k-sub", body).replayed(), "the same path replays")
	other := post(t, srv, "/v1/accounts/2", "k-sub", body)
	assert.Equal(t, http.StatusUnprocessableEntity, other.status, "another path under the pattern: %s", other.body)
	assert.EqualValues(t, 1, p.runs.Load(), "handler runs")
}

func testScopeSeparatesRecords(t *testing.T, e *env, m mode) {
	scope := func(r *http.Request) (string, string) { return r.Header.Get("X-Tenant"), r.Header.Get("X-User") }
	mux, p := e.payServer(m, server.Config{Scope: scope})
	refunds := &payments{e: e}
	e.mount(mux, "POST /v1/refunds", m, server.Config{Scope: scope}, refunds)
	srv := serve(t, mux)
	body := `{"amount": 5}`
	a := post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "acme", "X-User", "u1")
	for _, r := range []reply{a,
		post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "globex", "X-User", "u1"),
		post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "acme", "X-User", "u2"),
		post(t, srv, "/v1/refunds", "shared", body, "X-Tenant", "acme", "X-User", "u1"),
	} {
		assert.Equal(t, http.StatusCreated, r.status)
		assert.False(t, r.replayed(), "another scope must not see the record")
	}
	again := post(t, srv, "/v1/payments", "shared", body, "X-Tenant", "acme", "X-User", "u1")
	assert.True(t, again.replayed())
	assert.Equal(t, a.body, again.body)
	assert.EqualValues(t, 3, p.runs.Load(), "payments runs")
	assert.EqualValues(t, 1, refunds.runs.Load(), "refunds runs")
}

// flaky fails its first run after making its effect, then succeeds.
func flaky(e *env, runs *atomic.Int64, fail func(w http.ResponseWriter)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		if err := e.effect(r.Context(), "pay"); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		if n == 1 {
			fail(w)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, "run %d", n)
	})
}

// A 5xx or a panic rolls a Transactional attempt back (its effects with
// it) and ends a Leased attempt's lease at once: either way the retry runs.
func testFailureReleasesTheKey(t *testing.T, e *env, m mode) {
	failures := map[string]func(w http.ResponseWriter){
		"503":   func(w http.ResponseWriter) { w.WriteHeader(http.StatusServiceUnavailable) },
		"panic": func(http.ResponseWriter) { panic("handler bug") },
	}
	for name, fail := range failures {
		var runs atomic.Int64
		mux := http.NewServeMux()
		e.mount(mux, "POST /v1/payments", m, server.Config{}, flaky(e, &runs, fail))
		srv := serve(t, mux)
		key := "k-fail-" + name
		before := e.count("pay")
		first := post(t, srv, "/v1/payments", key, `{}`)
		if name == "panic" {
			assert.Error(t, first.err, "a panic aborts the response")
		} else {
			assert.Equal(t, http.StatusServiceUnavailable, first.status)
		}
		if e.transactionalEffects(m) {
			assert.Equal(t, before, e.count("pay"), "%s: the failed run's effect rolled back", name)
		}
		retry := post(t, srv, "/v1/payments", key, `{}`)
		assert.Equal(t, http.StatusCreated, retry.status, "%s: %s", name, retry.body)
		assert.False(t, retry.replayed(), "%s: the retry runs afresh", name)
		last := post(t, srv, "/v1/payments", key, `{}`)
		assert.True(t, last.replayed(), name)
		assert.Equal(t, "run 2", last.body, name)
		assert.EqualValues(t, 2, runs.Load(), "%s: handler runs", name)
	}
}

func testRejectionStoresNothing(t *testing.T, e *env, m mode) {
	mux, p := e.payServer(m, server.Config{})
	srv := serve(t, mux)
	assert.Equal(t, http.StatusBadRequest, post(t, srv, "/v1/payments", "k-400", `{"amount": -5}`).status)
	fixed := post(t, srv, "/v1/payments", "k-400", `{"amount": 5}`)
	assert.Equal(t, http.StatusCreated, fixed.status, "a corrected retry is processed, not 422: %s", fixed.body)
	assert.False(t, fixed.replayed())
	assert.True(t, post(t, srv, "/v1/payments", "k-400", `{"amount": 5}`).replayed())

	assert.Equal(t, http.StatusPaymentRequired, post(t, srv, "/v1/payments", "k-402", `{"amount": 402}`).status)
	again := post(t, srv, "/v1/payments", "k-402", `{"amount": 402}`)
	assert.Equal(t, http.StatusPaymentRequired, again.status)
	assert.True(t, again.replayed(), "a 402 is the operation's outcome: stored")
	assert.EqualValues(t, 3, p.runs.Load(), "handler runs")
	assert.Equal(t, 1, e.count("declined"))
}

func testRetentionExpiryRunsAgain(t *testing.T, e *env, m mode) {
	mux, p := e.payServer(m, server.Config{Retention: time.Hour})
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`).status)
	e.clock.Advance(59 * time.Minute)
	assert.True(t, post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`).replayed(), "within retention")
	e.clock.Advance(2 * time.Minute)
	after := post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`)
	assert.Equal(t, http.StatusCreated, after.status)
	assert.False(t, after.replayed(), "past retention the record counts as absent")
	assert.True(t, post(t, srv, "/v1/payments", "k-ret", `{"amount": 1}`).replayed(), "the new run is stored")
	assert.EqualValues(t, 2, p.runs.Load())
}

// A response that streams (over the cap, flushed, hijacked) settles when
// it starts streaming, by its status: the operation's own outcome
// completes as unavailable and never runs again; a 5xx or a rejection
// status rolls back or hands over, and the retry runs afresh.
func testStreamedResults(t *testing.T, e *env, m mode) {
	big := strings.Repeat("x", 1000)
	overTheCap := func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(big[:40]))
		_, _ = w.Write([]byte(big[40:]))
	}
	flushed := func(w http.ResponseWriter) {
		_, _ = w.Write([]byte(big[:40]))
		assert.NoError(t, http.NewResponseController(w).Flush())
		_, _ = w.Write([]byte(big[40:]))
	}
	hijacked := func(w http.ResponseWriter) {
		conn, buf, err := http.NewResponseController(w).Hijack()
		if !assert.NoError(t, err) {
			return
		}
		defer conn.Close()
		_, _ = fmt.Fprintf(buf, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(big), big)
		_ = buf.Flush()
	}
	cases := []struct {
		name   string
		status int // 0: the handler sets none
		write  func(w http.ResponseWriter)
		rerun  bool // rolled back or handed over: the retry runs afresh
	}{
		{"200 over the cap", 0, overTheCap, false},
		{"200 flushed", 0, flushed, false},
		{"200 hijacked", 0, hijacked, false},
		{"503 over the cap", http.StatusServiceUnavailable, overTheCap, true},
		{"400 flushed", http.StatusBadRequest, flushed, true},
	}
	for i, tc := range cases {
		var runs atomic.Int64
		var mu sync.Mutex
		var unavailable []bool // of each Committed event
		hooks := server.Hooks{Committed: func(_ context.Context, ev server.Event) {
			mu.Lock()
			defer mu.Unlock()
			unavailable = append(unavailable, ev.Unavailable)
		}}
		committed := func() []bool { mu.Lock(); defer mu.Unlock(); return append([]bool(nil), unavailable...) }
		before := e.count("pay")
		h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			assert.NoError(t, e.effect(r.Context(), "pay"))
			if runs.Add(1) > 1 {
				w.WriteHeader(http.StatusCreated)
				return
			}
			w.Header().Set("Content-Type", "text/plain")
			if tc.status != 0 {
				w.WriteHeader(tc.status)
			}
			tc.write(w)
		})
		mux := http.NewServeMux()
		e.mount(mux, "POST /v1/export", m, server.Config{MaxResponseBytes: 64, Hooks: hooks}, h)
		srv := serve(t, mux)
		key := fmt.Sprintf("k-big-%d", i)
		first := post(t, srv, "/v1/export", key, "{}")
		assert.Equal(t, max(tc.status, http.StatusOK), first.status, tc.name)
		assert.Equal(t, big, first.body, "%s: the client gets the whole streamed body", tc.name)
		retry := post(t, srv, "/v1/export", key, "{}")
		if tc.rerun {
			assert.Equal(t, http.StatusCreated, retry.status, "%s: the retry runs afresh: %s", tc.name, retry.body)
			assert.EqualValues(t, 2, runs.Load(), "%s: handler runs", tc.name)
			assert.Equal(t, []bool{false}, committed(), "%s: the retry's response is stored", tc.name)
		} else {
			assert.Equal(t, []bool{true}, committed(), "%s: completed without its response", tc.name)
			assert.Equal(t, http.StatusInternalServerError, retry.status, tc.name)
			assert.Equal(t, wire.ProblemResultUnavailable, problemName(t, retry), tc.name)
			assert.EqualValues(t, 1, runs.Load(), "%s: the handler never runs again", tc.name)
		}
		if e.transactionalEffects(m) {
			assert.Equal(t, before+1, e.count("pay"), "%s: one run's effects committed", tc.name)
		}
	}
}
