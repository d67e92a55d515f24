package api

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/idemkit/idem/server"
)

// mysqlSchema are the tables of MySQLBackend, as schema.sql's on Postgres:
// one CREATE TABLE IF NOT EXISTS each (a statement at a time: the driver
// sends no batch), with its indexes inline, so that two nodes migrating at
// once are serialised by the server's metadata lock.
var mysqlSchema = []string{
	`CREATE TABLE IF NOT EXISTS accounts (
    tenant        VARCHAR(191) NOT NULL,
    id            VARCHAR(191) NOT NULL,
    currency      VARCHAR(16)  NOT NULL,
    balance_cents BIGINT       NOT NULL CHECK (balance_cents >= 0),
    created_at    DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    PRIMARY KEY (tenant, id)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS payments (
    id              VARCHAR(64)  NOT NULL PRIMARY KEY,
    tenant          VARCHAR(191) NOT NULL,
    account_id      VARCHAR(191) NOT NULL,
    amount_cents    BIGINT       NOT NULL CHECK (amount_cents > 0),
    currency        VARCHAR(16)  NOT NULL,
    balance_cents   BIGINT       NOT NULL,
    reference       VARCHAR(255) NULL,
    idempotency_key VARCHAR(255) NULL,
    created_at      DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    KEY payments_account (tenant, account_id),
    FOREIGN KEY (tenant, account_id) REFERENCES accounts (tenant, id)
) ENGINE=InnoDB`,
	`CREATE TABLE IF NOT EXISTS charges (
    id                VARCHAR(64)  NOT NULL PRIMARY KEY,
    tenant            VARCHAR(191) NOT NULL,
    account_id        VARCHAR(191) NOT NULL,
    amount_cents      BIGINT       NOT NULL CHECK (amount_cents > 0),
    currency          VARCHAR(16)  NOT NULL,
    balance_cents     BIGINT       NOT NULL,
    gateway_charge_id VARCHAR(191) NOT NULL UNIQUE,
    idempotency_key   VARCHAR(255) NULL,
    created_at        DATETIME(6)  NOT NULL DEFAULT CURRENT_TIMESTAMP(6),
    FOREIGN KEY (tenant, account_id) REFERENCES accounts (tenant, id)
) ENGINE=InnoDB`,
}

// MigrateMySQL creates the tables of MySQLBackend (accounts, payments,
// charges) in db's current database, if they are missing; the idempotency
// records' table is mysqlidem.Migrate's. It is idempotent and safe to call
// from several processes at once; ctx governs it.
func MigrateMySQL(ctx context.Context, db *sql.DB) error {
	for _, stmt := range mysqlSchema {
		if _, err := db.ExecContext(ctx, stmt); err != nil {
			return fmt.Errorf("api: migrate mysql: %w", err)
		}
	}
	return nil
}

// MySQLBackend keeps accounts, payments and charges on MySQL or MariaDB
// (InnoDB), in the tables of MigrateMySQL. A mutation made for a keyed
// Transactional request runs in the transaction that the idempotency
// middleware's store (mysqlidem.Store) hands it (server.SQLTx), so that it
// commits together with the stored response, or not at all; other
// mutations run in a transaction of their own. It has no outbox: it
// enqueues no notification. It is safe for concurrent use.
type MySQLBackend struct {
	db *sql.DB
}

// NewMySQLBackend returns a backend on db (go-sql-driver/mysql), whose
// database must hold the tables of MigrateMySQL.
func NewMySQLBackend(db *sql.DB) *MySQLBackend { return &MySQLBackend{db: db} }

// inTx runs fn in the middleware's transaction when ctx carries one, and
// in a transaction of its own otherwise.
func (b *MySQLBackend) inTx(ctx context.Context, fn func(*sql.Tx) error) error {
	if tx, ok := server.SQLTx(ctx); ok {
		return fn(tx)
	}
	tx, err := b.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer func() { _ = tx.Rollback() }() // after Commit: sql.ErrTxDone, ignored
	if err := fn(tx); err != nil {
		return err
	}
	return tx.Commit()
}

// sqlPutAccountMySQL creates the account, or sets the balance of the
// existing one when ? (the requested currency) is NULL or its own; either
// way the row stays locked to the transaction's end.
const sqlPutAccountMySQL = `
INSERT INTO accounts (tenant, id, currency, balance_cents) VALUES (?, ?, ?, ?)
ON DUPLICATE KEY UPDATE balance_cents = IF(? IS NULL OR currency = ?, VALUES(balance_cents), balance_cents)`

// PutAccount creates the account, or sets its balance; see
// Backend.PutAccount.
func (b *MySQLBackend) PutAccount(ctx context.Context, tenant, id, currency string, balance int64) (Account, error) {
	a := Account{ID: id}
	create := currency
	if create == "" {
		create = defaultCurrency
	}
	err := b.inTx(ctx, func(tx *sql.Tx) error {
		cur := nullable(currency)
		if _, err := tx.ExecContext(ctx, sqlPutAccountMySQL, tenant, id, create, balance, cur, cur); err != nil {
			return err
		}
		err := tx.QueryRowContext(ctx, sqlAccountMySQL+` FOR UPDATE`, tenant, id).
			Scan(&a.Currency, &a.BalanceCents, &a.PaymentCount)
		if err == nil && currency != "" && a.Currency != currency {
			return mismatch(a.Currency, currency) // the balance was left as it was
		}
		return err
	})
	if err != nil {
		return Account{}, wrapUnlessBusiness("put account", err)
	}
	return a, nil
}

const sqlAccountMySQL = `
SELECT a.currency, a.balance_cents,
       (SELECT COUNT(*) FROM payments p WHERE p.tenant = a.tenant AND p.account_id = a.id)
FROM accounts a WHERE a.tenant = ? AND a.id = ?`

// Account returns the account, or ErrUnknownAccount.
func (b *MySQLBackend) Account(ctx context.Context, tenant, id string) (Account, error) {
	a := Account{ID: id}
	err := b.db.QueryRowContext(ctx, sqlAccountMySQL, tenant, id).Scan(&a.Currency, &a.BalanceCents, &a.PaymentCount)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return Account{}, ErrUnknownAccount
	case err != nil:
		return Account{}, fmt.Errorf("api: account: %w", err)
	}
	return a, nil
}

// lockAccountMySQL locks the account's row for the rest of tx, checks
// that an operation in currency may debit it, and returns its balance.
func lockAccountMySQL(ctx context.Context, tx *sql.Tx, tenant, id, currency string, debit int64) (int64, error) {
	var accountCurrency string
	var balance int64
	err := tx.QueryRowContext(ctx, `SELECT currency, balance_cents FROM accounts WHERE tenant = ? AND id = ? FOR UPDATE`,
		tenant, id).Scan(&accountCurrency, &balance)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, ErrUnknownAccount
	}
	if err != nil {
		return 0, err
	}
	return balance, checkAccount(accountCurrency, balance, currency, debit)
}

// Pay debits the account and records the payment, in one transaction.
func (b *MySQLBackend) Pay(ctx context.Context, p Payment) (Payment, error) {
	p.ID = newID("pay_")
	err := b.inTx(ctx, func(tx *sql.Tx) error {
		balance, err := lockAccountMySQL(ctx, tx, p.Tenant, p.AccountID, p.Currency, p.AmountCents)
		if err != nil {
			return err
		}
		p.BalanceCents = balance - p.AmountCents
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance_cents = ? WHERE tenant = ? AND id = ?`,
			p.BalanceCents, p.Tenant, p.AccountID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
INSERT INTO payments (id, tenant, account_id, amount_cents, currency, balance_cents, reference, idempotency_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, p.ID, p.Tenant, p.AccountID, p.AmountCents, p.Currency, p.BalanceCents,
			nullable(p.Reference), nullable(p.Key))
		return err
	})
	if err != nil {
		return Payment{}, wrapUnlessBusiness("pay", err)
	}
	return p, nil
}

// RecordCharge credits the account once per gateway charge. The account's
// row lock orders two attempts that record the same charge: the second
// finds the first's row and credits nothing.
func (b *MySQLBackend) RecordCharge(ctx context.Context, c Charge) (Charge, error) {
	err := b.inTx(ctx, func(tx *sql.Tx) error {
		balance, err := lockAccountMySQL(ctx, tx, c.Tenant, c.AccountID, c.Currency, 0)
		if err != nil {
			return err
		}
		var key sql.NullString
		err = tx.QueryRowContext(ctx, `
SELECT id, tenant, account_id, amount_cents, currency, balance_cents, idempotency_key
FROM charges WHERE gateway_charge_id = ?`, c.GatewayChargeID).Scan(
			&c.ID, &c.Tenant, &c.AccountID, &c.AmountCents, &c.Currency, &c.BalanceCents, &key)
		if !errors.Is(err, sql.ErrNoRows) {
			c.Key = key.String
			return err // nil: recorded before
		}
		c.ID, c.BalanceCents = newID("ch_"), balance+c.AmountCents
		if _, err := tx.ExecContext(ctx, `UPDATE accounts SET balance_cents = ? WHERE tenant = ? AND id = ?`,
			c.BalanceCents, c.Tenant, c.AccountID); err != nil {
			return err
		}
		_, err = tx.ExecContext(ctx, `
INSERT INTO charges (id, tenant, account_id, amount_cents, currency, balance_cents, gateway_charge_id, idempotency_key)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, c.ID, c.Tenant, c.AccountID, c.AmountCents, c.Currency, c.BalanceCents,
			c.GatewayChargeID, nullable(c.Key))
		return err
	})
	if err != nil {
		return Charge{}, wrapUnlessBusiness("record charge", err)
	}
	return c, nil
}

// Payments returns every payment of the tenant, oldest first.
func (b *MySQLBackend) Payments(ctx context.Context, tenant string) ([]Payment, error) {
	rows, err := b.db.QueryContext(ctx, `
SELECT id, account_id, amount_cents, currency, balance_cents, COALESCE(reference, ''), COALESCE(idempotency_key, '')
FROM payments WHERE tenant = ? ORDER BY created_at, id`, tenant)
	if err != nil {
		return nil, fmt.Errorf("api: payments: %w", err)
	}
	defer rows.Close()
	var out []Payment
	for rows.Next() {
		p := Payment{Tenant: tenant}
		if err := rows.Scan(&p.ID, &p.AccountID, &p.AmountCents, &p.Currency, &p.BalanceCents, &p.Reference, &p.Key); err != nil {
			return nil, fmt.Errorf("api: payments: %w", err)
		}
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("api: payments: %w", err)
	}
	return out, nil
}
