package server

import (
	"context"
	"log/slog"
	"time"
)

// SweepConfig configures [RunSweeper]. Its zero value sweeps every minute in
// batches of 100, at most 100,000 records a sweep.
type SweepConfig struct {
	// Interval is the time between sweeps. Zero or negative: one minute.
	Interval time.Duration
	// Batch is the most records one statement deletes. Zero or negative:
	// 100. A batch holds the row locks of the records it deletes until its
	// statement ends, and a request that reuses the key of one of them
	// (a retry after its record expired) waits that long: a small batch
	// keeps that wait to a few milliseconds at tens of millions of records
	// (BENCHMARKS.md, Scale).
	Batch int
	// MaxBatches bounds the batches of one sweep, so that a large backlog
	// is worked off over several intervals. Zero or negative: 1000. A sweep
	// that stops at this bound with every batch full logs a warning: the
	// sweeper deletes at most Batch*MaxBatches records per Interval, and
	// records arriving faster than that pile up.
	MaxBatches int
	// Logger receives a record for each sweep that deleted something or
	// failed, and a warning for each that stopped at MaxBatches. Nil:
	// slog.Default().
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
		cfg.log(ctx, deleted, err)
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

// log reports a sweep that deleted deleted records and ended with err.
// Every batch full means that the sweep stopped at MaxBatches with expired
// records left, likely more than the sweeper can delete per Interval.
func (cfg SweepConfig) log(ctx context.Context, deleted int, err error) {
	switch {
	case err != nil && ctx.Err() == nil:
		cfg.Logger.LogAttrs(ctx, slog.LevelError, "idem: sweep failed", slog.Int("deleted", deleted), slog.Any("err", err))
	case err == nil && deleted == cfg.Batch*cfg.MaxBatches:
		cfg.Logger.LogAttrs(ctx, slog.LevelWarn, "idem: the sweeper is not keeping up: a sweep stopped at "+
			"SweepConfig.MaxBatches with every batch full; raise MaxBatches or Batch, or shorten Interval",
			slog.Int("deleted", deleted), slog.Int("batch", cfg.Batch), slog.Int("max_batches", cfg.MaxBatches),
			slog.Duration("interval", cfg.Interval))
	case deleted > 0:
		cfg.Logger.LogAttrs(ctx, slog.LevelInfo, "idem: swept expired records", slog.Int("deleted", deleted))
	}
}

// withDefaults is cfg with its zero and negative fields resolved.
func (cfg SweepConfig) withDefaults() SweepConfig {
	cfg.Interval = orDefault(cfg.Interval, time.Minute)
	cfg.Batch = orDefault(cfg.Batch, 100)
	cfg.MaxBatches = orDefault(cfg.MaxBatches, 1000)
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	return cfg
}

// sweepBatches sweeps batch after batch until one comes back short or
// maxBatches have run.
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
