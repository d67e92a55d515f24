package server

import (
	"context"
	"log/slog"
	"time"
)

// SweepConfig configures RunSweeper. Its zero value sweeps every minute in
// batches of 1000.
type SweepConfig struct {
	// Interval is the time between sweeps. Zero or negative: one minute.
	Interval time.Duration
	// Batch is the most records one statement deletes. Zero or negative:
	// 1000.
	Batch int
	// MaxBatches bounds the batches of one sweep, so that a large backlog
	// is worked off over several intervals. Zero or negative: 100.
	MaxBatches int
	// Logger receives a record for each sweep that deleted something or
	// failed. Nil: slog.Default().
	Logger *slog.Logger
	// OnSweep, when set, is called after each sweep with the records it
	// deleted and its error.
	OnSweep func(deleted int, err error)
}

// RunSweeper deletes expired records from store at once and then every
// Interval, in bounded batches that never wait for a record a request
// holds, until ctx is done; it returns ctx's error. Run it in a goroutine
// of one or more nodes: concurrent sweepers skip each other's rows.
func RunSweeper(ctx context.Context, store Store, cfg SweepConfig) error {
	cfg = cfg.withDefaults()
	ticker := time.NewTicker(cfg.Interval)
	defer ticker.Stop()
	for {
		deleted, err := sweepBatches(ctx, store, cfg.Batch, cfg.MaxBatches)
		if err != nil && ctx.Err() == nil {
			cfg.Logger.LogAttrs(ctx, slog.LevelError, "idem: sweep failed", slog.Int("deleted", deleted), slog.Any("err", err))
		} else if deleted > 0 {
			cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "idem: swept expired records", slog.Int("deleted", deleted))
		}
		if cfg.OnSweep != nil {
			cfg.OnSweep(deleted, err)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
	}
}

// withDefaults is cfg with its zero and negative fields resolved.
func (cfg SweepConfig) withDefaults() SweepConfig {
	cfg.Interval = orDefault(cfg.Interval, time.Minute)
	cfg.Batch = orDefault(cfg.Batch, 1000)
	cfg.MaxBatches = orDefault(cfg.MaxBatches, 100)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// sweepBatches sweeps batch after batch until one comes back short.
func sweepBatches(ctx context.Context, store Store, batch, maxBatches int) (int, error) {
	total := 0
	for range maxBatches {
		n, err := store.Sweep(ctx, batch)
		total += n
		if err != nil || n < batch {
			return total, err
		}
	}
	return total, nil
}
