-- name: CreatePayment :one
INSERT INTO payments (key, amount) VALUES ($1, $2) RETURNING id;
