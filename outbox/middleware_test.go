package outbox

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// TestUnderTheMiddleware enqueues from a handler under server.Middleware:
// a 201 sends its message, a 500 or a panic rolls it back with the rest of
// the operation, and a retry of a rolled-back operation sends the message
// under the same derived key.
func TestUnderTheMiddleware(t *testing.T) {
	ev := &events{}
	tg, o, pool := postgresTarget(t, fastConfig(ev))
	require.NoError(t, server.Migrate(context.Background(), pool))
	d := newDownstream(t, nil)
	outcome := "201" // what the handler does next
	mw := server.Middleware(server.NewPostgresStore(pool), server.Config{Logger: discardLogger(), WaitBound: 10 * time.Second})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, ok := server.Tx(r.Context())
		require.True(t, ok)
		_, err := o.Enqueue(r.Context(), tx, d.message("payment.created"))
		require.NoError(t, err)
		switch outcome {
		case "500":
			w.WriteHeader(http.StatusInternalServerError)
		case "panic":
			panic(http.ErrAbortHandler)
		default:
			w.WriteHeader(http.StatusCreated)
		}
	})))
	api := httptest.NewServer(mux)
	defer api.Close()
	post := func(key string) int {
		req, _ := http.NewRequest("POST", api.URL+"/v1/payments", strings.NewReader(`{}`))
		req.Header.Set("Idempotency-Key", key)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return 0 // the panic aborts the response
		}
		resp.Body.Close()
		return resp.StatusCode
	}

	outcome = "500"
	require.Equal(t, http.StatusInternalServerError, post("op-1"))
	outcome = "panic"
	post("op-2")
	require.Equal(t, 0, messageCount(t, pool), "a rolled-back operation left a message")

	outcome = "201"
	require.Equal(t, http.StatusCreated, post("op-1")) // op-1 runs again, and commits
	require.Equal(t, http.StatusCreated, post("op-1")) // a replay: the handler does not run
	require.Equal(t, 1, messageCount(t, pool))

	running(t, tg.run)
	want := DeriveKey(server.Operation{Route: "POST /v1/payments", Key: "op-1"}, "payment.created")
	eventually(t, func() bool { return d.requests(want) == 1 }, "delivered under the key derived from the operation")
	require.Equal(t, []string{want}, d.keys())
}
