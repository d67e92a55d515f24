package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// runVia runs stmt in tx the way via names: through each method of the
// guarded Tx that sends SQL, or through its *pgx.Conn.
func runVia(ctx context.Context, tx pgx.Tx, via, stmt string) error {
	switch via {
	case "Exec":
		_, err := tx.Exec(ctx, stmt)
		return err
	case "Query":
		rows, err := tx.Query(ctx, stmt)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	case "QueryRow":
		if err := tx.QueryRow(ctx, stmt).Scan(); !errors.Is(err, pgx.ErrNoRows) {
			return err
		}
		return nil
	case "SendBatch":
		b := &pgx.Batch{}
		b.Queue(stmt)
		return tx.SendBatch(ctx, b).Close()
	case "Conn":
		_, err := tx.Conn().Exec(ctx, stmt)
		return err
	}
	panic("unknown via " + via)
}

// escape is a way for a handler to end the middleware's transaction: its
// statements, run one after the other through via.
type escape struct {
	via   string
	stmts []string
}

func escapes() []escape {
	var all []escape
	for _, stmt := range []string{"COMMIT", "commit;", "END", "ROLLBACK", "ABORT", "PREPARE TRANSACTION 'idem-escape'"} {
		for _, via := range []string{"Exec", "Query", "QueryRow", "SendBatch", "Conn"} {
			all = append(all, escape{via: via, stmts: []string{stmt}})
		}
	}
	return append(all,
		escape{via: "Exec", stmts: []string{"COMMIT AND CHAIN"}},
		escape{via: "Exec", stmts: []string{"COMMIT", "BEGIN"}},
		escape{via: "Query", stmts: []string{"ROLLBACK", "START TRANSACTION"}},
		escape{via: "Conn", stmts: []string{"END", "SELECT 1"}},
	)
}

// A handler that ends the transaction Tx gave it with SQL of its own
// (issue 22) never gets its response stored: what it did before may have
// committed without the record, or rolled back under a record that says it
// happened. Its request fails with 500 commit-failed, the hooks see
// ErrTxEnded, and the guarded Tx refuses every statement after the
// escape, so that nothing more runs outside a transaction through it.
func TestHandlerThatEndsTheTransactionFails(t *testing.T) {
	k := postgresKit(t)
	var mu sync.Mutex
	var released []error
	hooks := Hooks{Released: func(_ context.Context, ev Event) { mu.Lock(); released = append(released, ev.Err); mu.Unlock() }}
	var current escape
	var afterErr error
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		tx, _ := Tx(ctx)
		assert.NoError(t, k.effect(ctx, "before"))
		for _, stmt := range current.stmts {
			_ = runVia(ctx, tx, current.via, stmt) // an error or not, the transaction may be gone
		}
		afterErr = k.effect(ctx, "after")
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{Hooks: hooks}))(h))
	srv := serve(t, mux)
	ctx := context.Background()
	for i, e := range escapes() {
		t.Run(fmt.Sprintf("%s %q", e.via, e.stmts), func(t *testing.T) {
			current, released = e, nil
			key := fmt.Sprintf("k-escape-%d", i)
			r := post(t, srv, "/v1/payments", key, "{}")
			_, _ = k.pool.Exec(ctx, `ROLLBACK PREPARED 'idem-escape'`) // where prepared transactions are enabled
			assert.Equal(t, http.StatusInternalServerError, r.status, r.body)
			if r.status == http.StatusInternalServerError {
				assert.Equal(t, problemCommitFailed, problemName(t, r))
			}
			var records int
			require.NoError(t, k.pool.QueryRow(ctx, `SELECT count(*) FROM idem_records WHERE idem_key = $1`, key).Scan(&records))
			assert.Zero(t, records, "no record of a request whose handler escaped")
			assert.ErrorIs(t, afterErr, ErrTxEnded, "a statement after the escape")
			mu.Lock()
			assert.Len(t, released, 1)
			if len(released) == 1 {
				assert.ErrorIs(t, released[0], ErrTxEnded, "the Released hook's error")
			}
			mu.Unlock()
		})
	}
	assert.Zero(t, k.count(t, "after"), "no statement ran through the Tx after an escape")
}

// levels is a slog.Handler that keeps the level of each message.
type levels struct {
	mu  sync.Mutex
	got map[string]slog.Level
}

func (l *levels) Enabled(context.Context, slog.Level) bool { return true }
func (l *levels) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *levels) WithGroup(string) slog.Handler            { return l }
func (l *levels) Handle(_ context.Context, r slog.Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.got[r.Message] = r.Level
	return nil
}

// A handler that commits the transaction itself and then fails releases
// the key (it rolls back what is left), and says so as an error: what it
// committed stays, and a retry runs it again.
func TestHandlerThatEndsTheTransactionThenFailsIsAnError(t *testing.T) {
	k := postgresKit(t)
	log := &levels{got: map[string]slog.Level{}}
	var releasedErr error
	cfg := Config{Logger: slog.New(log), Hooks: Hooks{Released: func(_ context.Context, ev Event) { releasedErr = ev.Err }}}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := Tx(r.Context())
		assert.NoError(t, k.effect(r.Context(), "committed"))
		_, err := tx.Exec(r.Context(), "COMMIT")
		assert.ErrorIs(t, err, ErrTxEnded)
		w.WriteHeader(http.StatusInternalServerError)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, cfg)(h))
	r := post(t, serve(t, mux), "/v1/payments", "k-escape-fail", "{}")
	assert.Equal(t, http.StatusInternalServerError, r.status)
	assert.ErrorIs(t, releasedErr, ErrTxEnded, "the Released hook's error")
	log.mu.Lock()
	defer log.mu.Unlock()
	assert.Equal(t, slog.LevelError, log.got["idem: released"], "the release is logged as an error")
	assert.Equal(t, 1, k.count(t, "committed"), "the handler's own commit stands")
}

// The escapes the guard cannot see, because one call ends the transaction
// and begins another, or because they go through the Tx's *pgx.Conn, are
// caught where the record is written: the claim marked its transaction
// (sqlTryLock), and a transaction without the mark writes no record. The
// request fails with 500 commit-failed and nothing is stored.
func TestRecordIsWrittenOnlyInTheClaimsTransaction(t *testing.T) {
	k := postgresKit(t)
	var current escape
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		tx, _ := Tx(ctx)
		for _, stmt := range current.stmts {
			_ = runVia(ctx, tx, current.via, stmt)
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	srv := serve(t, mux)
	for i, e := range []escape{
		{via: "Exec", stmts: []string{"COMMIT; BEGIN"}},
		{via: "Exec", stmts: []string{"ROLLBACK AND CHAIN"}},
		{via: "Query", stmts: []string{"COMMIT AND CHAIN"}},
		{via: "Conn", stmts: []string{"COMMIT", "BEGIN"}},
		{via: "Conn", stmts: []string{"ROLLBACK", "BEGIN ISOLATION LEVEL SERIALIZABLE"}},
	} {
		t.Run(fmt.Sprintf("%s %q", e.via, e.stmts), func(t *testing.T) {
			current = e
			key := fmt.Sprintf("k-rebegin-%d", i)
			r := post(t, srv, "/v1/payments", key, "{}")
			assert.Equal(t, http.StatusInternalServerError, r.status, r.body)
			if r.status == http.StatusInternalServerError {
				assert.Equal(t, problemCommitFailed, problemName(t, r))
			}
			var records int
			require.NoError(t, k.pool.QueryRow(context.Background(), `SELECT count(*) FROM idem_records WHERE idem_key = $1`, key).Scan(&records))
			assert.Zero(t, records, "no record outside the claim's transaction")
		})
	}
	current = escape{}
	ok := post(t, srv, "/v1/payments", "k-plain", "{}")
	assert.Equal(t, http.StatusCreated, ok.status, "a handler that leaves the transaction alone")
}
