package api

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/server"
)

// OpenBackend sets cfg's Backend and Store, as the example servers do
// from their -db flag: Postgres at url, after [Migrate] and then ready
// (when not nil) on the pool, or memory when url is empty. closeDB closes
// the pool; on an error, nothing is left open.
func OpenBackend(ctx context.Context, url string, cfg *Config, ready func(context.Context, *pgxpool.Pool) error) (closeDB func(), err error) {
	if url == "" {
		cfg.Backend, cfg.Store = NewMemoryBackend(), server.NewMemoryStore()
		return func() {}, nil
	}
	pool, err := pgxpool.New(ctx, url)
	if err != nil {
		return nil, fmt.Errorf("-db: %w", err)
	}
	err = Migrate(ctx, pool)
	if err == nil && ready != nil {
		err = ready(ctx, pool)
	}
	if err != nil {
		pool.Close()
		return nil, err
	}
	cfg.Backend, cfg.Store = NewPostgresBackend(pool), server.NewPostgresStore(pool)
	return pool.Close, nil
}
