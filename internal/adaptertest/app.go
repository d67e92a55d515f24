package adaptertest

import (
	"context"
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/server"
)

// The routes of the sample API, in each framework's pattern syntax:
//
//	POST /v1/accounts/:id/payments  a payment (keyed): 201 and the payment
//	GET  /v1/accounts/:id           {"payment_count": n}
//	GET  /v1/payments/:id           200 when the payment exists, else 404
//
// Every route needs "Authorization: Bearer tenant:principal", which the
// API's own authentication puts in the framework's context, where the
// adapter's Scope finds it.

// ErrDown is the error of a payment that failed after its effect (see
// [App.FailNext]); the API answers it with 503 through the framework's own
// error handling, never by writing the response itself.
var ErrDown = errors.New("adaptertest: the database is down")

// ErrInvalid is the error of a payment whose body is not a payment; the
// API answers it with 422.
var ErrInvalid = errors.New("adaptertest: not a payment")

// schema is the sample API's table.
const schema = `CREATE TABLE IF NOT EXISTS payments (
	id bigserial PRIMARY KEY, account text NOT NULL, amount_cents bigint NOT NULL, reference text NOT NULL)`

// App is the sample API's logic, the same on every framework: the
// framework code around it only routes, authenticates and renders.
type App struct {
	pool *pgxpool.Pool
	fail atomic.Int64
}

// Payment is a payment as the API answers it.
type Payment struct {
	ID          string `json:"payment_id"`
	Account     string `json:"account_id"`
	AmountCents int64  `json:"amount_cents"`
}

// FailNext makes the next n payments fail with [ErrDown] after their
// effect, as a handler whose last statement fails.
func (a *App) FailNext(n int64) { a.fail.Store(n) }

// Pay makes one payment from account: in the request's transaction
// ([server.Tx], Transactional mode) or on the pool (Leased mode, an effect
// that commits on its own).
func (a *App) Pay(ctx context.Context, account string, body []byte) (Payment, error) {
	var in struct {
		AmountCents int64  `json:"amount_cents"`
		Reference   string `json:"reference"`
	}
	if err := json.Unmarshal(body, &in); err != nil || in.AmountCents <= 0 {
		return Payment{}, ErrInvalid
	}
	var db interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	} = a.pool
	if tx, ok := server.Tx(ctx); ok {
		db = tx
	}
	var id int64
	err := db.QueryRow(ctx, `INSERT INTO payments (account, amount_cents, reference) VALUES ($1, $2, $3) RETURNING id`,
		account, in.AmountCents, in.Reference).Scan(&id)
	if err != nil {
		return Payment{}, err
	}
	if a.fail.Add(-1) >= 0 {
		return Payment{}, ErrDown
	}
	return Payment{ID: strconv.FormatInt(id, 10), Account: account, AmountCents: in.AmountCents}, nil
}

// Count is the number of payments made from account.
func (a *App) Count(ctx context.Context, account string) (int, error) {
	var n int
	err := a.pool.QueryRow(ctx, `SELECT count(*) FROM payments WHERE account = $1`, account).Scan(&n)
	return n, err
}

// Exists reports whether the payment id exists.
func (a *App) Exists(ctx context.Context, id string) (bool, error) {
	var ok bool
	err := a.pool.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM payments WHERE id::text = $1)`, id).Scan(&ok)
	return ok, err
}

// Auth reads the caller from an Authorization header, "Bearer
// tenant:principal"; ok is false when it names none.
func Auth(authorization string) (tenant, principal string, ok bool) {
	cred, found := strings.CutPrefix(authorization, "Bearer ")
	if !found {
		return "", "", false
	}
	tenant, principal, ok = strings.Cut(cred, ":")
	return tenant, principal, ok && tenant != "" && principal != ""
}

// Setup migrates the store's and the API's tables on pool.
func Setup(ctx context.Context, pool *pgxpool.Pool) error {
	if err := server.Migrate(ctx, pool); err != nil {
		return err
	}
	_, err := pool.Exec(ctx, schema)
	return err
}
