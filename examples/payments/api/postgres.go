package api

import (
	"context"
	_ "embed"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

//go:embed schema.sql
var schemaSQL string

// migrateLock is the advisory lock that serialises concurrent Migrate
// calls (two nodes starting at once).
const migrateLock = 0x7061796d656e7473 // "payments"

// DB is what PostgresBackend and Migrate need of a connection pool;
// *pgxpool.Pool has it.
type DB interface {
	Begin(ctx context.Context) (pgx.Tx, error)
	Query(ctx context.Context, sql string, args ...any) (pgx.Rows, error)
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// Migrate creates the tables of the idempotency middleware
// (server.Migrate) and of PostgresBackend (accounts, payments, charges) in
// the first schema of the search_path, if they are missing. It is
// idempotent and safe to call from several processes at once; ctx governs
// it.
func Migrate(ctx context.Context, db DB) error {
	if err := server.Migrate(ctx, db); err != nil {
		return err
	}
	err := pgx.BeginFunc(ctx, db, func(tx pgx.Tx) error {
		if _, err := tx.Exec(ctx, "SELECT pg_advisory_xact_lock($1)", int64(migrateLock)); err != nil {
			return err
		}
		_, err := tx.Exec(ctx, schemaSQL)
		return err
	})
	if err != nil {
		return fmt.Errorf("api: migrate: %w", err)
	}
	return nil
}

// PostgresBackend keeps accounts, payments and charges in the tables that
// Migrate creates. A mutation made for a keyed Transactional request runs
// in the idempotency middleware's transaction (server.Tx), so that it
// commits together with the stored response, or not at all; other
// mutations run in a transaction of their own. It is safe for concurrent
// use.
type PostgresBackend struct {
	db     DB
	notify *outbox.Outbox // see NotifyTo
	to     string
}

// NewPostgresBackend returns a backend on db, which must hold the schema
// of Migrate.
func NewPostgresBackend(db DB) *PostgresBackend {
	return &PostgresBackend{db: db}
}

// inTx runs fn in the middleware's transaction when ctx carries one, and
// in a transaction of its own otherwise.
func (b *PostgresBackend) inTx(ctx context.Context, fn func(pgx.Tx) error) error {
	if tx, ok := server.Tx(ctx); ok {
		return fn(tx)
	}
	return pgx.BeginFunc(ctx, b.db, fn)
}

// sqlPutAccount creates the account ($3 NULL: in $5), or sets the balance
// of the existing one if $3 is NULL or its currency. It returns no row
// when the account exists in another currency than $3 (the conflict's
// row lock orders it after a concurrent PUT).
const sqlPutAccount = `
INSERT INTO accounts (tenant, id, currency, balance_cents) VALUES ($1, $2, coalesce($3, $5), $4)
ON CONFLICT (tenant, id) DO UPDATE SET balance_cents = EXCLUDED.balance_cents
  WHERE $3::text IS NULL OR accounts.currency = $3
RETURNING currency, (SELECT count(*) FROM payments p WHERE p.tenant = $1 AND p.account_id = $2)`

// PutAccount creates the account, or sets its balance; see
// Backend.PutAccount.
func (b *PostgresBackend) PutAccount(ctx context.Context, tenant, id, currency string, balance int64) (Account, error) {
	a := Account{ID: id, BalanceCents: balance}
	err := b.inTx(ctx, func(tx pgx.Tx) error {
		err := tx.QueryRow(ctx, sqlPutAccount, tenant, id, nullable(currency), balance, defaultCurrency).
			Scan(&a.Currency, &a.PaymentCount)
		if errors.Is(err, pgx.ErrNoRows) { // the account exists in another currency
			if err := tx.QueryRow(ctx, `SELECT currency FROM accounts WHERE tenant = $1 AND id = $2`, tenant, id).
				Scan(&a.Currency); err != nil {
				return err
			}
			return mismatch(a.Currency, currency)
		}
		return err
	})
	if err != nil {
		return Account{}, wrapUnlessBusiness("put account", err)
	}
	return a, nil
}

const sqlAccount = `
SELECT a.currency, a.balance_cents,
       (SELECT count(*) FROM payments p WHERE p.tenant = a.tenant AND p.account_id = a.id)
FROM accounts a WHERE a.tenant = $1 AND a.id = $2`

// Account returns the account, or ErrUnknownAccount.
func (b *PostgresBackend) Account(ctx context.Context, tenant, id string) (Account, error) {
	a := Account{ID: id}
	err := b.db.QueryRow(ctx, sqlAccount, tenant, id).Scan(&a.Currency, &a.BalanceCents, &a.PaymentCount)
	switch {
	case errors.Is(err, pgx.ErrNoRows):
		return Account{}, ErrUnknownAccount
	case err != nil:
		return Account{}, fmt.Errorf("api: account: %w", err)
	}
	return a, nil
}

// lockAccount locks the account's row for the rest of tx and checks that
// an operation in currency may debit it.
func lockAccount(ctx context.Context, tx pgx.Tx, tenant, id, currency string, debit int64) error {
	var accountCurrency string
	var balance int64
	err := tx.QueryRow(ctx, `SELECT currency, balance_cents FROM accounts WHERE tenant = $1 AND id = $2 FOR UPDATE`,
		tenant, id).Scan(&accountCurrency, &balance)
	if errors.Is(err, pgx.ErrNoRows) {
		return ErrUnknownAccount
	}
	if err != nil {
		return err
	}
	return checkAccount(accountCurrency, balance, currency, debit)
}

const sqlPay = `
WITH debit AS (
  UPDATE accounts SET balance_cents = balance_cents - $4 WHERE tenant = $2 AND id = $3 RETURNING balance_cents
)
INSERT INTO payments (id, tenant, account_id, amount_cents, currency, balance_cents, reference, idempotency_key)
SELECT $1, $2, $3, $4, $5, debit.balance_cents, $6, $7 FROM debit
RETURNING balance_cents`

// Pay debits the account and records the payment, in one transaction.
func (b *PostgresBackend) Pay(ctx context.Context, p Payment) (Payment, error) {
	p.ID = newID("pay_")
	err := b.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockAccount(ctx, tx, p.Tenant, p.AccountID, p.Currency, p.AmountCents); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, sqlPay, p.ID, p.Tenant, p.AccountID, p.AmountCents, p.Currency,
			nullable(p.Reference), nullable(p.Key)).Scan(&p.BalanceCents)
		if err == nil && b.notify != nil {
			_, err = b.notify.Enqueue(ctx, tx, PaymentCreated(b.to, p))
		}
		return err
	})
	if err != nil {
		return Payment{}, wrapUnlessBusiness("pay", err)
	}
	return p, nil
}

const sqlChargeByGatewayID = `
SELECT id, tenant, account_id, amount_cents, currency, balance_cents, coalesce(idempotency_key, '')
FROM charges WHERE gateway_charge_id = $1`

const sqlCredit = `
WITH credit AS (
  UPDATE accounts SET balance_cents = balance_cents + $4 WHERE tenant = $2 AND id = $3 RETURNING balance_cents
)
INSERT INTO charges (id, tenant, account_id, amount_cents, currency, balance_cents, gateway_charge_id, idempotency_key)
SELECT $1, $2, $3, $4, $5, credit.balance_cents, $6, $7 FROM credit
RETURNING balance_cents`

// RecordCharge credits the account once per gateway charge. The account's
// row lock orders two attempts that record the same charge: the second
// finds the first's row and credits nothing.
func (b *PostgresBackend) RecordCharge(ctx context.Context, c Charge) (Charge, error) {
	err := b.inTx(ctx, func(tx pgx.Tx) error {
		if err := lockAccount(ctx, tx, c.Tenant, c.AccountID, c.Currency, 0); err != nil {
			return err
		}
		err := tx.QueryRow(ctx, sqlChargeByGatewayID, c.GatewayChargeID).Scan(
			&c.ID, &c.Tenant, &c.AccountID, &c.AmountCents, &c.Currency, &c.BalanceCents, &c.Key)
		if !errors.Is(err, pgx.ErrNoRows) {
			return err // nil: recorded before
		}
		c.ID = newID("ch_")
		return tx.QueryRow(ctx, sqlCredit, c.ID, c.Tenant, c.AccountID, c.AmountCents, c.Currency,
			c.GatewayChargeID, nullable(c.Key)).Scan(&c.BalanceCents)
	})
	if err != nil {
		return Charge{}, wrapUnlessBusiness("record charge", err)
	}
	return c, nil
}

// Payments returns every payment of the tenant, oldest first.
func (b *PostgresBackend) Payments(ctx context.Context, tenant string) ([]Payment, error) {
	rows, err := b.db.Query(ctx, `
SELECT id, account_id, amount_cents, currency, balance_cents, coalesce(reference, ''), coalesce(idempotency_key, '')
FROM payments WHERE tenant = $1 ORDER BY created_at, id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("api: payments: %w", err)
	}
	out, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (Payment, error) {
		p := Payment{Tenant: tenant}
		err := row.Scan(&p.ID, &p.AccountID, &p.AmountCents, &p.Currency, &p.BalanceCents, &p.Reference, &p.Key)
		return p, err
	})
	if err != nil {
		return nil, fmt.Errorf("api: payments: %w", err)
	}
	return out, nil
}

// nullable stores "" as NULL.
func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// wrapUnlessBusiness returns the business errors as they are and wraps
// the others with what failed.
func wrapUnlessBusiness(op string, err error) error {
	for _, business := range []error{ErrUnknownAccount, ErrCurrencyMismatch, ErrInsufficientFunds} {
		if errors.Is(err, business) {
			return err
		}
	}
	return fmt.Errorf("api: %s: %w", op, err)
}
