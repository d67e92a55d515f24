package mysqlidem

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/mysqlidem/internal/mysqltest"
	"github.com/idemkit/idem/server"
)

// newTestStore is a store on a database of its own with the table and an
// effects table, at most conns connections.
func newTestStore(t *testing.T, conns int) (*Store, string) {
	t.Helper()
	dsn := mysqltest.Database(t)
	s := New(mysqltest.Open(t, dsn, conns))
	require.NoError(t, Migrate(context.Background(), s.db))
	_, err := s.db.Exec(`CREATE TABLE effects (id BIGINT AUTO_INCREMENT PRIMARY KEY, label VARCHAR(64) NOT NULL) ENGINE=InnoDB`)
	require.NoError(t, err)
	return s, dsn
}

// postKey posts {} to url with the idempotency key.
func postKey(t *testing.T, url, key string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, url, strings.NewReader("{}"))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	return resp.StatusCode, string(b)
}

// effects counts the committed effects.
func effects(t *testing.T, db *sql.DB) int {
	t.Helper()
	var n int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM effects`).Scan(&n))
	return n
}

// TestWaitersOfARolledBackClaimAllComplete holds a first claim of a new
// key while three duplicates wait for its row, then rolls it back (a 503):
// InnoDB turns the waits into gap locks, and the waiters' inserts
// deadlock (1213). Each claim begins again within its wait bound, so every
// waiter gets the one run's 201 and none an error.
func TestWaitersOfARolledBackClaimAllComplete(t *testing.T) {
	s, _ := newTestStore(t, 16)
	var runs atomic.Int64
	entered, release := make(chan struct{}), make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := runs.Add(1)
		tx, ok := server.SQLTx(r.Context())
		require.True(t, ok)
		_, err := tx.ExecContext(r.Context(), `INSERT INTO effects (label) VALUES ('pay')`)
		require.NoError(t, err)
		if n == 1 {
			close(entered)
			<-release
			w.WriteHeader(http.StatusServiceUnavailable)
			return
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = io.WriteString(w, `{"ok":true}`)
	})
	cfg := server.Config{Mode: server.Transactional, WaitBound: time.Minute, Logger: slog.New(slog.DiscardHandler)}
	srv := httptest.NewServer(server.Middleware(s, cfg)(h))
	defer srv.Close()
	first := make(chan int)
	go func() { code, _ := postKey(t, srv.URL, "k"); first <- code }()
	<-entered
	const waiters = 3
	codes := make([]int, waiters)
	var wg sync.WaitGroup
	for i := range waiters {
		wg.Go(func() { codes[i], _ = postKey(t, srv.URL, "k") })
	}
	waiting(t, s, dbName(t, s), waiters)
	close(release)
	assert.Equal(t, http.StatusServiceUnavailable, <-first)
	wg.Wait()
	assert.Equal(t, []int{201, 201, 201}, codes, "every waiter gets the one run's answer")
	assert.EqualValues(t, 2, runs.Load(), "handler runs")
	assert.Equal(t, 1, effects(t, s.db), "effects committed")
}

// leasedClaim is a Leased claim of key.
func leasedClaim(key string) *server.Claim {
	return &server.Claim{Scope: fingerprint.Scope("t", "p", "POST /x", key), Tenant: "t", Principal: "p", Route: "POST /x", Key: key,
		Digest: []byte{1}, DigestAlg: "test", Mode: server.Leased, Lease: time.Minute, Retention: time.Hour,
		Wait: time.Second, Request: []byte("r")}
}

// TestFencedWriteThatChangesNothingKeepsTheLease writes the same recovery
// point twice and extends a lease to the same end: MySQL counts an UPDATE
// that changes no column as no affected row (without CLIENT_FOUND_ROWS),
// which must not read as a stale token.
func TestFencedWriteThatChangesNothingKeepsTheLease(t *testing.T) {
	s, _ := newTestStore(t, 4)
	ctx := context.Background()
	res, err := s.Claim(ctx, leasedClaim("k"))
	require.NoError(t, err)
	att := res.Attempt.(server.LeasedAttempt)
	require.NoError(t, att.Checkpoint(ctx, "charged", []byte(`{"id":1}`)))
	require.NoError(t, att.Checkpoint(ctx, "charged", []byte(`{"id":1}`)), "the same point again")
	require.NoError(t, att.Complete(ctx, &server.Response{Status: 201}))
	assert.ErrorIs(t, att.Checkpoint(ctx, "charged", nil), server.ErrLeaseLost, "a completed attempt is fenced off")
}

// TestMigrateFromSeveralNodesAtOnce runs Migrate from eight connections at
// once on a fresh database, then again on the table it made.
func TestMigrateFromSeveralNodesAtOnce(t *testing.T) {
	db := mysqltest.Open(t, mysqltest.Database(t), 16)
	var wg sync.WaitGroup
	errs := make([]error, 8)
	for i := range errs {
		wg.Go(func() { errs[i] = Migrate(context.Background(), db) })
	}
	wg.Wait()
	for _, err := range errs {
		assert.NoError(t, err)
	}
	require.NoError(t, Migrate(context.Background(), db), "again, on the table it made")
}

// TestHandlerEndingTheTransactionWithSQLIsCaught: a handler that sends
// COMMIT or ROLLBACK through its *sql.Tx leaves the session in autocommit;
// the record's write finds no transaction (@@in_transaction) and writes
// nothing, the request gets 500 commit-failed, the running row that a
// COMMIT made durable is deleted, and a retry runs again.
func TestHandlerEndingTheTransactionWithSQLIsCaught(t *testing.T) {
	for _, end := range []string{"COMMIT", "ROLLBACK"} {
		t.Run(end, func(t *testing.T) {
			s, _ := newTestStore(t, 4)
			var runs atomic.Int64
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tx, _ := server.SQLTx(r.Context())
				_, err := tx.ExecContext(r.Context(), `INSERT INTO effects (label) VALUES ('pay')`)
				require.NoError(t, err)
				if runs.Add(1) == 1 {
					_, err = tx.ExecContext(r.Context(), end)
					require.NoError(t, err)
				}
				w.WriteHeader(http.StatusCreated)
			})
			cfg := server.Config{Mode: server.Transactional, Logger: slog.New(slog.DiscardHandler)}
			srv := httptest.NewServer(server.Middleware(s, cfg)(h))
			defer srv.Close()
			code, body := postKey(t, srv.URL, "k")
			assert.Equal(t, http.StatusInternalServerError, code, body)
			assert.Contains(t, body, "commit-failed")
			var records int
			require.NoError(t, s.db.QueryRow(`SELECT COUNT(*) FROM idem_records`).Scan(&records))
			assert.Zero(t, records, "no record left")
			code, _ = postKey(t, srv.URL, "k")
			assert.Equal(t, http.StatusCreated, code)
			assert.EqualValues(t, 2, runs.Load(), "the retry runs the handler again")
		})
	}
}
