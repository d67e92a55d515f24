// Code in the shape sqlc v1.27 generates from query.sql (see db.go).
// source: query.sql

package sqlcdb

import (
	"context"
)

const createPayment = `-- name: CreatePayment :one
INSERT INTO payments (key, amount) VALUES ($1, $2) RETURNING id
`

// CreatePaymentParams are the parameters of CreatePayment.
type CreatePaymentParams struct {
	Key    string
	Amount int64
}

// CreatePayment inserts a payment and returns its id.
func (q *Queries) CreatePayment(ctx context.Context, arg CreatePaymentParams) (int64, error) {
	row := q.db.QueryRowContext(ctx, createPayment, arg.Key, arg.Amount)
	var id int64
	err := row.Scan(&id)
	return id, err
}
