package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// flaw is what a fake API gets wrong: a set of the flaws below (and
// quirks, which are no flaw), so that they combine.
type flaw int

// flawNone: the fake honours keys (scoped, compared, one at a time).
const flawNone flaw = 0

const (
	// flawIgnoresKey: every request runs, with a key or without.
	flawIgnoresKey flaw = 1 << iota
	// flawNoBodyCompare: a used key replays its response whatever the body.
	flawNoBodyCompare
	// flawRacy: check, then insert: concurrent duplicates both run.
	flawRacy
	// flawNoScope: records are stored per key, not per (principal, key).
	flawNoScope
	// flawUnmarkedReplays: replays do not say so (no Idempotent-Replayed),
	// which is a flaw only for an API that documents the header.
	flawUnmarkedReplays
	// flawUUIDKeysOnly: keys must have 36 characters (a UUID's), and any
	// other key gets a 500 that names it, as gofiber's idempotency
	// middleware answers (a 500, where a 4xx is due, is the flaw).
	flawUUIDKeysOnly
	// flawKeyLengthOnly: a key longer than 36 bytes is refused (400), and
	// its characters are never looked at, so a non-ASCII key of 36 bytes
	// runs as any other.
	flawKeyLengthOnly
	// flawLockNeverReleased: a duplicate that arrives while its key's
	// first request runs is told to wait (409), and from then on the key's
	// lock is never released: every later request with it gets 409 too.
	flawLockNeverReleased
	// flawReplayMarkedOtherwise: replays are marked, under another header
	// name (X-Idempotent-Replay), which is no flaw for an API that
	// documents that name.
	flawReplayMarkedOtherwise
	// quirkAnonymous is no flaw: the 201 names no resource, so every
	// payment's response is the same bytes (only a count tells them apart).
	quirkAnonymous
	// quirkSlow is no flaw: a payment takes effect at once, then takes
	// slowFor to answer (a gateway's call), and a duplicate that arrives
	// meanwhile gets a plain 409, as one that is still running does.
	quirkSlow
	// quirkOutcome is no flaw: every keyed answer tells where the
	// operation stands, as idem's contract says (docs/CONTRACT.md §4).
	quirkOutcome
	// flawRefChanges: with quirkOutcome, every answer after the first
	// carries a reference of its own, so an operator cannot find the
	// record by the one a retry showed.
	flawRefChanges
	// flawSafeInFlight: with quirkOutcome, a duplicate told to wait (409)
	// says a new key is safe, while the first attempt runs.
	flawSafeInFlight
	// flawKeyExpired: with quirkOutcome, the key's expiry is an hour ago.
	flawKeyExpired
	// quirkNoExpiry is no flaw: with quirkOutcome, no answer tells the
	// key's expiry (the rest of the outcome is told).
	quirkNoExpiry
	// flawUntoldRefusal: with quirkOutcome, the refusal of a malformed or
	// missing key tells nothing of the operation.
	flawUntoldRefusal
	// flawProblemDisagrees: with quirkOutcome, the refusal of another body
	// is a problem document whose operation_state says completed while its
	// header says none.
	flawProblemDisagrees
)

// slowFor is how long a payment of quirkSlow takes to answer.
const slowFor = time.Second

// has reports whether the fake has flaw f.
func (a *fakeAPI) has(f flaw) bool { return a.flaw&f != 0 }

// raceWindow is how long the racy fake holds a first request between its
// check and its insert, waiting for a duplicate to pass the check too, as
// a slow insert would in production. Only flawRacy waits.
const raceWindow = 200 * time.Millisecond

// fakeAPI is a small payments endpoint, POST /v1/payments, with a counter
// of payments at GET /v1/count, written for the tests with one flaw (or
// none). Callers authenticate with "Authorization: Bearer <principal>".
type fakeAPI struct {
	flaw      flaw
	keyHeader string // "" means Idempotency-Key

	mu       sync.Mutex
	payments int
	records  map[string]*record   // by scope and key
	gates    map[string]*raceGate // flawRacy: by scope and key
}

// record is a key's stored operation; done is false while it runs.
type record struct {
	body   []byte // the request's
	done   bool
	stuck  bool // flawLockNeverReleased: a duplicate met it running
	status int
	resp   []byte
	scope  string // quirkOutcome: what the reference hashes
}

// raceGate lets the requests of one key that passed the check go on
// together.
type raceGate struct {
	passed int
	both   chan struct{}
}

// newFakeAPI serves a fake with the flaw until the test ends.
func newFakeAPI(t *testing.T, f flaw, keyHeader string) (*fakeAPI, *httptest.Server) {
	t.Helper()
	a := &fakeAPI{flaw: f, keyHeader: keyHeader, records: map[string]*record{}, gates: map[string]*raceGate{}}
	if a.keyHeader == "" {
		a.keyHeader = "Idempotency-Key"
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/payments", a.pay)
	mux.HandleFunc("GET /v1/count", a.count)
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return a, srv
}

func (a *fakeAPI) count(w http.ResponseWriter, _ *http.Request) {
	a.mu.Lock()
	defer a.mu.Unlock()
	_ = json.NewEncoder(w).Encode(map[string]int{"payment_count": a.payments})
}

// pay authenticates, checks the key and runs the payment under it.
func (a *fakeAPI) pay(w http.ResponseWriter, r *http.Request) {
	principal, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	body, err := io.ReadAll(r.Body)
	if !ok || err != nil {
		http.Error(w, "unauthenticated", http.StatusUnauthorized)
		return
	}
	if a.has(flawIgnoresKey) {
		a.respond(w, http.StatusCreated, a.makePayment(), false)
		return
	}
	key := r.Header.Get(a.keyHeader)
	if a.has(flawUUIDKeysOnly) && key != "" && len(key) != 36 {
		http.Error(w, fmt.Sprintf("invalid idempotency key: invalid length: %d != 36", len(key)), http.StatusInternalServerError)
		return
	}
	if a.has(flawKeyLengthOnly) && len(key) > 36 {
		http.Error(w, "key too long", http.StatusBadRequest)
		return
	}
	if problem := keyProblem(key); problem != "" && !(a.has(flawKeyLengthOnly) && key != "") {
		if !a.has(flawUntoldRefusal) {
			a.tell(w, &record{}, "none", false)
		}
		http.Error(w, problem, http.StatusBadRequest)
		return
	}
	scope := principal + "\x00" + key
	if a.has(flawNoScope) {
		scope = key
	}
	a.once(w, scope, body)
}

// keyProblem says what is wrong with a key, "" when nothing is.
func keyProblem(key string) string {
	if key == "" {
		return "key missing"
	}
	if len(key) > 255 {
		return "key too long"
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return "key not printable ASCII"
		}
	}
	return ""
}

// once runs the payment the first time scope is seen and answers later
// requests from its record: the same body replays, another is refused,
// one still running gets 409. flawRacy inserts the record only after the
// payment, so duplicates that arrive meanwhile run too.
func (a *fakeAPI) once(w http.ResponseWriter, scope string, body []byte) {
	a.mu.Lock()
	rec, found := a.records[scope]
	if found {
		a.mu.Unlock()
		a.replay(w, rec, body)
		return
	}
	rec = &record{body: body, scope: scope}
	if !a.has(flawRacy) {
		a.records[scope] = rec
	}
	a.mu.Unlock()
	if a.has(flawRacy) {
		a.waitForDuplicate(scope)
	}
	resp := a.makePayment()
	if a.has(quirkSlow) {
		time.Sleep(slowFor)
	}
	a.mu.Lock()
	rec.done, rec.status, rec.resp = !rec.stuck, http.StatusCreated, resp
	a.records[scope] = rec
	a.mu.Unlock()
	a.tell(w, rec, "completed", true)
	a.respond(w, http.StatusCreated, resp, false)
}

// replay answers a request whose key has a record.
func (a *fakeAPI) replay(w http.ResponseWriter, rec *record, body []byte) {
	a.mu.Lock()
	if !rec.done && a.has(flawLockNeverReleased) {
		rec.stuck = true
	}
	done, status, resp := rec.done, rec.status, rec.resp
	a.mu.Unlock()
	switch {
	case !a.has(flawNoBodyCompare) && !bytes.Equal(rec.body, body):
		a.tell(w, rec, "none", false)
		if a.has(flawProblemDisagrees) {
			w.Header().Set("Content-Type", "application/problem+json")
			w.WriteHeader(http.StatusUnprocessableEntity)
			_, _ = w.Write([]byte(`{"type":"urn:x:key-reused","status":422,"operation_state":"completed","safe_new_key":false}`))
			return
		}
		http.Error(w, "key reused with another body", http.StatusUnprocessableEntity)
	case !done && a.has(quirkSlow):
		a.tell(w, rec, "in-flight", false)
		a.respond(w, http.StatusConflict, []byte(`{"error":"a request with this key is being processed"}`), false)
	case !done:
		a.tell(w, rec, "in-flight", false)
		w.Header().Set("Retry-After", "1")
		http.Error(w, "in flight", http.StatusConflict)
	default:
		a.tell(w, rec, "completed", false)
		a.respond(w, status, resp, true)
	}
}

// waitForDuplicate holds the first request of scope until a second one
// passed the check, or raceWindow.
func (a *fakeAPI) waitForDuplicate(scope string) {
	a.mu.Lock()
	g := a.gates[scope]
	if g == nil {
		g = &raceGate{both: make(chan struct{})}
		a.gates[scope] = g
	}
	if g.passed++; g.passed == 2 {
		close(g.both)
	}
	a.mu.Unlock()
	select {
	case <-g.both:
	case <-time.After(raceWindow):
	}
}

// makePayment counts a payment and returns its response body.
func (a *fakeAPI) makePayment() []byte {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.payments++
	if a.has(quirkAnonymous) {
		return []byte(`{"status":"accepted"}` + "\n")
	}
	return fmt.Appendf(nil, `{"payment_id":"pay_%d"}`+"\n", a.payments)
}

func (a *fakeAPI) respond(w http.ResponseWriter, status int, body []byte, replayed bool) {
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !replayed || a.has(flawUnmarkedReplays):
	case a.has(flawReplayMarkedOtherwise):
		w.Header().Set("X-Idempotent-Replay", "true")
	default:
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.WriteHeader(status)
	_, _ = w.Write(body)
}

// tell sets, with quirkOutcome, the outcome headers of an answer about
// rec's operation in state; first is true for the answer of the attempt
// that ran.
func (a *fakeAPI) tell(w http.ResponseWriter, rec *record, state string, first bool) {
	if !a.has(quirkOutcome) {
		return
	}
	h := w.Header()
	h.Set("Idempotency-Operation-State", state)
	ref := sha256.Sum256([]byte(rec.scope))
	if a.has(flawRefChanges) && !first {
		ref = sha256.Sum256([]byte(rec.scope + time.Now().String()))
	}
	if rec.scope != "" { // no reference without a valid key
		h.Set("Idempotency-Operation-Ref", hex.EncodeToString(ref[:]))
	}
	h.Set("Idempotency-Safe-New-Key", fmt.Sprint(state == "none" || state == "in-flight" && a.has(flawSafeInFlight)))
	if state != "none" && !a.has(quirkNoExpiry) {
		expires := time.Now().Add(24 * time.Hour)
		if a.has(flawKeyExpired) {
			expires = time.Now().Add(-time.Hour)
		}
		h.Set("Idempotency-Key-Expires", expires.UTC().Format(http.TimeFormat))
	}
}
