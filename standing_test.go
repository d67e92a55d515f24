package idem

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"

	"github.com/idemkit/idem/internal/wire"
)

// standingServer answers every request with status and problem name, and
// the outcome headers state, ref and safe.
func standingServer(t *testing.T, status int, name, state, safe string) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var n atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n.Add(1)
		w.Header().Set(wire.HeaderOperationState, state)
		w.Header().Set(wire.HeaderOperationRef, "ref-1")
		w.Header().Set(wire.HeaderSafeNewKey, safe)
		writeProblem(w, status, name)
	}))
	t.Cleanup(srv.Close)
	return srv, &n
}

func TestOutcomeUncertainIsNeverRetried(t *testing.T) {
	srv, n := standingServer(t, http.StatusConflict, wire.ProblemOutcomeUncertain, wire.StateUncertain, "false")
	tr, clk := newTestTransport(t, Config{})
	_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
	var e *Error
	if !errors.As(err, &e) {
		t.Fatalf("RoundTrip error = %v, want an *Error", err)
	}
	if !errors.Is(err, ErrOutcomeUncertain) || !errors.Is(err, ErrOutcomeUnknown) {
		t.Errorf("error %v: want ErrOutcomeUncertain and ErrOutcomeUnknown", err)
	}
	if n.Load() != 1 || len(clk.Waits()) != 0 {
		t.Errorf("requests = %d, waits %v; want one request, no wait", n.Load(), clk.Waits())
	}
	if e.OperationState != wire.StateUncertain || e.OperationRef != "ref-1" || !e.MayHaveTakenEffect {
		t.Errorf("error %+v: want state uncertain, ref ref-1, may have taken effect", e)
	}
}

// A refusal that the table says did not act (422 key-reused) still
// matches ErrOutcomeUnknown when the server says a new key is not safe.
func TestServerSaysNewKeyNotSafe(t *testing.T) {
	for _, tt := range []struct {
		safe string
		want bool
	}{{"true", false}, {"false", true}} {
		srv, _ := standingServer(t, http.StatusUnprocessableEntity, wire.ProblemKeyReused, wire.StateNone, tt.safe)
		tr, _ := newTestTransport(t, Config{})
		_, err := tr.RoundTrip(post(t, context.Background(), srv.URL, `{}`))
		if !errors.Is(err, ErrKeyReused) || errors.Is(err, ErrOutcomeUnknown) != tt.want {
			t.Errorf("safe %s: error %v; want ErrKeyReused, matching ErrOutcomeUnknown %v", tt.safe, err, tt.want)
		}
	}
}
