package mysqlidem

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/mysqlidem/internal/mysqltest"
	"github.com/idemkit/idem/server"
)

// benchAccounts spreads the balance updates so that row locks do not
// serialise the benchmark.
const benchAccounts = 1000

// benchDB is a database of its own with the store's table, accounts and
// payments, for BENCHMARKS §2's payment endpoint on MySQL.
func benchDB(b *testing.B) *sql.DB {
	db := mysqltest.Open(b, mysqltest.Database(b), 64)
	require.NoError(b, Migrate(context.Background(), db))
	for _, q := range []string{
		`CREATE TABLE accounts (id BIGINT PRIMARY KEY, balance BIGINT NOT NULL) ENGINE=InnoDB`,
		`CREATE TABLE payments (id BIGINT AUTO_INCREMENT PRIMARY KEY, account_id BIGINT NOT NULL, amount BIGINT NOT NULL) ENGINE=InnoDB`,
		`INSERT INTO accounts SELECT seq, 1000000000 FROM seq_1_to_1000`,
	} {
		if _, err := db.Exec(q); err != nil && strings.Contains(q, "seq_1_to") {
			for i := 1; i <= benchAccounts; i++ { // MySQL has no sequence engine
				_, err = db.Exec(`INSERT INTO accounts VALUES (?, 1000000000)`, i)
				require.NoError(b, err)
			}
		} else {
			require.NoError(b, err)
		}
	}
	return db
}

// pay is the payment endpoint: debit a balance, insert a payment row,
// answer 201 with the payment.
func benchPay(w http.ResponseWriter, r *http.Request, tx *sql.Tx) error {
	var req struct{ Account, Amount int64 }
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return nil
	}
	id, err := payStatements(r.Context(), tx, req.Account, req.Amount)
	if err != nil {
		return err
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, err = fmt.Fprintf(w, `{"id":%d,"account":%d,"amount":%d,"status":"paid"}`, id, req.Account, req.Amount)
	return err
}

// payStatements are the endpoint's two statements.
func payStatements(ctx context.Context, tx *sql.Tx, account, amount int64) (int64, error) {
	if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance = balance - ? WHERE id = ?`, amount, account); err != nil {
		return 0, err
	}
	res, err := tx.ExecContext(ctx, `INSERT INTO payments (account_id, amount) VALUES (?, ?)`, account, amount)
	if err != nil {
		return 0, err
	}
	return res.LastInsertId()
}

// BenchmarkPaymentMySQL runs BENCHMARKS §2's payment endpoint on the
// server of MYSQL_DSN, 8 requests in flight per CPU: over loopback HTTP
// without the middleware (plain: the handler in its own transaction) and
// behind it (idem: Transactional on Store), and the database alone, the
// same statements from Go without HTTP or idem (sql-plain: BEGIN, the
// two statements, COMMIT; sql-idem: BEGIN, the claim's insert and locking
// read, the two statements, the record's write, COMMIT).
func BenchmarkPaymentMySQL(b *testing.B) {
	db := benchDB(b)
	plain := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tx, err := db.BeginTx(r.Context(), nil)
		if err == nil {
			if err = benchPay(w, r, tx); err == nil {
				err = tx.Commit()
			}
			_ = tx.Rollback()
		}
		if err != nil {
			http.Error(w, err.Error(), http.StatusServiceUnavailable)
		}
	})
	idem := server.Middleware(New(db), server.Config{Mode: server.Transactional, Logger: slog.New(slog.DiscardHandler)})(
		http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			tx, _ := server.SQLTx(r.Context())
			if err := benchPay(w, r, tx); err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
			}
		}))
	b.Run("plain", func(b *testing.B) { benchHTTP(b, plain) })
	b.Run("idem", func(b *testing.B) { benchHTTP(b, idem) })
	b.Run("sql-plain", func(b *testing.B) { benchSQL(b, db, false) })
	b.Run("sql-idem", func(b *testing.B) { benchSQL(b, db, true) })
}

// benchHTTP posts payments with fresh keys to h over loopback HTTP.
func benchHTTP(b *testing.B, h http.Handler) {
	srv := httptest.NewServer(h)
	defer srv.Close()
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 256}}
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			body := fmt.Sprintf(`{"account":%d,"amount":1}`, rand.IntN(benchAccounts)+1)
			req, _ := http.NewRequest(http.MethodPost, srv.URL, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Idempotency-Key", uuid.NewString())
			resp, err := client.Do(req)
			if err != nil {
				b.Error(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			if resp.StatusCode != http.StatusCreated {
				b.Errorf("status %d", resp.StatusCode)
				return
			}
		}
	})
	reportRate(b)
}

// benchSQL sends the endpoint's transactions from Go: plain, or with the
// middleware's statements for a new key (withIdem).
func benchSQL(b *testing.B, db *sql.DB, withIdem bool) {
	s := New(db)
	ctx := context.Background()
	stored, _ := (&server.Response{Status: 201, Header: http.Header{"Content-Type": {"application/json"}},
		Body: []byte(`{"id":1234567,"account":123,"amount":1,"status":"paid"}`)}).MarshalBinary()
	b.SetParallelism(8)
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := sqlPayment(ctx, s, withIdem, stored); err != nil {
				b.Error(err)
				return
			}
		}
	})
	reportRate(b)
}

// sqlPayment is one payment transaction, as benchSQL sends it.
func sqlPayment(ctx context.Context, s *Store, withIdem bool, stored []byte) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback() //nolint:errcheck // after Commit it does nothing
	key := uuid.NewString()
	c := &server.Claim{Scope: sha256.Sum256([]byte(key)), Tenant: "", Principal: "", Route: "POST /v1/payments",
		Key: key, Digest: make([]byte, 32), DigestAlg: "sha256-v2", Mode: server.Transactional, Retention: 24 * time.Hour}
	token := uuid.New()
	if withIdem {
		if _, err := tx.ExecContext(ctx, "SET STATEMENT innodb_lock_wait_timeout=2 FOR "+sqlClaimTx, s.claimArgs(c, token)...); err != nil {
			return err
		}
		if _, err := s.read(ctx, tx, sqlReadLocked, c); err != nil {
			return err
		}
	}
	if _, err := payStatements(ctx, tx, int64(rand.IntN(benchAccounts)+1), 1); err != nil {
		return err
	}
	if withIdem {
		if _, err := tx.ExecContext(ctx, sqlCompleteTx, "done", 201, stored, c.Scope[:], token[:]); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// reportRate reports the benchmark's throughput.
func reportRate(b *testing.B) {
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "req/s")
}
