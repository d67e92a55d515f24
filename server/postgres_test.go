package server

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
)

func TestConcurrentDuplicatesOverTwoNodes(t *testing.T) {
	url, app := appURL(t, pgtest.SchemaURL(t))
	url += "&pool_max_conns=12"
	nodeA := postgresKitOn(t, pgtest.NewPool(t, url))
	nodeB := postgresKitOn(t, pgtest.NewPool(t, url)) // a second pool: a second server node
	nodeA.watch(t, app)
	g := newGate(t, nodeA)
	srvA := gateServer(t, nodeA, g, 10*time.Second)
	srvB := gateServer(t, nodeB, g, time.Millisecond) // an impatient node: 409s, and 503s when its pool is busy

	const n = 200
	replies := make([]reply, n)
	var wg sync.WaitGroup
	for i := range n {
		srv := srvA
		if i%2 == 1 {
			srv = srvB
		}
		wg.Go(func() { replies[i] = post(t, srv, "/v1/payments", "k-storm", `{"amount": 10}`) })
	}
	recv(t, g.entered)
	nodeA.waitForWaiters(t, 8) // duplicates queue on the scope's lock behind the open transaction
	g.open()
	wg.Wait()

	fresh, replayed, later := tally(t, replies, func(i int) bool { return i%2 == 1 })
	t.Logf("%d fresh, %d replayed, %d told to retry later", fresh, replayed, later)
	assert.Equal(t, 1, fresh, "exactly one execution answers")
	assert.Equal(t, n, fresh+replayed+later)
	assert.EqualValues(t, 1, g.runs.Load(), "handler runs")
	assert.Equal(t, 1, nodeA.count(t, "pay"), "mutations")
}

// tally counts the replies of a storm on one key: the first execution's
// 201, its replays, and the answers that tell the client to retry later:
// 409 key-in-flight, or 503 store-unavailable for the requests that
// poolBound says had their wait for a pool connection bounded below the
// storm's length. Anything else fails the test.
func tally(t *testing.T, replies []reply, poolBound func(i int) bool) (fresh, replayed, later int) {
	t.Helper()
	for i, r := range replies {
		switch {
		case r.err != nil:
			t.Errorf("request %d: %v", i, r.err)
		case r.status == http.StatusCreated && !r.replayed():
			fresh++
			assert.Equal(t, "run 1", r.body)
		case r.status == http.StatusCreated:
			replayed++
			assert.Equal(t, "run 1", r.body, "request %d replayed another body", i)
		case r.status == http.StatusConflict:
			later++
			assert.GreaterOrEqual(t, retryAfter(t, r), 1, "request %d Retry-After", i)
			assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, r))
		case r.status == http.StatusServiceUnavailable && poolBound(i):
			later++
			assert.Equal(t, 1, retryAfter(t, r), "request %d Retry-After", i)
			assert.Equal(t, problemStoreUnavailable, problemName(t, r))
		default:
			t.Errorf("request %d: status %d %q, want 201 or 409", i, r.status, r.body)
		}
	}
	return fresh, replayed, later
}

// ledger is a table whose unique constraint is checked at commit.
func ledger(t *testing.T, k *kit) {
	t.Helper()
	_, err := k.pool.Exec(context.Background(), `CREATE TABLE ledger (n int UNIQUE DEFERRABLE INITIALLY DEFERRED)`)
	require.NoError(t, err)
}

func TestCommitFailureNeverSendsTheHandlersResponse(t *testing.T) {
	cases := map[string]func(ctx context.Context, tx pgx.Tx) error{
		"deferred constraint": func(ctx context.Context, tx pgx.Tx) error {
			_, err := tx.Exec(ctx, `INSERT INTO ledger VALUES (1), (1)`)
			return err
		},
		"swallowed error": func(ctx context.Context, tx pgx.Tx) error {
			_, _ = tx.Exec(ctx, `SELECT 1/0`) // aborts the transaction; the handler ignores it
			return nil
		},
	}
	for name, mutate := range cases {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			k := postgresKit(t)
			ledger(t, k)
			var runs atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				runs.Add(1)
				tx, _ := Tx(r.Context())
				_ = k.effect(r.Context(), "pay")
				if err := mutate(r.Context(), tx); err != nil {
					http.Error(w, err.Error(), http.StatusInternalServerError)
					return
				}
				w.WriteHeader(http.StatusCreated)
			})
			mux := http.NewServeMux()
			mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
			srv := serve(t, mux)
			for i := range 2 {
				r := post(t, srv, "/v1/payments", "k-commit", "{}")
				assert.Equal(t, http.StatusInternalServerError, r.status, "try %d: %s", i, r.body)
				assert.Equal(t, problemCommitFailed, problemName(t, r))
				assert.Empty(t, r.header.Get("Retry-After"), "the store refused the commit: no outage to wait out")
			}
			assert.EqualValues(t, 2, runs.Load(), "nothing was stored: the retry runs again")
			assert.Equal(t, 0, k.count(t, "pay"), "nothing committed")
		})
	}
}

func TestBackendKilledBeforeCommit(t *testing.T) {
	k := postgresKit(t)
	var runs atomic.Int64
	var pid atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs.Add(1)
		tx, _ := Tx(r.Context())
		var p int32
		if err := tx.QueryRow(r.Context(), `SELECT pg_backend_pid()`).Scan(&p); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		pid.Store(p)
		_ = k.effect(r.Context(), "pay")
		w.WriteHeader(http.StatusCreated)
	})
	kill := func(ctx context.Context, e Event) {
		if runs.Load() == 1 { // the first run's connection dies between handler and commit
			_, err := k.pool.Exec(ctx, `SELECT pg_terminate_backend($1)`, pid.Load())
			assert.NoError(t, err)
		}
	}
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{Hooks: Hooks{Handled: kill}}))(h))
	srv := serve(t, mux)
	first := post(t, srv, "/v1/payments", "k-kill", "{}")
	// The store was lost at the commit, as in a failover: 503 with
	// Retry-After, still commit-failed (the outcome is unknown).
	assert.Equal(t, http.StatusServiceUnavailable, first.status, "never the uncommitted 201: %s", first.body)
	assert.Equal(t, problemCommitFailed, problemName(t, first))
	assert.Equal(t, "1", first.header.Get("Retry-After"))
	assert.Equal(t, 0, k.count(t, "pay"))
	retry := post(t, srv, "/v1/payments", "k-kill", "{}")
	assert.Equal(t, http.StatusCreated, retry.status)
	assert.False(t, retry.replayed())
	assert.Equal(t, 1, k.count(t, "pay"))
}

func TestHandlerTxBelongsToTheMiddleware(t *testing.T) {
	k := postgresKit(t)
	kept := make(chan [2]pgx.Tx, 1) // the Tx and an open savepoint
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := r.Context()
		tx, ok := Tx(ctx)
		if !assert.True(t, ok) {
			return
		}
		assert.NotNil(t, tx.Conn(), "Conn while the handler runs")
		assert.ErrorIs(t, tx.Commit(ctx), ErrTxManaged)
		assert.ErrorIs(t, tx.Rollback(ctx), ErrTxManaged)
		var timeout string
		assert.NoError(t, tx.QueryRow(ctx, `SHOW lock_timeout`).Scan(&timeout))
		assert.Equal(t, "0", timeout, "the claim's lock_timeout does not leak into the handler")
		nested, err := tx.Begin(ctx) // a savepoint
		if assert.NoError(t, err) {
			_, err = nested.Exec(ctx, `INSERT INTO effects (label) VALUES ('undone')`)
			assert.NoError(t, err)
			assert.NoError(t, nested.Rollback(ctx))
		}
		released, err := tx.Begin(ctx)
		if assert.NoError(t, err) {
			_, err = released.Exec(ctx, `INSERT INTO effects (label) VALUES ('released')`)
			assert.NoError(t, err)
			assert.NoError(t, released.Commit(ctx), "a savepoint is the handler's to release")
		}
		open, err := tx.Begin(ctx)
		assert.NoError(t, err)
		assert.NoError(t, k.effect(ctx, "pay"))
		kept <- [2]pgx.Tx{tx, open}
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-tx", "{}").status)
	assert.Equal(t, 1, k.count(t, "pay"))
	assert.Equal(t, 0, k.count(t, "undone"), "the savepoint rolled back")
	assert.Equal(t, 1, k.count(t, "released"), "the released savepoint committed with the transaction")

	txs, ctx := recv(t, kept), context.Background()
	for i, tx := range txs {
		_, err := tx.Exec(ctx, `SELECT 1`)
		assert.ErrorIs(t, err, pgx.ErrTxClosed, "%d: a kept Tx cannot reach a pooled connection", i)
		assert.ErrorIs(t, tx.QueryRow(ctx, `SELECT 1`).Scan(new(int)), pgx.ErrTxClosed, i)
		assert.ErrorIs(t, tx.SendBatch(ctx, &pgx.Batch{}).Close(), pgx.ErrTxClosed, i)
		assert.ErrorIs(t, tx.Commit(ctx), pgx.ErrTxClosed, i)
		_, err = tx.Begin(ctx)
		assert.ErrorIs(t, err, pgx.ErrTxClosed, i)
		assert.Nil(t, tx.Conn(), "%d: Conn of a kept Tx", i)
		assert.Equal(t, pgx.LargeObjects{}, tx.LargeObjects(), "%d: LargeObjects of a kept Tx", i)
	}
}

func TestTxIsAbsentWithoutPostgres(t *testing.T) {
	_, ok := Tx(context.Background())
	assert.False(t, ok, "outside the middleware")
	k := memoryKit(t)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, ok := Tx(r.Context())
		_, leased := LeaseFrom(r.Context())
		assert.False(t, ok, "the memory store has no transaction")
		assert.False(t, leased, "a Transactional route has no lease")
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	assert.Equal(t, http.StatusCreated, post(t, serve(t, mux), "/v1/payments", "k", "{}").status)
}

func TestRecordOfAnotherFingerprintAlgorithmIsAccepted(t *testing.T) {
	k := postgresKit(t)
	mux, p := payServer(t, k, Config{})
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-alg", `{"amount": 1}`).status)
	_, err := k.pool.Exec(context.Background(), `UPDATE idem_records SET fp_alg = 'sha3-v9', fingerprint = '\x00'`)
	require.NoError(t, err)
	r := post(t, srv, "/v1/payments", "k-alg", ` {"amount":1}`)
	assert.True(t, r.replayed(), "a digest of an unknown algorithm never turns a retry into 422: %d %s", r.status, r.body)
	assert.EqualValues(t, 1, p.runs.Load())
}

// A record stored by an older node (sha256-v1) is compared with v1: an
// honest retry replays, another body is still refused.
func TestRecordOfFingerprintV1IsComparedWithV1(t *testing.T) {
	k := postgresKit(t)
	mux, p := payServer(t, k, Config{})
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-v1", `{"amount": 1}`).status)
	v1 := sumWith(t, fingerprint.AlgV1, &fingerprint.Input{Method: "POST", Route: "POST /v1/payments", Body: []byte(`{"amount": 1}`)})
	_, err := k.pool.Exec(context.Background(), `UPDATE idem_records SET fp_alg = $1, fingerprint = $2`, fingerprint.AlgV1, v1)
	require.NoError(t, err)
	r := post(t, srv, "/v1/payments", "k-v1", ` {"amount":1}`)
	assert.True(t, r.replayed(), "an honest retry of a v1 record replays: %d %s", r.status, r.body)
	other := post(t, srv, "/v1/payments", "k-v1", `{"amount": 2}`)
	assert.Equal(t, http.StatusUnprocessableEntity, other.status, "v1 is known: another body is refused")
	assert.EqualValues(t, 1, p.runs.Load())
}

func TestStoreUnavailable(t *testing.T) {
	k := postgresKit(t)
	mux, p := payServer(t, k, Config{})
	srv := serve(t, mux)
	k.pool.Close()
	r := post(t, srv, "/v1/payments", "k-down", `{"amount": 1}`)
	assert.Equal(t, http.StatusServiceUnavailable, r.status)
	assert.Equal(t, problemStoreUnavailable, problemName(t, r))
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.EqualValues(t, 0, p.runs.Load(), "nothing runs without a claim")
}

// The wait bound covers the wait for a pool connection: with both
// connections held (the first request, and a duplicate waiting for its
// lock), a duplicate gets 409 and a request of another key gets 503 within
// the bound, instead of queueing for a connection until the first ends.
func TestWaitForAPoolConnectionIsBounded(t *testing.T) {
	url, app := appURL(t, pgtest.SchemaURL(t))
	k := postgresKitOn(t, pgtest.NewPool(t, url+"&pool_max_conns=2"))
	k.watch(t, app)
	g := newGate(t, k)
	patient := gateServer(t, k, g, time.Minute)
	refused := make(chan Event, 2)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{WaitBound: 100 * time.Millisecond,
		Hooks: Hooks{Refused: func(_ context.Context, e Event) { refused <- e }}}))(g))
	hasty := serve(t, mux)
	async := func(srv *httptest.Server, key string) <-chan reply {
		ch := make(chan reply, 1)
		go func() { ch <- post(t, srv, "/v1/payments", key, "{}") }()
		return ch
	}
	first := async(patient, "k-pool")
	recv(t, g.entered)
	waiter := async(patient, "k-pool")
	k.waitForWaiters(t, 1) // the pool's two connections are taken

	dup := recv(t, async(hasty, "k-pool"))
	assert.Equal(t, http.StatusConflict, dup.status, dup.body)
	assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, dup))
	assert.True(t, recv(t, refused).Waited, "the duplicate waited its bound for a connection the running attempt holds")
	other := recv(t, async(hasty, "k-pool-other"))
	assert.Equal(t, http.StatusServiceUnavailable, other.status, other.body)
	assert.Equal(t, problemStoreUnavailable, problemName(t, other))
	assert.Equal(t, "1", other.header.Get("Retry-After"))

	g.open()
	assert.Equal(t, http.StatusCreated, recv(t, first).status)
	assert.True(t, recv(t, waiter).replayed(), "the duplicate that held a connection waited and replays")
	assert.EqualValues(t, 1, g.runs.Load(), "handler runs")
}

func TestMigrateIsIdempotentAndConcurrent(t *testing.T) {
	pool := pgtest.Pool(t)
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = Migrate(context.Background(), pool) })
	}
	wg.Wait()
	require.NoError(t, errors.Join(errs...))
	require.NoError(t, Migrate(context.Background(), pool))
	assert.Contains(t, Schema(), "CREATE TABLE IF NOT EXISTS idem_records")
}

// Migrate on an up-to-date table takes no lock on it, so that a node
// starting while others serve neither waits for their requests nor holds
// new ones: with a transaction that read and wrote the table still open
// (as a claim does), Migrate ends at once. Before, its no-op CREATE INDEX
// and ALTER TABLE waited for that transaction, and deadlocked against one
// that read the table and then wrote it.
func TestMigrateLocksNoTableThatIsUpToDate(t *testing.T) {
	url, _ := appURL(t, pgtest.SchemaURL(t))
	pool := pgtest.NewPool(t, url)
	ctx := context.Background()
	require.NoError(t, Migrate(ctx, pool))
	tx, err := pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	_, err = tx.Exec(ctx, `SELECT count(*) FROM idem_records`)
	require.NoError(t, err)
	_, err = tx.Exec(ctx, `INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key, fp_alg,
		fingerprint, state, token, attempt, created_at, expires_at)
		VALUES ('\x00', '', '', 'POST /v1/payments', 'k-open', 'sha256-v2', '\x00', 'running',
		gen_random_uuid(), 1, now(), now() + interval '1 hour')`)
	require.NoError(t, err)

	// lock_timeout turns a wait for the open transaction into an error
	// (55P03) instead of a hang: Migrate returning nil is the check.
	other := pgtest.NewPool(t, url+"&lock_timeout=5s")
	require.NoError(t, Migrate(ctx, other))
}

func TestHandlerKeepsTheSessionLockTimeout(t *testing.T) {
	url, app := appURL(t, pgtest.SchemaURL(t))
	k := postgresKitOn(t, pgtest.NewPool(t, url+"&lock_timeout=7s"))
	k.watch(t, app)
	seen := make(chan string, 4)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, _ := Tx(r.Context())
		var timeout string
		if err := tx.QueryRow(r.Context(), `SHOW lock_timeout`).Scan(&timeout); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		seen <- timeout
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{Retention: time.Hour, WaitBound: 250 * time.Millisecond}))(h))
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-lt", "{}").status)
	assert.Equal(t, "7s", recv(t, seen), "after a first claim")
	k.clock.Advance(2 * time.Hour)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-lt", "{}").status)
	assert.Equal(t, "7s", recv(t, seen), "after a reclaim of an expired record")
}

// A Leased claim's wait for a pool connection is bounded as a
// Transactional one's is: with the pool's only connection taken, the
// request gets 503 store-unavailable, and runs nothing, instead of queueing
// until the connection comes back. (The held connection goes back after a
// minute at the latest, so that a wait that is not bounded ends, answered
// 201, and fails the test instead of hanging it.)
func TestLeasedWaitForAPoolConnectionIsBounded(t *testing.T) {
	url, _ := appURL(t, pgtest.SchemaURL(t))
	k := postgresKitOn(t, pgtest.NewPool(t, url+"&pool_max_conns=1"))
	mux, p := payServer(t, k, Config{Mode: Leased, WaitBound: 100 * time.Millisecond})
	srv := serve(t, mux)
	held, err := k.pool.Acquire(context.Background())
	require.NoError(t, err)
	var once sync.Once
	release := func() { once.Do(held.Release) }
	defer time.AfterFunc(time.Minute, release).Stop()

	r := post(t, srv, "/v1/payments", "k-leased-pool", `{"amount": 1}`)
	release()
	assert.Equal(t, http.StatusServiceUnavailable, r.status, r.body)
	assert.Equal(t, problemStoreUnavailable, problemName(t, r))
	assert.Equal(t, "1", r.header.Get("Retry-After"))
	assert.EqualValues(t, 0, p.runs.Load(), "nothing runs without a claim")

	r = post(t, srv, "/v1/payments", "k-leased-pool", `{"amount": 1}`)
	assert.Equal(t, http.StatusCreated, r.status, r.body)
	assert.EqualValues(t, 1, p.runs.Load())
}

// A table made by a version that stored headers as jsonb and fingerprints
// as sha256-v1 (testdata/schema-jsonb-headers.sql): Migrate converts the
// column in place, the old record still replays with its headers, and new
// requests are stored in the new form.
func TestMigrateConvertsATableOfAnOlderVersion(t *testing.T) {
	url, _ := appURL(t, pgtest.SchemaURL(t))
	pool := pgtest.NewPool(t, url)
	ctx := context.Background()
	old, err := os.ReadFile("testdata/schema-jsonb-headers.sql")
	require.NoError(t, err)
	_, err = pool.Exec(ctx, string(old))
	require.NoError(t, err)
	scope := fingerprint.Scope("", "", "POST /v1/payments", "k-old")
	fp := sumWith(t, fingerprint.AlgV1, &fingerprint.Input{Method: "POST", Route: "POST /v1/payments", Body: []byte(`{"amount": 1}`)})
	_, err = pool.Exec(ctx, `INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key, fp_alg,
		fingerprint, state, token, attempt, created_at, expires_at, status, headers, body)
		VALUES ($1, '', '', 'POST /v1/payments', 'k-old', $2, $3, 'done', gen_random_uuid(), 1, now(),
		now() + interval '1 hour', 201, '{"X-Trace": ["a", "b"], "Content-Type": ["application/json"]}', '{"old":true}')`,
		scope[:], fingerprint.AlgV1, fp)
	require.NoError(t, err)

	k := postgresKitOn(t, pool) // runs Migrate
	require.NoError(t, Migrate(ctx, pool), "again: idempotent")
	var typ string
	require.NoError(t, pool.QueryRow(ctx, `SELECT data_type FROM information_schema.columns
		WHERE table_schema = current_schema() AND table_name = 'idem_records' AND column_name = 'headers'`).Scan(&typ))
	assert.Equal(t, "bytea", typ)

	mux, p := payServer(t, k, Config{})
	srv := serve(t, mux)
	r := post(t, srv, "/v1/payments", "k-old", ` {"amount":1}`)
	assert.True(t, r.replayed(), "the old record replays: %d %s", r.status, r.body)
	assert.Equal(t, http.StatusCreated, r.status)
	assert.Equal(t, `{"old":true}`, r.body)
	assert.Equal(t, []string{"a", "b"}, r.header.Values("X-Trace"))
	assert.EqualValues(t, 0, p.runs.Load())

	fresh := post(t, srv, "/v1/payments", "k-new", `{"amount": 1}`)
	require.Equal(t, http.StatusCreated, fresh.status, fresh.body)
	again := post(t, srv, "/v1/payments", "k-new", `{"amount": 1}`)
	assert.True(t, again.replayed())
	assert.Equal(t, fresh.body, again.body)
	assert.EqualValues(t, 1, p.runs.Load())
}

// Every transaction on a connection gets a Tx of its own over the
// connection (connTx): on a pool of one connection, each request's
// statements and savepoints (nested, released, rolled back to) work in its
// own transaction, a rolled-back request leaves nothing, and the next
// commits. LargeObjects is pgx's unusable zero value (pgx builds a usable
// one only for a Tx of its own).
func TestConnectionTxServesEveryTransaction(t *testing.T) {
	url, _ := appURL(t, pgtest.SchemaURL(t)+"&pool_max_conns=1")
	k := postgresKitOn(t, pgtest.NewPool(t, url))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx, label := r.Context(), r.Header.Get("Idempotency-Key")
		tx, _ := Tx(ctx)
		assert.Equal(t, pgx.LargeObjects{}, tx.LargeObjects())
		sp, err := tx.Begin(ctx)
		if !assert.NoError(t, err) {
			return
		}
		_, err = sp.Exec(ctx, `INSERT INTO effects (label) VALUES ($1)`, label)
		assert.NoError(t, err)
		inner, err := sp.Begin(ctx)
		if !assert.NoError(t, err) {
			return
		}
		_, err = inner.Exec(ctx, `INSERT INTO effects (label) VALUES ('rolled back to')`)
		assert.NoError(t, err)
		assert.NoError(t, inner.Rollback(ctx))
		assert.ErrorIs(t, inner.Rollback(ctx), pgx.ErrTxClosed, "a deferred Rollback after the end")
		_, err = inner.Exec(ctx, `SELECT 1`)
		assert.ErrorIs(t, err, pgx.ErrTxClosed, "a statement of an ended savepoint")
		assert.NoError(t, sp.Commit(ctx))
		_, err = tx.Exec(ctx, `INSERT INTO effects (label) VALUES ($1)`, label+"-tx")
		assert.NoError(t, err)
		if label == "k-fails" {
			w.WriteHeader(http.StatusServiceUnavailable) // rolls back
			return
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	srv := serve(t, mux)
	for _, c := range []struct {
		key    string
		status int
	}{{"k-first", http.StatusCreated}, {"k-fails", http.StatusServiceUnavailable}, {"k-third", http.StatusCreated}} {
		assert.Equal(t, c.status, post(t, srv, "/v1/payments", c.key, "{}").status, c.key)
	}
	for label, want := range map[string]int{"k-first": 1, "k-fails": 0, "k-third": 1} {
		assert.Equal(t, want, k.count(t, label), label)
		assert.Equal(t, want, k.count(t, label+"-tx"), label)
	}
	assert.Zero(t, k.count(t, "rolled back to"))
}

// A migration that changes what a prepared claim statement returns fails
// the next claim on each connection that prepared it (Postgres refuses the
// cached plan); that connection is closed, and the following claim
// prepares afresh on a new one.
func TestClaimAfterAMigrationChangedTheRecord(t *testing.T) {
	url, _ := appURL(t, pgtest.SchemaURL(t)+"&pool_max_conns=1")
	k := postgresKitOn(t, pgtest.NewPool(t, url))
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-before", "{}").status)
	_, err := k.pool.Exec(context.Background(), `ALTER TABLE idem_records ALTER COLUMN fp_alg TYPE varchar(64)`)
	require.NoError(t, err)
	first := post(t, srv, "/v1/payments", "k-after", "{}")
	assert.GreaterOrEqual(t, first.status, 500, "the stale statement fails: %s", first.body)
	for _, key := range []string{"k-after", "k-later"} {
		assert.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", key, "{}").status, key)
	}
	assert.True(t, post(t, srv, "/v1/payments", "k-before", "{}").replayed(), "records from before the migration replay")
}

// A handler that deallocates the connection's prepared statements fails
// its own commit (500), and the connection is closed: the next request
// prepares afresh on a new one.
func TestClaimAfterStatementsWereDeallocated(t *testing.T) {
	url, _ := appURL(t, pgtest.SchemaURL(t)+"&pool_max_conns=1")
	k := postgresKitOn(t, pgtest.NewPool(t, url))
	var discarded atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Idempotency-Key") == "k-discard" && !discarded.Swap(true) { // once
			tx, _ := Tx(r.Context())
			_, err := tx.Exec(r.Context(), `DEALLOCATE ALL`)
			assert.NoError(t, err)
		}
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	srv := serve(t, mux)
	require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", "k-first", "{}").status)
	failed := post(t, srv, "/v1/payments", "k-discard", "{}")
	assert.Equal(t, http.StatusInternalServerError, failed.status, failed.body)
	for _, key := range []string{"k-discard", "k-later"} {
		assert.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", key, "{}").status, key)
	}
}

// prepareCounter is a pgx tracer that counts the statements prepared.
type prepareCounter struct{ n atomic.Int64 }

func (c *prepareCounter) TraceQueryStart(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryStartData) context.Context {
	return ctx
}
func (c *prepareCounter) TraceQueryEnd(context.Context, *pgx.Conn, pgx.TraceQueryEndData) {}
func (c *prepareCounter) TracePrepareStart(ctx context.Context, _ *pgx.Conn, _ pgx.TracePrepareStartData) context.Context {
	c.n.Add(1)
	return ctx
}
func (c *prepareCounter) TracePrepareEnd(context.Context, *pgx.Conn, pgx.TracePrepareEndData) {}

// The store prepares its statements once per connection: a pool's
// PrepareTracer sees them the first time only, not on every request.
func TestStatementsPreparedOncePerConnection(t *testing.T) {
	cfg, err := pgxpool.ParseConfig(pgtest.SchemaURL(t) + "&pool_max_conns=1")
	require.NoError(t, err)
	var tracer prepareCounter
	cfg.ConnConfig.Tracer = &tracer
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	k := postgresKitOn(t, pool)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	srv := serve(t, mux)
	// The first transaction begins through pgx, the second prepares BEGIN.
	for _, key := range []string{"k-0", "k-1"} {
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", key, "{}").status)
	}
	prepared := tracer.n.Load()
	assert.NotZero(t, prepared, "the first requests prepare the statements")
	for i := 2; i <= 6; i++ {
		require.Equal(t, http.StatusCreated, post(t, srv, "/v1/payments", fmt.Sprintf("k-%d", i), "{}").status)
	}
	assert.Equal(t, prepared, tracer.n.Load(), "no statement prepared again")
}
