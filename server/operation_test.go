package server

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestOperationFrom(t *testing.T) {
	eachStore(t, func(t *testing.T, k *kit) {
		seen := make(chan Operation, 4)
		record := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			op, ok := OperationFrom(r.Context())
			if !ok {
				op = Operation{Route: "none"}
			}
			seen <- op
			w.WriteHeader(http.StatusCreated)
		})
		scope := func(*http.Request) (string, string) { return "acme", "alice" }
		mux := http.NewServeMux()
		mux.Handle("POST /v1/tx", Middleware(k.store, quiet(Config{Scope: scope}))(record))
		mux.Handle("POST /v1/leased", Middleware(k.store, quiet(Config{Scope: scope, Mode: Leased, Lease: time.Minute}))(record))
		mux.Handle("POST /v1/open", Middleware(k.store, quiet(Config{Keys: KeyOptional}))(record))
		srv := serve(t, mux)

		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/tx", `"k-op"`, `{}`).status)
		assert.Equal(t, Operation{Tenant: "acme", Principal: "alice", Route: "POST /v1/tx", Key: "k-op", Attempt: 1}, recv(t, seen),
			"the key without its sf-string quotes")
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/leased", "k-op", `{}`).status)
		assert.Equal(t, Operation{Tenant: "acme", Principal: "alice", Route: "POST /v1/leased", Key: "k-op", Attempt: 1}, recv(t, seen))
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/open", "", `{}`).status)
		assert.Equal(t, Operation{Route: "none"}, recv(t, seen), "an unkeyed request runs no operation")

		_, ok := OperationFrom(t.Context())
		assert.False(t, ok, "outside the middleware")
	})
}
