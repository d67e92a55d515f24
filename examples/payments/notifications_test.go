package main

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
)

// The demo's notification rows come from the Receiver's own records: a
// payment notified twice and a payment never notified are counted, and
// make the run fail.
func TestNotificationsAreCheckedAgainstTheReceiversRecords(t *testing.T) {
	ctx := context.Background()
	nt, err := newNotifier(ctx, "", 1, 0, 500*time.Millisecond)
	require.NoError(t, err)
	st := &storage{backend: api.NewMemoryBackend(), name: "memory"}
	require.NoError(t, nt.openOutbox(st, 500*time.Millisecond))
	defer func() { require.NoError(t, nt.stop()) }()
	require.NoError(t, createAccounts(ctx, st.backend, "t1", 10))
	p, err := st.backend.Pay(ctx, api.Payment{Tenant: "t1", AccountID: "acc-00", AmountCents: 100, Currency: "EUR"})
	require.NoError(t, err)

	got, err := nt.settle(ctx, st.backend, "t1", notes{}, 10*time.Second)
	require.NoError(t, err)
	assert.Positive(t, got.attempts) // the event may be logged just after the response
	got.attempts = 0
	assert.Equal(t, notes{enqueued: 1, delivered: 1}, got)
	assert.False(t, got.violated())

	// The same payment notified again, under another key: delivered twice.
	body := string(api.PaymentCreated(nt.srv.URL, p).Body)
	req, _ := http.NewRequest("POST", nt.srv.URL+"/v1/notifications", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", "another-key")
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusCreated, resp.StatusCode)
	got, err = nt.settle(ctx, st.backend, "t1", notes{}, time.Second)
	require.NoError(t, err)
	assert.Equal(t, 1, got.twice)
	assert.True(t, got.violated())
	assert.Equal(t, 1, result{idem: column{notes: got}}.exitCode())

	// A payment whose notification was never enqueued: lost.
	plain := api.NewMemoryBackend()
	require.NoError(t, createAccounts(ctx, plain, "t2", 10))
	_, err = plain.Pay(ctx, api.Payment{Tenant: "t2", AccountID: "acc-00", AmountCents: 100, Currency: "EUR"})
	require.NoError(t, err)
	got, err = nt.settle(ctx, plain, "t2", nt.now(notes{}), 50*time.Millisecond)
	require.NoError(t, err)
	assert.Equal(t, 1, got.lost)
	assert.Equal(t, 1, result{naive: column{notes: got}}.exitCode())
}
