package server_test

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/stdlib"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// sqlKit is a PostgresSQLStore on a schema of its own, with a ledger table
// for the handlers' effects.
type sqlKit struct {
	db    *sql.DB
	store *server.PostgresSQLStore
	url   string
}

func newSQLKit(t *testing.T) *sqlKit {
	t.Helper()
	url := pgtest.SchemaURL(t)
	db := openSQL(t, url, "idem_sqlkit", 8)
	ctx := context.Background()
	_, err := db.ExecContext(ctx, server.Schema())
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, `CREATE TABLE ledger (id int PRIMARY KEY DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
	return &sqlKit{db: db, store: server.NewPostgresSQLStore(db), url: url}
}

// rows counts the ledger's rows.
func (k *sqlKit) rows(t *testing.T) int {
	t.Helper()
	var n int
	require.NoError(t, k.db.QueryRow(`SELECT count(*) FROM ledger`).Scan(&n))
	return n
}

// serve mounts h at POST /v1/payments behind a Transactional middleware.
func (k *sqlKit) serve(t *testing.T, h http.HandlerFunc, hooks server.Hooks) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mw := server.Middleware(k.store, server.Config{Hooks: hooks, Logger: slog.New(slog.DiscardHandler)})
	mux.Handle("POST /v1/payments", mw(h))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// sqlReply is a response read in full.
type sqlReply struct {
	status int
	header http.Header
	body   string
}

// pay posts a payment with key to srv.
func pay(t *testing.T, srv *httptest.Server, key string) (sqlReply, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	req.Header.Set(wire.HeaderKey, key)
	resp, err := srv.Client().Do(req)
	if err != nil {
		return sqlReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return sqlReply{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

func mustPay(t *testing.T, srv *httptest.Server, key string) sqlReply {
	t.Helper()
	r, err := pay(t, srv, key)
	require.NoError(t, err)
	return r
}

// A handler that ends the *sql.Tx with SQL of its own, or whose
// transaction cannot commit, gets 500 commit-failed, never its 201, and
// no response is stored: the retry runs the handler again.
func TestSQLStoreCommitFailureNeverSendsTheHandlersResponse(t *testing.T) {
	cases := map[string]struct {
		mutate func(ctx context.Context, tx *sql.Tx) error
		rows   int // ledger rows after two tries
	}{
		"COMMIT": {func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `COMMIT`)
			return err
		}, 2}, // what the handler committed itself stays
		"ROLLBACK": {func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `ROLLBACK`)
			return err
		}, 0},
		"COMMIT; BEGIN": {func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `COMMIT; BEGIN`)
			return err
		}, 2},
		"Rollback": {func(ctx context.Context, tx *sql.Tx) error { return tx.Rollback() }, 0},
		"deferred constraint": {func(ctx context.Context, tx *sql.Tx) error {
			_, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES (1000000 + $1), (1000000 + $1)`, 1)
			return err
		}, 0},
		"swallowed error": {func(ctx context.Context, tx *sql.Tx) error {
			_, _ = tx.ExecContext(ctx, `SELECT 1/0`) // aborts the transaction; the handler ignores it
			return nil
		}, 0},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := newSQLKit(t)
			var runs atomic.Int64
			var ended atomic.Int64
			srv := k.serve(t, func(w http.ResponseWriter, r *http.Request) {
				n := runs.Add(1)
				tx, ok := server.SQLTx(r.Context())
				require.True(t, ok, "the handler has the claim's *sql.Tx")
				_, err := tx.ExecContext(r.Context(), `INSERT INTO ledger VALUES ($1)`, n)
				if err == nil {
					err = c.mutate(r.Context(), tx)
				}
				if err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
			}, server.Hooks{Released: func(_ context.Context, ev server.Event) {
				if errors.Is(ev.Err, server.ErrTxEnded) {
					ended.Add(1)
				}
			}})
			for i := range 2 {
				r := mustPay(t, srv, "k-commit")
				assert.Equal(t, http.StatusInternalServerError, r.status, "try %d: %s", i, r.body)
				assert.Contains(t, r.body, "commit-failed")
			}
			assert.EqualValues(t, 2, runs.Load(), "nothing was stored: the retry runs again")
			assert.Equal(t, c.rows, k.rows(t))
			if c.rows > 0 {
				assert.EqualValues(t, 2, ended.Load(), "Event.Err is server.ErrTxEnded")
			}
		})
	}
}

// A connection lost while the handler runs, which the handler's own
// statement then meets (database/sql's driver.ErrBadConn on the next), ends
// in 503 commit-failed with Retry-After: the retry must wait the outage
// out. Nothing committed, and the retry runs.
func TestSQLStoreLostConnectionSeenByTheHandler(t *testing.T) {
	k := newSQLKit(t)
	monitor := pgtest.NewPool(t, pgtest.DatabaseURL(t))
	var runs atomic.Int64
	srv := k.serve(t, func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		ctx := r.Context()
		tx, _ := server.SQLTx(ctx)
		_, err := tx.ExecContext(ctx, `INSERT INTO ledger VALUES ($1)`, n)
		require.NoError(t, err)
		if n == 1 {
			var pid int
			require.NoError(t, tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid))
			require.NoError(t, terminate(ctx, monitor, pid))
			_, err = tx.ExecContext(ctx, `SELECT 1`) // the handler meets the lost connection, and ignores it
			require.Error(t, err)
		}
		w.WriteHeader(http.StatusCreated)
	}, server.Hooks{})
	r := mustPay(t, srv, "k-lost")
	assert.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.Equal(t, 0, k.rows(t))
	r = mustPay(t, srv, "k-lost")
	assert.Equal(t, http.StatusCreated, r.status, r.body)
	assert.Equal(t, 1, k.rows(t))
}

// CheckMode refuses Leased routes, and a *sql.DB on a driver other than
// pgx's, when the route is mounted; it accepts one on a pgx pool
// (stdlib.OpenDBFromPool), which serves.
func TestSQLStoreCheckMode(t *testing.T) {
	k := newSQLKit(t)
	assert.NoError(t, k.store.CheckMode(server.Transactional))
	assert.ErrorContains(t, k.store.CheckMode(server.Leased), "Transactional routes only")
	fromPool := server.NewPostgresSQLStore(stdlib.OpenDBFromPool(pgtest.NewPool(t, k.url)))
	assert.NoError(t, fromPool.CheckMode(server.Transactional), "a *sql.DB on a pgx pool")
	onPool := &sqlKit{db: k.db, store: fromPool, url: k.url}
	srv := onPool.serve(t, ledgerHandler, server.Hooks{})
	assert.Equal(t, http.StatusCreated, mustPay(t, srv, "k-pool").status)
	assert.Equal(t, "true", mustPay(t, srv, "k-pool").header.Get("Idempotent-Replayed"))
	assert.Equal(t, 1, k.rows(t))
	other := server.NewPostgresSQLStore(sql.OpenDB(otherConnector{}))
	assert.ErrorContains(t, other.CheckMode(server.Transactional), "pgx's stdlib driver")
	assert.Panics(t, func() { server.Middleware(other, server.Config{}) })
}

// otherConnector is a database/sql driver that is not pgx's.
type otherConnector struct{}

func (otherConnector) Connect(context.Context) (driver.Conn, error) { return nil, errors.New("no") }
func (otherConnector) Driver() driver.Driver                        { return otherDriver{} }

type otherDriver struct{}

func (otherDriver) Open(string) (driver.Conn, error) { return nil, errors.New("no") }
