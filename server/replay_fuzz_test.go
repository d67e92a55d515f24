package server

import (
	"bytes"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/google/uuid"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
)

// FuzzReplay checks the capture and replay of a handler's response through
// the middleware over a MemoryStore: whatever status, headers (repeated,
// spelled in any case, allowlisted or never to be replayed) and body bytes
// the handler writes, in however many writes, with or without a flush,
// the client first gets the handler's own response; then a retry gets
// the stored status, exactly the allowlisted headers with every value in
// order, and the body byte for byte, or 500 result-unavailable for a
// streamed result, or a fresh run for a status that is not stored.
//
//	go test -run '^$' -fuzz 'FuzzReplay$' -fuzztime 5m -fuzzminimizetime 10s ./server
func FuzzReplay(f *testing.F) {
	addReplaySeeds(f)
	f.Fuzz(func(t *testing.T, status uint16, headers, body []byte, writes uint8, flush bool) {
		checkReplay(t, NewMemoryStore(), newReplayCase(status, headers, body, writes, flush))
	})
}

// FuzzReplayPostgres is FuzzReplay over a PostgresStore, where headers and
// body make a round trip through the database.
//
//	go test -run '^$' -fuzz FuzzReplayPostgres -fuzztime 5m -fuzzminimizetime 10s ./server
func FuzzReplayPostgres(f *testing.F) {
	pool := pgtest.Pool(f)
	if err := Migrate(f.Context(), pool); err != nil {
		f.Fatal(err)
	}
	store := NewPostgresStore(pool)
	addReplaySeeds(f)
	f.Fuzz(func(t *testing.T, status uint16, headers, body []byte, writes uint8, flush bool) {
		checkReplay(t, store, newReplayCase(status, headers, body, writes, flush))
	})
}

func addReplaySeeds(f *testing.F) {
	f.Helper()
	type seed struct {
		status  int
		headers [][2]string
		body    string
		writes  uint8
		flush   bool
	}
	for _, s := range []seed{
		{201, [][2]string{{"Content-Type", "application/json"}, {"X-Trace", "a"}, {"X-Trace", "b"}, {"Set-Cookie", "s=1"}}, `{"id":1,  "z":[3, 2,1]}`, 2, false},
		{200, [][2]string{{"content-type", "text/plain"}, {"Content-Type", "text/csv"}, {"Date", "Mon, 01 Jan 2001 00:00:00 GMT"}}, "a,b\n", 1, false},
		{204, [][2]string{{"ETag", `"v1"`}, {"Location", "/v1/x/1"}}, "ignored", 1, false},
		{402, [][2]string{{"Authorization", "Bearer x"}, {"Www-Authenticate", "Basic"}}, `{"declined":true}`, 0, false},
		{500, [][2]string{{"Content-Type", "text/plain"}}, "boom", 1, false},
		{400, nil, strings.Repeat("x", 100), 3, false},
		{503, nil, strings.Repeat("y", 100), 2, false},
		{200, [][2]string{{"Cache-Control", "no-store"}}, "stream", 2, true},
		{201, [][2]string{{"Location", "caf\xe9"}, {"X-Trace", "\x00"}}, "\x00\xff binary", 1, false},
		{304, [][2]string{{"Last-Modified", "Mon, 01 Jan 2001 00:00:00 GMT"}}, "", 0, false},
	} {
		var h []byte
		for _, kv := range s.headers {
			h = append(h, byte(slices.Index(replayNames, kv[0])), byte(len(kv[1])))
			h = append(h, kv[1]...)
		}
		f.Add(uint16(s.status-200), h, []byte(s.body), s.writes, s.flush)
	}
}

// replayNames are the header names a fuzzed handler sets: the allowlist,
// the application's extra name, names the application tries to allowlist
// but that are never replayed, other names, and non-canonical spellings.
var replayNames = []string{
	"Content-Type", "Content-Language", "Location", "ETag", "Last-Modified", "Cache-Control", "X-Trace",
	"content-type", "x-TRACE", "Set-Cookie", "set-cookie", "Date", "Www-Authenticate", "Authorization",
	"Proxy-Authenticate", "Connection", "Keep-Alive", "Transfer-Encoding", "Trailer", "Upgrade",
	"Content-Length", "Idempotent-Replayed", "X-Other", "Retry-After",
}

// replayConfig allowlists X-Trace, and tries to allowlist names that are
// never replayed. The small cap lets the fuzzer reach the streaming path.
var replayConfig = Config{ReplayHeaders: []string{"x-trace", "Set-Cookie", "Date", "Authorization"}, MaxResponseBytes: 64}

// replayAllowed are the canonical names replayConfig replays.
var replayAllowed = []string{"Content-Type", "Content-Language", "Location", "Etag", "Last-Modified", "Cache-Control", "X-Trace"}

// replayCase is what the fuzzed handler writes.
type replayCase struct {
	status int
	header http.Header // as the handler sets it, with its own spelling of names
	parts  [][]byte    // the body, in writes
	flush  bool        // flush after the first write
}

func newReplayCase(status uint16, headers, body []byte, writes uint8, flush bool) replayCase {
	c := replayCase{status: 200 + int(status)%400, header: http.Header{}, flush: flush}
	for len(headers) >= 2 {
		name, n := replayNames[int(headers[0])%len(replayNames)], min(int(headers[1]), len(headers)-2)
		// Any bytes but CR and LF, which net/http would turn into spaces.
		value := strings.NewReplacer("\r", " ", "\n", " ").Replace(string(headers[2 : 2+n]))
		c.header[name] = append(c.header[name], value)
		headers = headers[2+n:]
	}
	k := int(writes % 4)
	for i := range k {
		c.parts = append(c.parts, body[i*len(body)/k:(i+1)*len(body)/k])
	}
	return c
}

func (c replayCase) ServeHTTP(w http.ResponseWriter, _ *http.Request) {
	h := w.Header()
	for name, values := range c.header {
		h[name] = append([]string(nil), values...)
	}
	w.WriteHeader(c.status)
	for i, p := range c.parts {
		_, _ = w.Write(p)
		if c.flush && i == 0 {
			_ = http.NewResponseController(w).Flush()
		}
	}
	if c.flush && len(c.parts) == 0 {
		_ = http.NewResponseController(w).Flush()
	}
}

// body is what the client gets: the writes, unless the status has no body.
func (c replayCase) body() []byte {
	if !bodyAllowed(c.status) {
		return nil
	}
	return bytes.Join(c.parts, nil)
}

// stored reports whether the contract stores the status: not a 5xx, and
// not one of the default statuses that refuse the request itself.
func (c replayCase) stored() bool {
	return c.status < 500 && !slices.Contains([]int{400, 401, 403, 404, 405, 406, 413, 415, 422, 429}, c.status)
}

// streamed reports whether the response had to stream: flushed, or over
// the cap.
func (c replayCase) streamed() bool {
	return c.flush || len(c.body()) > replayConfig.MaxResponseBytes
}

// checkReplay sends c's request twice through the middleware over store
// and checks the first response and the retry's against the contract.
func checkReplay(t *testing.T, store Store, c replayCase) {
	runs := 0
	mux := http.NewServeMux()
	mux.Handle("POST /v1/op", Middleware(store, quiet(replayConfig))(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		c.ServeHTTP(w, r)
	})))
	key := uuid.NewString()
	do := func() *httptest.ResponseRecorder {
		req := httptest.NewRequest(http.MethodPost, "/v1/op", strings.NewReader(`{"amount":1}`))
		req.Header.Set(wire.HeaderKey, key)
		rec := httptest.NewRecorder()
		mux.ServeHTTP(rec, req)
		return rec
	}
	first := do()
	checkRun(t, c, "first response", first)
	retry := do()
	switch {
	case !c.stored():
		if runs != 2 {
			t.Fatalf("retry of a %d: %d %q, handler runs %d; want a fresh run", c.status, retry.Code, retry.Body, runs)
		}
		checkRun(t, c, "retry", retry) // the handler's own response again
	case c.streamed():
		p, ok := wire.ReadProblem(retry.Header().Get("Content-Type"), retry.Body, 1<<16)
		if runs != 1 || retry.Code != http.StatusInternalServerError || !ok || p.Name() != wire.ProblemResultUnavailable {
			t.Fatalf("retry of a streamed %d: %d %q, handler runs %d; want 500 result-unavailable and one run",
				c.status, retry.Code, retry.Body, runs)
		}
	default:
		if runs != 1 {
			t.Fatalf("handler runs = %d, want 1", runs)
		}
		checkReplayed(t, c, retry)
	}
}

// checkRun: the client of a run gets the handler's own response.
func checkRun(t *testing.T, c replayCase, what string, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code != c.status {
		t.Fatalf("%s: status %d %q, want %d", what, rec.Code, rec.Body, c.status)
	}
	if !bytes.Equal(rec.Body.Bytes(), c.body()) && (bodyAllowed(c.status) || !c.streamed()) {
		t.Fatalf("%s: body %q, want %q", what, rec.Body, c.body())
	}
	for name, values := range c.header {
		if got := rec.Header()[name]; !slices.Equal(got, values) && name != "Content-Length" {
			t.Fatalf("%s: %s = %q, want the handler's %q", what, name, got, values)
		}
	}
}

// checkReplayed: the retry gets the stored status, body and exactly the
// allowlisted headers, each with its values in the order net/http sent
// them the first time (names sorted as the handler spelled them).
func checkReplayed(t *testing.T, c replayCase, rec *httptest.ResponseRecorder) {
	t.Helper()
	body := c.body()
	want := http.Header{wire.HeaderReplayed: {"true"}}
	if bodyAllowed(c.status) {
		want["Content-Length"] = []string{strconv.Itoa(len(body))}
	}
	sent := c.header.Clone()
	if _, typed := sent["Content-Type"]; !typed && len(body) > 0 {
		sent["Content-Type"] = []string{http.DetectContentType(body)} // sniffed, as net/http would
	}
	for _, name := range slices.Sorted(maps.Keys(sent)) {
		if canon := http.CanonicalHeaderKey(name); slices.Contains(replayAllowed, canon) {
			want[canon] = append(want[canon], sent[name]...)
		}
	}
	if rec.Code != c.status || !bytes.Equal(rec.Body.Bytes(), body) {
		t.Fatalf("replay: %d %q, want %d %q", rec.Code, rec.Body, c.status, body)
	}
	got := rec.Header().Clone()
	if got.Get(wire.HeaderOperationState) != wire.StateCompleted || got.Get(wire.HeaderSafeNewKey) != "false" ||
		got.Get(wire.HeaderOperationRef) == "" || got.Get(wire.HeaderKeyExpires) == "" {
		t.Fatalf("replay: the outcome headers %q, want state completed, a reference, no new key, an expiry", got)
	}
	for _, name := range []string{wire.HeaderOperationState, wire.HeaderSafeNewKey, wire.HeaderOperationRef, wire.HeaderKeyExpires} {
		delete(got, name) // the answer's own, not the stored response's
	}
	if !headersEqual(got, want) {
		t.Fatalf("replay headers:\n%q\nwant\n%q", got, want)
	}
}

func headersEqual(a, b http.Header) bool {
	if len(a) != len(b) {
		return false
	}
	for name, values := range a {
		if !slices.Equal(values, b[name]) {
			return false
		}
	}
	return true
}
