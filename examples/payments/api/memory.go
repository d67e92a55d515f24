package api

import (
	"context"
	"sync"

	"github.com/idemkit/idem/outbox"
)

// MemoryBackend keeps accounts, payments and charges in process memory,
// for the demo and tests. Each method checks everything first and mutates
// last, under one mutex, so an error leaves nothing behind. Its data dies
// with the process. It is safe for concurrent use; the zero value is not
// ready, use NewMemoryBackend.
type MemoryBackend struct {
	mu       sync.Mutex
	accounts map[accountKey]*memAccount
	payments []Payment
	charges  map[string]Charge // by gateway charge id
	notify   *outbox.Memory    // see NotifyTo
	to       string
}

type accountKey struct{ tenant, id string }

type memAccount struct {
	currency string
	balance  int64
	payments int64
}

// NewMemoryBackend returns an empty MemoryBackend.
func NewMemoryBackend() *MemoryBackend {
	return &MemoryBackend{accounts: make(map[accountKey]*memAccount), charges: make(map[string]Charge)}
}

// PutAccount creates the account, or sets its balance; see
// Backend.PutAccount.
func (m *MemoryBackend) PutAccount(_ context.Context, tenant, id, currency string, balance int64) (Account, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.accounts[accountKey{tenant, id}]
	switch {
	case a == nil && currency == "":
		a = &memAccount{currency: defaultCurrency}
		m.accounts[accountKey{tenant, id}] = a
	case a == nil:
		a = &memAccount{currency: currency}
		m.accounts[accountKey{tenant, id}] = a
	case currency != "" && currency != a.currency:
		return Account{}, mismatch(a.currency, currency)
	}
	a.balance = balance
	return a.view(id), nil
}

// Account returns the account, or ErrUnknownAccount.
func (m *MemoryBackend) Account(_ context.Context, tenant, id string) (Account, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.accounts[accountKey{tenant, id}]
	if a == nil {
		return Account{}, ErrUnknownAccount
	}
	return a.view(id), nil
}

func (a *memAccount) view(id string) Account {
	return Account{ID: id, Currency: a.currency, BalanceCents: a.balance, PaymentCount: a.payments}
}

// Pay debits the account and records the payment.
func (m *MemoryBackend) Pay(ctx context.Context, p Payment) (Payment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	a := m.accounts[accountKey{p.Tenant, p.AccountID}]
	if a == nil {
		return Payment{}, ErrUnknownAccount
	}
	if err := checkAccount(a.currency, a.balance, p.Currency, p.AmountCents); err != nil {
		return Payment{}, err
	}
	p.ID, p.BalanceCents = newID("pay_"), a.balance-p.AmountCents
	if m.notify != nil { // enqueued under the lock, before the infallible mutation
		if _, err := m.notify.Enqueue(ctx, PaymentCreated(m.to, p)); err != nil {
			return Payment{}, err
		}
	}
	a.balance, a.payments = p.BalanceCents, a.payments+1
	m.payments = append(m.payments, p)
	return p, nil
}

// RecordCharge credits the account once per gateway charge.
func (m *MemoryBackend) RecordCharge(_ context.Context, c Charge) (Charge, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if old, ok := m.charges[c.GatewayChargeID]; ok {
		return old, nil
	}
	a := m.accounts[accountKey{c.Tenant, c.AccountID}]
	if a == nil {
		return Charge{}, ErrUnknownAccount
	}
	if err := checkAccount(a.currency, a.balance, c.Currency, 0); err != nil {
		return Charge{}, err
	}
	c.ID, c.BalanceCents = newID("ch_"), a.balance+c.AmountCents
	a.balance = c.BalanceCents
	m.charges[c.GatewayChargeID] = c
	return c, nil
}

// Payments returns every payment of the tenant, oldest first.
func (m *MemoryBackend) Payments(_ context.Context, tenant string) ([]Payment, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Payment
	for _, p := range m.payments {
		if p.Tenant == tenant {
			out = append(out, p)
		}
	}
	return out, nil
}
