package main

import (
	"context"
	"encoding/binary"
	"fmt"
	"math/rand/v2"

	"github.com/google/uuid"

	"github.com/idemkit/idem/examples/payments/api"
)

// The demo's accounts: accountCount accounts with more than enough money,
// and one empty account that answers every payment with 402 (a committed
// outcome, stored and replayed like a 201).
const (
	accountCount   = 20
	emptyAccount   = "acc-empty"
	maxAmountCents = 10_000
)

// operation is one logical payment.
type operation struct {
	// id is the idem client's Idempotency-Key (chosen before the first
	// attempt, as an application that stores its keys does), the payment's
	// reference, and the X-Operation-Id by which the testserver numbers
	// the attempts of the naive client's keyless requests.
	id      string
	account string
	amount  int64
}

// workload returns the n payments of a seed: the same for both clients.
func workload(seed uint64, n int) []operation {
	r, ids := rand.New(stream(seed, 0)), stream(seed, 1)
	ops := make([]operation, n)
	for i := range ops {
		id := uuid.Must(uuid.NewRandomFromReader(ids))
		ops[i] = operation{id: id.String(), account: fmt.Sprintf("acc-%02d", r.IntN(accountCount)), amount: 100 + r.Int64N(maxAmountCents-100)}
		if r.IntN(50) == 0 {
			ops[i].account = emptyAccount
		}
	}
	return ops
}

// stream returns the random stream number n of a seed.
func stream(seed uint64, n byte) *rand.ChaCha8 {
	var key [32]byte
	binary.LittleEndian.PutUint64(key[:], seed)
	key[31] = n
	return rand.NewChaCha8(key)
}

// createAccounts gives a tenant the demo's accounts, each with enough
// money for every payment of the run made four times over: a naive
// client's double payments then show as extra payments, never as 402s.
func createAccounts(ctx context.Context, b api.Backend, tenant string, n int) error {
	for i := range accountCount {
		if _, err := b.PutAccount(ctx, tenant, fmt.Sprintf("acc-%02d", i), "EUR", int64(4*n*maxAmountCents)); err != nil {
			return err
		}
	}
	_, err := b.PutAccount(ctx, tenant, emptyAccount, "EUR", 0)
	return err
}
