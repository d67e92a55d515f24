package replaytest

import (
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// Serve starts a loopback server on h, closed when the test ends. Its
// error log is discarded: some tests' handlers panic on purpose.
func Serve(t *testing.T, h http.Handler) *httptest.Server {
	t.Helper()
	srv := httptest.NewUnstartedServer(h)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

// Reply is a response read in full.
type Reply struct {
	Status int
	Header http.Header
	Body   string
	Err    error // the request failed: no response
}

// Replayed reports whether the response says it is a replay.
func (r Reply) Replayed() bool { return r.Header.Get(wire.HeaderReplayed) == "true" }

// Send sends method to srv's path with the key (none when "") and body,
// as JSON; extra is pairs of header names and values. It may be called
// from any goroutine: a request it cannot build fails t with Errorf, not
// FailNow.
func Send(t *testing.T, srv *httptest.Server, method, path, key, body string, extra ...string) Reply {
	t.Helper()
	req, err := http.NewRequest(method, srv.URL+path, strings.NewReader(body))
	if err != nil {
		t.Errorf("NewRequest: %v", err)
		return Reply{Err: err}
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set(wire.HeaderKey, key)
	}
	for i := 0; i+1 < len(extra); i += 2 {
		req.Header.Add(extra[i], extra[i+1])
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return Reply{Err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return Reply{Status: resp.StatusCode, Header: resp.Header, Body: string(b), Err: err}
}

// Recv receives from ch, failing the test after 30 s instead of hanging.
func Recv[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(30 * time.Second):
		t.Fatal("nothing received after 30s")
		panic("unreachable")
	}
}
