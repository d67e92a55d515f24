package storetest

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// A store gives back the response it stored byte for byte, whatever it
// holds: header values that are not UTF-8 (obs-text), repeated fields and
// empty values in order, and bodies of any size and bytes.
var responseAreas = []area{
	{"StoredResponseIsByteExact", onlyLeased, testStoredResponseIsByteExact},
	{"SettledResponseIsByteExact", onlyLeased, testSettledResponseIsByteExact},
	{"ReplayKeepsHeaderBytes", bothModes, testReplayKeepsHeaderBytes},
}

// exactResponses are the responses that a store must give back exactly.
func exactResponses() map[string]*server.Response {
	large := make([]byte, 2<<20+1) // past the middleware's default cap: a store has none
	for i := range large {
		large[i] = byte(i * 7) // every byte value, NUL and invalid UTF-8 among them
	}
	return map[string]*server.Response{
		"not UTF-8": {Status: 201, Header: http.Header{
			"Location": {"/caf\xe9"}, "Etag": {"\"\xff\x00\""}, "X-Trace": {"\x80 \xc3\x28 \xed\xa0\x80"}},
			Body: []byte("{\"name\":\"caf\xe9\"}")},
		"repeated fields": {Status: 200, Header: http.Header{
			"X-Trace": {"first", "second", "first"}, "Cache-Control": {"no-store", "no-cache"}},
			Body: []byte("ok")},
		"empty values": {Status: 202, Header: http.Header{"X-Empty": {""}, "X-Trace": {"", "a", ""}}},
		"no header":    {Status: 204, Header: http.Header{}},
		"large body":   {Status: 200, Header: http.Header{"Content-Type": {"application/octet-stream"}}, Body: large},
	}
}

// sameResponse checks got against want byte for byte.
func sameResponse(t *testing.T, want, got *server.Response) {
	t.Helper()
	require.NotNil(t, got, "the replay's Response")
	assert.False(t, got.Unavailable)
	assert.Equal(t, want.Status, got.Status, "status")
	assert.Len(t, got.Header, len(want.Header), "header fields: %q", got.Header)
	for name, values := range want.Header {
		assert.Equal(t, values, got.Header[name], "the values of %s, byte for byte and in order", name)
	}
	assert.True(t, bytes.Equal(want.Body, got.Body), "body of %d bytes, byte for byte (got %d bytes)", len(want.Body), len(got.Body))
}

// An attempt's Complete stores the response that later claims replay.
func testStoredResponseIsByteExact(t *testing.T, e *env, _ mode) {
	for name, want := range exactResponses() {
		t.Run(name, func(t *testing.T) {
			c := leasedClaim("k-exact-"+name, 30*time.Second, time.Hour, 1)
			require.NoError(t, e.claimed(c).Complete(context.Background(), want))
			for range 2 {
				res := e.claim(c)
				require.Equal(t, server.VerdictReplay, res.Verdict)
				sameResponse(t, want, res.Response)
			}
		})
	}
}

// A reconciler's Settler stores its response as exactly.
func testSettledResponseIsByteExact(t *testing.T, e *env, _ mode) {
	ctx := context.Background()
	for name, want := range exactResponses() {
		t.Run(name, func(t *testing.T) {
			c := leasedClaim("k-settled-"+name, 30*time.Second, time.Hour, 1)
			require.NoError(t, e.claimed(c).Abort(ctx, false))
			var taken *server.Taken
			for _, tk := range e.take(e.store, charges, 30*time.Second, 64) {
				if tk.Key == c.Key {
					taken = tk
				}
			}
			require.NotNil(t, taken, "the abandoned operation %s is taken", c.Key)
			require.NoError(t, taken.Settler.Complete(ctx, want))
			res := e.claim(c)
			require.Equal(t, server.VerdictReplay, res.Verdict)
			sameResponse(t, want, res.Response)
		})
	}
}

// Through the middleware, a replay sends the header bytes the handler set.
func testReplayKeepsHeaderBytes(t *testing.T, e *env, m mode) {
	mux := http.NewServeMux()
	cfg := server.Config{ReplayHeaders: []string{"X-Trace", "X-Empty"}}
	e.mount(mux, "POST /v1/exact", m, cfg, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		h := w.Header()
		h.Set("Location", "/caf\xe9")
		h.Set("Etag", "\"\xff\"")
		h["X-Trace"] = []string{"\x80 \xc3\x28", "", "\xff"}
		h.Set("X-Empty", "")
		h.Set("Content-Type", "application/octet-stream")
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, "\x00\xff\xe9")
	}))
	srv := serve(t, mux)
	first := post(t, srv, "/v1/exact", "k-bytes", "{}")
	require.NoError(t, first.err)
	require.Equal(t, http.StatusCreated, first.status, first.body)
	again := post(t, srv, "/v1/exact", "k-bytes", "{}")
	require.NoError(t, again.err)
	require.True(t, again.replayed(), "status %d", again.status)
	for _, name := range []string{"Location", "Etag", "X-Trace", "X-Empty", "Content-Type"} {
		assert.Equal(t, first.header[name], again.header[name], "%s", fmt.Sprintf("the replayed %s", name))
	}
	assert.Equal(t, "/caf\xe9", again.header.Get("Location"))
	assert.Equal(t, []string{"\x80 \xc3\x28", "", "\xff"}, again.header["X-Trace"])
	assert.Equal(t, "\x00\xff\xe9", again.body)
}
