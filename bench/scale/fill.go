package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// fillBatch is the records one INSERT of fill generates.
const fillBatch = 100_000

// sqlFill clones the record of key $3 into records $1 to $2-1 of a fill
// of $4 records starting at $5: each with its own scope hash, key,
// fingerprint and token, done, created 24 hours before it expires, the
// expiries spread evenly over the next 24 hours in the order of the rows,
// as a table filled over a day holds them.
const sqlFill = `INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key, fp_alg,
    fingerprint, state, token, attempt, status, headers, body, created_at, expires_at)
SELECT sha256(convert_to('scale-' || g, 'UTF8')), t.tenant, t.principal, t.route, md5(g::text)::uuid::text,
    t.fp_alg, sha256(int8send(g)), t.state, gen_random_uuid(), 1, t.status, t.headers, t.body,
    e - interval '24 hours', e
FROM generate_series($1::bigint, $2::bigint - 1) AS g,
    LATERAL (SELECT statement_timestamp() + interval '24 hours' * ((g - $5 + 0.5) / $4)) AS x(e),
    (SELECT * FROM idem_records WHERE idem_key = $3) AS t`

// fill grows idem_records from rows from to rows to, cloning the record
// of key, and vacuums and analyses it, as autovacuum would after a day,
// and makes a checkpoint.
func fill(ctx context.Context, pool *pgxpool.Pool, key string, from, to int, out io.Writer) error {
	start := time.Now()
	for lo := from; lo < to; lo += fillBatch {
		hi := min(lo+fillBatch, to)
		if _, err := pool.Exec(ctx, sqlFill, lo, hi, key, to-from, from); err != nil {
			return fmt.Errorf("fill: %w", err)
		}
		if (hi-from)%(10*fillBatch) == 0 || hi == to {
			fmt.Fprintf(out, "  filled %d of %d records in %.0fs\n", hi-from, to-from, time.Since(start).Seconds())
		}
	}
	if err := statsSettled(ctx, pool, to); err != nil {
		return err
	}
	// A checkpoint too, so that the measurement after the fill does not
	// pay for writing out what the fill and the vacuum dirtied.
	for _, stmt := range []string{"VACUUM (ANALYZE) idem_records", "CHECKPOINT"} {
		if _, err := pool.Exec(ctx, stmt); err != nil {
			return fmt.Errorf("%s: %w", stmt, err)
		}
	}
	return nil
}

// sqlStatsSettled is true once the statistics count at least $1 rows of
// idem_records as inserted (the rows the fill leaves: no count(*) over
// millions of rows on every poll).
const sqlStatsSettled = `SELECT n_tup_ins >= $1
    FROM pg_stat_user_tables WHERE relid = 'idem_records'::regclass`

// statsSettled waits (at most 10 s) until the statistics count rows
// inserts. A backend sends its counts at most once a second, so they may
// arrive after the fill; a VACUUM before them would count the
// rows live, and the late inserts would then be added to its count (the
// report said 1,914 live rows of 1,000).
func statsSettled(ctx context.Context, pool *pgxpool.Pool, rows int) error {
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		var done bool
		if err := pool.QueryRow(ctx, sqlStatsSettled, rows).Scan(&done); err != nil || done {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	return errors.New("fill: the statistics did not count the fill's rows within 10 s")
}

// tableSize is idem_records's size and its tuples, from the statistics.
type tableSize struct {
	total, heap, indexes int64 // bytes
	live, dead           int64
	autovacuums          int64
}

func (s tableSize) String() string {
	perRow := "-"
	if s.live > 0 {
		perRow = fmt.Sprintf("%d", s.total/s.live)
	}
	return fmt.Sprintf("%d live, %d dead rows; %.1f MB (heap %.1f, indexes %.1f); %s bytes per live row",
		s.live, s.dead, mb(s.total), mb(s.heap), mb(s.indexes), perRow)
}

func mb(b int64) float64 { return float64(b) / (1 << 20) }

func measureSize(ctx context.Context, pool *pgxpool.Pool) (tableSize, error) {
	var s tableSize
	err := pool.QueryRow(ctx, `SELECT pg_total_relation_size(relid), pg_relation_size(relid),
		pg_indexes_size(relid), n_live_tup, n_dead_tup, autovacuum_count
		FROM pg_stat_user_tables WHERE relid = 'idem_records'::regclass`).
		Scan(&s.total, &s.heap, &s.indexes, &s.live, &s.dead, &s.autovacuums)
	return s, err
}
