package orm_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	_ "github.com/jackc/pgx/v5/stdlib" // the "pgx" database/sql driver
	"github.com/jmoiron/sqlx"
	_ "github.com/lib/pq" // the "postgres" one, for an app's own transaction
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"github.com/uptrace/bun"
	"github.com/uptrace/bun/dialect/pgdialect"
	"gorm.io/driver/postgres"
	"gorm.io/gorm"
	"gorm.io/gorm/logger"

	"github.com/idemkit/idem/docs/orm"
	"github.com/idemkit/idem/docs/orm/entdb"
	"github.com/idemkit/idem/docs/orm/sqlcdb"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/server"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

// Payment is the GORM model of the payments table (sqlcdb/schema.sql).
type Payment struct {
	ID     int64
	Key    string
	Amount int64
}

// bunPayment is bun's.
type bunPayment struct {
	bun.BaseModel `bun:"table:payments"`
	ID            int64  `bun:"id,pk,autoincrement"`
	Key           string `bun:"key"`
	Amount        int64  `bun:"amount"`
}

// recipe is a payment handler whose insert goes through one ORM.
type recipe struct {
	name string
	// own: the handler begins its own transaction, which stores the
	// response (the app's transaction), rather than using idem's.
	own bool
	// handler serves payments on db.
	handler func(t *testing.T, db *sql.DB) http.HandlerFunc
}

// paid answers 201 with the payment's id.
func paid(w http.ResponseWriter, id int64) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	_, _ = fmt.Fprintf(w, `{"id":%d,  "amount":2500}`, id)
}

// inTx is a handler that inserts through pay in the request's *sql.Tx.
func inTx(pay func(ctx context.Context, tx *sql.Tx, key string) (int64, error)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		tx, ok := server.SQLTx(r.Context())
		if !ok {
			http.Error(w, "no transaction", http.StatusInternalServerError)
			return
		}
		id, err := pay(r.Context(), tx, r.Header.Get("Idempotency-Key"))
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		paid(w, id)
	}
}

var recipes = []recipe{
	{name: "GORM", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			p := Payment{Key: key, Amount: 2500}
			err := orm.GORM(gdb.WithContext(ctx), tx).Create(&p).Error
			return p.ID, err
		})
	}},
	{name: "GORM, its own transaction", own: true, handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		gdb, err := gorm.Open(postgres.New(postgres.Config{Conn: db}), &gorm.Config{Logger: logger.Discard})
		require.NoError(t, err)
		return func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			err := gdb.WithContext(ctx).Transaction(func(tx *gorm.DB) error {
				p := Payment{Key: r.Header.Get("Idempotency-Key"), Amount: 2500}
				if err := tx.Create(&p).Error; err != nil {
					return err
				}
				paid(w, p.ID)
				return orm.GORMStoreIn(ctx, tx)
			})
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		}
	}},
	{name: "lib/pq, its own transaction", own: true, handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		pq := openDriver(t, "postgres", dbURL(t, db))
		return func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			tx, err := pq.BeginTx(ctx, nil)
			if err != nil {
				http.Error(w, err.Error(), http.StatusServiceUnavailable)
				return
			}
			defer func() { _ = tx.Rollback() }()
			var id int64
			err = tx.QueryRowContext(ctx, `INSERT INTO payments (key, amount) VALUES ($1, 2500) RETURNING id`, r.Header.Get("Idempotency-Key")).Scan(&id)
			if err == nil {
				paid(w, id)
				err = server.StoreInSQLTx(ctx, tx)
			}
			if err == nil {
				err = tx.Commit()
			}
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
			}
		}
	}},
	{name: "sqlx", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		xdb := sqlx.NewDb(db, "pgx")
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (id int64, err error) {
			err = orm.Sqlx(xdb, tx).GetContext(ctx, &id, `INSERT INTO payments (key, amount) VALUES ($1, $2) RETURNING id`, key, 2500)
			return id, err
		})
	}},
	{name: "bun", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		bdb := bun.NewDB(db, pgdialect.New())
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			p := &bunPayment{Key: key, Amount: 2500}
			_, err := bdb.NewInsert().Conn(orm.Bun(tx)).Model(p).Returning("id").Exec(ctx)
			return p.ID, err
		})
	}},
	{name: "ent", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			client := entdb.NewClient(entdb.Driver(orm.Ent(tx)))
			p, err := client.Payment.Create().SetKey(key).SetAmount(2500).Save(ctx)
			if err != nil {
				return 0, err
			}
			return int64(p.ID), nil
		})
	}},
	{name: "sqlc", handler: func(t *testing.T, db *sql.DB) http.HandlerFunc {
		return inTx(func(ctx context.Context, tx *sql.Tx, key string) (int64, error) {
			return orm.Sqlc(tx).CreatePayment(ctx, sqlcdb.CreatePaymentParams{Key: key, Amount: 2500})
		})
	}},
}

// kit is one test's database (a schema of its own) and server.
type kit struct {
	db  *sql.DB
	url string
}

func newKit(t *testing.T) *kit {
	t.Helper()
	url := pgtest.SchemaURL(t)
	db := open(t, url)
	ctx := context.Background()
	_, err := db.ExecContext(ctx, server.Schema())
	require.NoError(t, err)
	schema, err := os.ReadFile("sqlcdb/schema.sql")
	require.NoError(t, err)
	_, err = db.ExecContext(ctx, string(schema))
	require.NoError(t, err)
	return &kit{db: db, url: url}
}

func open(t *testing.T, url string) *sql.DB {
	t.Helper()
	db := openDriver(t, "pgx", url)
	mu.Lock()
	urls[db] = url
	mu.Unlock()
	return db
}

// openDriver opens url on driver, closed when the test ends.
func openDriver(t *testing.T, driver, url string) *sql.DB {
	t.Helper()
	db, err := sql.Open(driver, url)
	require.NoError(t, err)
	db.SetMaxOpenConns(16)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

// urls are the URLs the tests' databases were opened on.
var (
	mu   sync.Mutex
	urls = map[*sql.DB]string{}
)

func dbURL(t *testing.T, db *sql.DB) string {
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, urls, db)
	return urls[db]
}

// mux mounts h behind a Transactional middleware on a PostgresSQLStore.
func mux(db *sql.DB, h http.Handler, hooks server.Hooks) *http.ServeMux {
	mw := server.Middleware(server.NewPostgresSQLStore(db), server.Config{Hooks: hooks, Logger: slog.New(slog.DiscardHandler)})
	m := http.NewServeMux()
	m.Handle("POST /v1/payments", mw(h))
	return m
}

func (k *kit) serve(t *testing.T, r recipe) *httptest.Server {
	t.Helper()
	srv := httptest.NewServer(mux(k.db, r.handler(t, k.db), server.Hooks{}))
	t.Cleanup(srv.Close)
	return srv
}

func (k *kit) rows(t *testing.T, key string) int {
	t.Helper()
	var n int
	require.NoError(t, k.db.QueryRow(`SELECT count(*) FROM payments WHERE key = $1`, key).Scan(&n))
	return n
}

type reply struct {
	status int
	header http.Header
	body   string
}

func pay(base, key string) (reply, error) {
	req, err := http.NewRequest(http.MethodPost, base+"/v1/payments", strings.NewReader(`{"amount":2500}`))
	if err != nil {
		return reply{}, err
	}
	req.Header.Set("Idempotency-Key", key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return reply{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return reply{status: resp.StatusCode, header: resp.Header, body: string(b)}, err
}

func eachRecipe(t *testing.T, f func(t *testing.T, k *kit, r recipe)) {
	for _, r := range recipes {
		t.Run(r.name, func(t *testing.T) {
			t.Parallel()
			f(t, newKit(t), r)
		})
	}
}

// The same key twice makes one row and a byte-identical replay.
func TestSameKeyTwice(t *testing.T) {
	eachRecipe(t, func(t *testing.T, k *kit, r recipe) {
		srv := k.serve(t, r)
		first, err := pay(srv.URL, "k-twice")
		require.NoError(t, err)
		require.Equal(t, http.StatusCreated, first.status, first.body)
		again, err := pay(srv.URL, "k-twice")
		require.NoError(t, err)
		assert.Equal(t, "true", again.header.Get("Idempotent-Replayed"))
		assert.Equal(t, first.status, again.status)
		assert.Equal(t, first.body, again.body, "byte for byte")
		assert.Equal(t, first.header.Get("Content-Type"), again.header.Get("Content-Type"))
		assert.Equal(t, 1, k.rows(t, "k-twice"))
	})
}

// 8 concurrent duplicates make one row.
func TestConcurrentDuplicates(t *testing.T) {
	eachRecipe(t, func(t *testing.T, k *kit, r recipe) {
		srv := k.serve(t, r)
		replies := make([]reply, 8)
		var wg sync.WaitGroup
		for i := range replies {
			wg.Go(func() {
				rep, err := pay(srv.URL, "k-dup")
				assert.NoError(t, err)
				replies[i] = rep
			})
		}
		wg.Wait()
		created := ""
		for _, rep := range replies {
			switch rep.status {
			case http.StatusCreated:
				if created == "" {
					created = rep.body
				}
				assert.Equal(t, created, rep.body, "every 201 is the one payment")
			case http.StatusConflict:
			default:
				t.Errorf("a duplicate got %d %s", rep.status, rep.body)
			}
		}
		assert.NotEmpty(t, created)
		assert.Equal(t, 1, k.rows(t, "k-dup"))
	})
}
