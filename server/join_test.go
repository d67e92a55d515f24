package server_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

// appTx is a transaction that a handler began itself, as its repository
// would: on a pgx pool or a *sql.DB.
type appTx struct {
	insert   func(ctx context.Context, key string) (int64, error)
	storeIn  func(ctx context.Context) error
	commit   func(ctx context.Context) error
	rollback func(ctx context.Context)
}

func beginPgx(ctx context.Context, pool *pgxpool.Pool) (appTx, error) {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return appTx{}, err
	}
	return appTx{
		insert: func(ctx context.Context, key string) (id int64, err error) {
			err = tx.QueryRow(ctx, `INSERT INTO payments (key) VALUES ($1) RETURNING id`, key).Scan(&id)
			return id, err
		},
		storeIn:  func(ctx context.Context) error { return server.StoreInTx(ctx, tx) },
		commit:   tx.Commit,
		rollback: func(ctx context.Context) { _ = tx.Rollback(ctx) },
	}, nil
}

func beginSQL(ctx context.Context, db *sql.DB) (appTx, error) {
	tx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return appTx{}, err
	}
	return appTx{
		insert: func(ctx context.Context, key string) (id int64, err error) {
			err = tx.QueryRowContext(ctx, `INSERT INTO payments (key) VALUES ($1) RETURNING id`, key).Scan(&id)
			return id, err
		},
		storeIn:  func(ctx context.Context) error { return server.StoreInSQLTx(ctx, tx) },
		commit:   func(context.Context) error { return tx.Commit() },
		rollback: func(context.Context) { _ = tx.Rollback() },
	}, nil
}

// joinKit is a middleware's store and the app's own database, on one
// schema, in one of the variants.
type joinKit struct {
	store server.Store
	pool  *pgxpool.Pool
	db    *sql.DB
	begin func(ctx context.Context) (appTx, error)
	runs  atomic.Int64

	url      string
	variant  func(k *joinKit)                                 // sets store and begin on k's pool and db
	claimPID func(ctx context.Context) (int, error)           // the backend of the claim's own transaction
	after    func(ctx context.Context, w http.ResponseWriter) // runs after the app's commit, when set
}

// node is a second node: the same variant on a pool and a *sql.DB of its
// own, counting its runs into k's.
func (k *joinKit) node(t *testing.T) *joinKit {
	n := &joinKit{url: k.url, pool: pgtest.NewPool(t, k.url+"&pool_max_conns=10"), db: openSQL(t, k.url, "idem_join", 10)}
	k.variant(n)
	return n
}

// joinVariants are the stores and the app's transactions StoreInTx serves.
var joinVariants = []struct {
	name string
	kit  func(k *joinKit, clock func() time.Duration)
}{
	{"PostgresStore, the app's pgx.Tx", func(k *joinKit, clock func() time.Duration) {
		s := server.NewPostgresStore(k.pool)
		server.SetClockOffset(s, clock)
		k.store = s
		k.begin = func(ctx context.Context) (appTx, error) { return beginPgx(ctx, k.pool) }
		k.claimPID = func(ctx context.Context) (int, error) {
			tx, _ := server.Tx(ctx)
			return int(tx.Conn().PgConn().PID()), nil
		}
	}},
	{"PostgresStore, the app's *sql.Tx", func(k *joinKit, clock func() time.Duration) {
		s := server.NewPostgresStore(k.pool)
		server.SetClockOffset(s, clock)
		k.store = s
		k.begin = func(ctx context.Context) (appTx, error) { return beginSQL(ctx, k.db) }
		k.claimPID = func(ctx context.Context) (int, error) {
			tx, _ := server.Tx(ctx)
			return int(tx.Conn().PgConn().PID()), nil
		}
	}},
	{"PostgresSQLStore, the app's *sql.Tx", func(k *joinKit, clock func() time.Duration) {
		s := server.NewPostgresSQLStore(k.db)
		server.SetSQLClockOffset(s, clock)
		k.store = s
		k.begin = func(ctx context.Context) (appTx, error) { return beginSQL(ctx, k.db) }
		k.claimPID = func(ctx context.Context) (pid int, err error) {
			tx, _ := server.SQLTx(ctx)
			err = tx.QueryRowContext(ctx, `SELECT pg_backend_pid()`).Scan(&pid)
			return pid, err
		}
	}},
}

// eachJoin runs f on a fresh joinKit of each variant.
func eachJoin(t *testing.T, f func(t *testing.T, k *joinKit, advance func(time.Duration))) {
	for _, v := range joinVariants {
		t.Run(v.name, func(t *testing.T) {
			t.Parallel()
			url := pgtest.SchemaURL(t)
			k := &joinKit{url: url, pool: pgtest.NewPool(t, url+"&pool_max_conns=10"), db: openSQL(t, url, "idem_join", 10)}
			k.variant = func(k *joinKit) { v.kit(k, func() time.Duration { return 0 }) }
			ctx := context.Background()
			require.NoError(t, server.Migrate(ctx, k.pool))
			_, err := k.pool.Exec(ctx, `CREATE TABLE payments (id bigserial PRIMARY KEY, key text NOT NULL)`)
			require.NoError(t, err)
			var off atomic.Int64
			v.kit(k, func() time.Duration { return time.Duration(off.Load()) })
			f(t, k, func(d time.Duration) { off.Add(int64(d)) })
		})
	}
}

// ServeHTTP is a handler whose repository begins its own transaction:
// it inserts a payment, writes the response, stores it in the transaction
// and commits, or fails as X-Fail says ("rollback": after StoreInTx,
// "panic": before the commit).
func (k *joinKit) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	k.runs.Add(1)
	ctx := r.Context()
	tx, err := k.begin(ctx)
	if err != nil { // no connection (the database's max_connections, with other tests running)
		w.Header().Set("Retry-After", "1")
		http.Error(w, err.Error(), http.StatusServiceUnavailable)
		return
	}
	defer tx.rollback(ctx)
	id, err := tx.insert(ctx, r.Header.Get("Idempotency-Key"))
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Add("X-Trace", "first")
	w.Header().Add("X-Trace", "second")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":%d,  "status":"paid"}`, id)
	if err := tx.storeIn(ctx); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	switch r.Header.Get("X-Fail") {
	case "rollback":
		return
	case "panic":
		panic("the handler panics before its commit")
	}
	if err := tx.commit(ctx); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
	}
	if k.after != nil {
		k.after(ctx, w)
	}
	_, _ = w.Write([]byte("written after the commit, never sent"))
}

// rows counts the payments of key.
func (k *joinKit) rows(t *testing.T, key string) int {
	t.Helper()
	var n int
	require.NoError(t, k.pool.QueryRow(context.Background(), `SELECT count(*) FROM payments WHERE key = $1`, key).Scan(&n))
	return n
}

func (k *joinKit) serve(t *testing.T) *httptest.Server {
	t.Helper()
	mux := http.NewServeMux()
	mw := server.Middleware(k.store, server.Config{Logger: slog.New(slog.DiscardHandler), ReplayHeaders: []string{"X-Trace"}})
	mux.Handle("POST /v1/payments", mw(k))
	srv := httptest.NewUnstartedServer(mux)
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // a handler panics on purpose
	srv.Start()
	t.Cleanup(srv.Close)
	return srv
}

func payWith(t *testing.T, srv *httptest.Server, key, fail string) (sqlReply, error) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL+"/v1/payments", strings.NewReader(`{"amount":1}`))
	require.NoError(t, err)
	req.Header.Set("Idempotency-Key", key)
	if fail != "" {
		req.Header.Set("X-Fail", fail)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		return sqlReply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return sqlReply{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

// The same key twice makes one row, and the retry replays the first
// response byte for byte: what the handler wrote after StoreInTx is not
// sent. Both say where the operation stands.
func TestStoreInTxSameKeyTwice(t *testing.T) {
	eachJoin(t, func(t *testing.T, k *joinKit, _ func(time.Duration)) {
		srv := k.serve(t)
		first, err := payWith(t, srv, "k-join", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, first.status, first.body)
		assert.NotContains(t, first.body, "never sent")
		again, err := payWith(t, srv, "k-join", "")
		require.NoError(t, err)
		assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.status, again.status)
		assert.Equal(t, first.body, again.body, "the replay is byte for byte")
		assert.Equal(t, first.header.Values("X-Trace"), again.header.Values("X-Trace"))
		assert.Equal(t, "completed", first.header.Get("Idempotency-Operation-State"), "the first answer says where the operation stands")
		assert.NotEmpty(t, first.header.Get("Idempotency-Key-Expires"))
		assert.Equal(t, again.header.Get("Idempotency-Operation-Ref"), first.header.Get("Idempotency-Operation-Ref"))
		assert.Equal(t, 1, k.rows(t, "k-join"))
		assert.EqualValues(t, 1, k.runs.Load())
	})
}

// 8 concurrent duplicates make one row; every 201 is the same response.
func TestStoreInTxConcurrentDuplicates(t *testing.T) {
	eachJoin(t, func(t *testing.T, k *joinKit, _ func(time.Duration)) {
		srv := k.serve(t)
		replies := make([]sqlReply, 8)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Go(func() {
				r, err := payWith(t, srv, "k-dup", "")
				assert.NoError(t, err)
				replies[i] = r
			})
		}
		wg.Wait()
		created := ""
		for _, r := range replies {
			if r.status == http.StatusCreated {
				if created == "" {
					created = r.body
				}
				assert.Equal(t, created, r.body)
			} else {
				assert.Equal(t, http.StatusConflict, r.status, r.body)
			}
		}
		assert.Equal(t, 1, k.rows(t, "k-dup"))
		assert.EqualValues(t, 1, k.runs.Load())
	})
}

// An app's transaction that does not commit after StoreInTx (rolled back,
// or a panic) leaves nothing, the request gets no 201, and the retry runs.
func TestStoreInTxWithoutCommit(t *testing.T) {
	for _, fail := range []string{"rollback", "panic"} {
		t.Run(fail, func(t *testing.T) {
			eachJoin(t, func(t *testing.T, k *joinKit, _ func(time.Duration)) {
				srv := k.serve(t)
				r, err := payWith(t, srv, "k-"+fail, fail)
				if fail == "panic" {
					assert.Error(t, err, "net/http drops the connection of a handler that panicked")
				} else {
					require.NoError(t, err)
					assert.Equal(t, http.StatusInternalServerError, r.status, r.body)
					assert.Contains(t, r.body, "commit-failed")
				}
				assert.Equal(t, 0, k.rows(t, "k-"+fail))
				r, err = payWith(t, srv, "k-"+fail, "")
				require.NoError(t, err)
				assert.Equal(t, http.StatusCreated, r.status, r.body)
				assert.Empty(t, r.header.Get("Idempotent-Replayed"))
				assert.Equal(t, 1, k.rows(t, "k-"+fail))
			})
		})
	}
}

// A key whose record expired (retention passed, not swept yet) is claimed
// afresh, and the app's transaction replaces the record.
func TestStoreInTxReclaimsAnExpiredRecord(t *testing.T) {
	eachJoin(t, func(t *testing.T, k *joinKit, advance func(time.Duration)) {
		srv := k.serve(t)
		r, err := payWith(t, srv, "k-old", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, r.status, r.body)
		advance(48 * time.Hour)
		again, err := payWith(t, srv, "k-old", "")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, again.status, again.body)
		assert.Empty(t, again.header.Get("Idempotent-Replayed"), "the expired record does not answer")
		assert.NotEqual(t, r.body, again.body)
		third, err := payWith(t, srv, "k-old", "")
		require.NoError(t, err)
		assert.Equal(t, again.body, third.body, "the new record answers")
		assert.Equal(t, 2, k.rows(t, "k-old"))
	})
}

// 100 duplicates of one key, half on each of two nodes, at once: one row,
// one response, every other answer a retry later.
func TestStoreInTxRaceOnTwoNodes(t *testing.T) {
	eachJoin(t, func(t *testing.T, k *joinKit, _ func(time.Duration)) {
		other := k.node(t)
		srvs := []*httptest.Server{k.serve(t), other.serve(t)}
		replies := make([]sqlReply, 100)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Go(func() {
				r, err := payWith(t, srvs[i%2], "k-race", "")
				assert.NoError(t, err)
				replies[i] = r
			})
		}
		wg.Wait()
		created := ""
		for _, r := range replies {
			switch r.status {
			case http.StatusCreated:
				if created == "" {
					created = r.body
				}
				assert.Equal(t, created, r.body)
			case http.StatusConflict, http.StatusServiceUnavailable:
				assert.NotEmpty(t, r.header.Get("Retry-After"))
			default:
				t.Errorf("a duplicate got %d %s", r.status, r.body)
			}
		}
		assert.NotEmpty(t, created)
		assert.Equal(t, 1, k.rows(t, "k-race"))
		assert.EqualValues(t, 1, k.runs.Load()+other.runs.Load(), "handler runs")
	})
}

// The claim's connection lost after the app's commit: the middleware
// cannot end its claim, answers 503 commit-failed with Retry-After, and
// the retry replays what the app committed.
func TestStoreInTxClaimConnectionLost(t *testing.T) {
	eachJoin(t, func(t *testing.T, k *joinKit, _ func(time.Duration)) {
		monitor := pgtest.NewPool(t, pgtest.DatabaseURL(t))
		k.after = func(ctx context.Context, _ http.ResponseWriter) {
			pid, err := k.claimPID(ctx)
			if assert.NoError(t, err) {
				assert.NoError(t, terminate(ctx, monitor, pid))
			}
		}
		srv := k.serve(t)
		r, err := payWith(t, srv, "k-lost", "")
		require.NoError(t, err)
		assert.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
		assert.Equal(t, "1", r.header.Get("Retry-After"))
		k.after = nil
		again, err := payWith(t, srv, "k-lost", "")
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, again.status, again.body)
		assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		assert.Equal(t, 1, k.rows(t, "k-lost"))
	})
}

// StoreInTx refuses outside a Transactional claim.
func TestStoreInTxOutsideTheMiddleware(t *testing.T) {
	assert.Error(t, server.StoreInTx(context.Background(), nil))
	assert.Error(t, server.StoreInSQLTx(context.Background(), nil))
}
