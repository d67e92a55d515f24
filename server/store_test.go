package server

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// leasedOnly is a store that refuses Transactional routes, as a Redis
// store does.
type leasedOnly struct{ *MemoryStore }

var errNoTx = errors.New("no transactions here")

func (leasedOnly) CheckMode(m Mode) error {
	if m == Transactional {
		return errNoTx
	}
	return nil
}

func TestMiddlewareRefusesAModeTheStoreCannotServe(t *testing.T) {
	store := leasedOnly{NewMemoryStore()}
	defer func() {
		p := recover()
		err, ok := p.(error)
		require.True(t, ok, "Middleware panics with an error, got %v", p)
		assert.ErrorIs(t, err, errNoTx, "the store's reason")
		assert.Contains(t, err.Error(), "Config.Mode")
	}()
	assert.NotPanics(t, func() { Middleware(store, Config{Mode: Leased}) })
	Middleware(store, Config{})
	t.Fatal("Middleware mounted a Transactional route on a store that refuses it")
}
