package idem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/testserver"
)

// One configured key header end to end (issue 18): the client sends the
// key in X-Idempotency-Key, the middleware reads it there, the testserver
// names each operation by it, so that its first response is dropped and
// the checker finds every operation applied once.
func TestKeyHeaderEndToEnd(t *testing.T) {
	const name = "X-Idempotency-Key"
	var ledger testserver.Ledger
	var n atomic.Int32
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := testserver.InfoFrom(r.Context())
		id := fmt.Sprintf("pay_%d", n.Add(1))
		ledger.Record(info.Op, id)
		w.WriteHeader(http.StatusCreated)
		io.WriteString(w, id)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", server.Middleware(nil, server.Config{KeyHeader: name})(create))
	dropFirst := testserver.Rule{Script: []testserver.Fault{{Kind: testserver.FaultDropClose}}}
	srv := testserver.New(mux, testserver.Config{KeyHeader: name, Rules: []testserver.Rule{dropFirst}})
	t.Cleanup(srv.Close)
	client := idem.NewClient(idem.Config{KeyHeader: name, Backoff: idem.Backoff{Base: time.Millisecond}})

	var history testserver.History
	for i := range 5 {
		op := fmt.Sprintf("op-%d", i)
		ctx, cancel := context.WithTimeout(idem.WithKey(context.Background(), op), 5*time.Second)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{}`))
		resp, err := client.Do(req)
		if err != nil {
			cancel()
			t.Fatalf("%s: %v", op, err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		cancel()
		history.OK(op, string(body))
	}
	report := testserver.Check(&ledger, &history)
	if err := report.Err(); err != nil || report.Applied != 5 || report.Effects != 5 {
		t.Fatalf("report: %v\n%s", err, report)
	}
	// An event is logged when the server is done with a request, which
	// may be after the client has read the response: wait for it.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	events, err := srv.WaitEvents(ctx, 10)
	if err != nil {
		t.Fatalf("%d requests reached the server, want 10: each operation's first response dropped", len(events))
	}
	if got := len(events); got != 10 {
		t.Errorf("%d requests reached the server, want 10", got)
	}
}
