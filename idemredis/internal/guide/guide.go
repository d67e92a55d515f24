// Package guide is the code that docs/server.md shows of idemredis, so
// that internal/docs's TestReadmeSnippetsAreCompiled can hold the guide to
// code that this module compiles.
package guide

import (
	"context"
	"net/http"

	"github.com/redis/go-redis/v9"

	"github.com/idemkit/idem/idemredis"
	"github.com/idemkit/idem/server"
)

// Mount is docs/server.md's "Stores": a Leased route whose records live in
// Redis, a claim counting once a replica has it.
func Mount(ctx context.Context, mux *http.ServeMux, charge http.Handler) error {
	rdb := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: []string{"127.0.0.1:6379"}})
	store, err := idemredis.New(ctx, rdb, idemredis.Config{Replicas: 1}) // WAIT for a replica: claims, completions, replays
	if err != nil {
		return err
	}
	mux.Handle("POST /v1/charges", server.Middleware(store, server.Config{Mode: server.Leased})(charge))
	return nil
}
