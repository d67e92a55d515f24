package server

import (
	"context"
	"fmt"
	"time"
)

// StoreStats is what [Store.Stats] counts: the operations in flight, for a
// gauge of how many there are and how old the oldest is.
type StoreStats struct {
	// Running counts the records whose operation is claimed and not yet
	// completed, released or settled: attempts running now, and [Leased]
	// operations whose attempt ended without an outcome (a node that
	// died), until a retry or a reconciler settles them.
	//
	// A [PostgresStore] sees committed claims only, those of Leased
	// operations: a [Transactional] claim is its request's open
	// transaction, invisible to other sessions until it commits, when
	// its record is done. A [MemoryStore] counts the claims of both modes.
	Running int
	// OldestRunning is the age of the oldest of them by the store's clock
	// (the time since its operation was first claimed); 0 when none.
	OldestRunning time.Duration
}

// sqlStats counts the running records and the age of the oldest, through
// the partial index on running records: $1 clock offset.
const sqlStats = `SELECT count(*), coalesce(extract(epoch FROM statement_timestamp() + $1::interval - min(created_at)), 0)::float8
FROM idem_records WHERE state = 'running'`

// Stats counts the running records (see [StoreStats]) in one statement, an
// index scan of the running records only. ctx governs it.
func (s *PostgresStore) Stats(ctx context.Context) (StoreStats, error) {
	conn, err := s.db.Acquire(ctx)
	if err != nil {
		return StoreStats{}, fmt.Errorf("server: stats: %w", err)
	}
	defer conn.Release()
	var st StoreStats
	var oldest float64
	if err := conn.QueryRow(ctx, sqlStats, s.offset()).Scan(&st.Running, &oldest); err != nil {
		return StoreStats{}, fmt.Errorf("server: stats: %w", err)
	}
	st.OldestRunning = max(time.Duration(oldest*float64(time.Second)), 0)
	return st, nil
}

// Stats counts the running records (see [StoreStats]); it looks at every
// record, under the store's lock.
func (m *MemoryStore) Stats(ctx context.Context) (StoreStats, error) {
	if err := ctx.Err(); err != nil {
		return StoreStats{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.now()
	var st StoreStats
	for _, rec := range m.recs {
		if rec.state == stateRunning {
			st.Running++
			st.OldestRunning = max(st.OldestRunning, now.Sub(rec.createdAt))
		}
	}
	return st, nil
}
