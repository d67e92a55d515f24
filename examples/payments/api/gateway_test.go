package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/internal/testwait"
)

// gatewayPost charges at the gateway under key.
func gatewayPost(t *testing.T, gw http.Handler, key, body string) *httptest.ResponseRecorder {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/v1/charges", strings.NewReader(body))
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, req)
	return rec
}

func gatewayGet(t *testing.T, gw http.Handler, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	gw.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
	return rec
}

func TestGatewayLookupByKey(t *testing.T) {
	gw := NewGateway(GatewayConfig{Logger: quietLogger()})
	charged := gatewayPost(t, gw, "k-ok", `{"amount_cents":300,"currency":"EUR"}`)
	require.Equal(t, http.StatusCreated, charged.Code, charged.Body.String())
	var gc gatewayCharge
	require.NoError(t, json.Unmarshal(charged.Body.Bytes(), &gc))
	require.Equal(t, http.StatusPaymentRequired, gatewayPost(t, gw, "k-big", `{"amount_cents":2000000,"currency":"EUR"}`).Code)
	require.Equal(t, http.StatusBadRequest, gatewayPost(t, gw, "k-bad", `{"amount_cents":-1,"currency":"EUR"}`).Code)

	ok := gatewayGet(t, gw, "/v1/charges/by-key/k-ok")
	require.Equal(t, http.StatusOK, ok.Code)
	assert.JSONEq(t, `{"idempotency_key":"k-ok","status":"charged","id":"`+gc.ID+`","amount_cents":300,"currency":"EUR"}`, ok.Body.String())
	declined := gatewayGet(t, gw, "/v1/charges/by-key/k-big")
	require.Equal(t, http.StatusOK, declined.Code)
	assert.JSONEq(t, `{"idempotency_key":"k-big","status":"declined","amount_cents":2000000,"currency":"EUR"}`, declined.Body.String())
	for _, key := range []string{"k-bad", "k-never"} {
		rec := gatewayGet(t, gw, "/v1/charges/by-key/"+key)
		assert.Equal(t, http.StatusNotFound, rec.Code, "%s: a refused request leaves nothing, as does none", key)
		assert.Equal(t, "charge-not-found", problemName(rec))
	}
	assert.Equal(t, GatewayStats{Charges: 1, AmountCents: 300}, gw.Stats())
}

// A charge whose request has arrived and is not answered yet is in
// progress: the lookup answers 409 until it is answered.
func TestGatewayLookupOfAChargeInProgress(t *testing.T) {
	gw := NewGateway(GatewayConfig{Logger: quietLogger()})
	body, feed := io.Pipe()
	answered := make(chan int, 1)
	go func() {
		req := httptest.NewRequest(http.MethodPost, "/v1/charges", body)
		req.Header.Set("Idempotency-Key", "k-slow")
		rec := httptest.NewRecorder()
		gw.ServeHTTP(rec, req) // its body arrives only when the test feeds it
		answered <- rec.Code
	}()
	var rec *httptest.ResponseRecorder
	require.Eventually(t, func() bool {
		rec = gatewayGet(t, gw, "/v1/charges/by-key/k-slow")
		return rec.Code != http.StatusNotFound
	}, testwait.Bound, time.Millisecond, "the request never counted as in progress")
	assert.Equal(t, http.StatusConflict, rec.Code)
	assert.Equal(t, "charge-in-progress", problemName(rec))
	assert.Equal(t, "1", rec.Header().Get("Retry-After"))

	_, err := io.WriteString(feed, `{"amount_cents":300,"currency":"EUR"}`)
	require.NoError(t, err)
	require.NoError(t, feed.Close())
	require.Equal(t, http.StatusCreated, testwait.Recv(t, answered, "the charge's answer"))
	assert.Equal(t, http.StatusOK, gatewayGet(t, gw, "/v1/charges/by-key/k-slow").Code)
}

func TestGatewayClientLookup(t *testing.T) {
	gw, url := newGatewayServer(t)
	c := newGatewayClient(url, fastGatewayClient())
	ctx := context.Background()
	gc, err := c.charge(ctx, "k-1", gatewayRequest{AmountCents: 300, Currency: "EUR"})
	require.NoError(t, err)
	out, err := c.lookup(ctx, "k-1")
	require.NoError(t, err)
	assert.Equal(t, gatewayOutcome{Key: "k-1", Status: outcomeCharged, ID: gc.ID, AmountCents: 300, Currency: "EUR"}, out)
	_, err = c.charge(ctx, "k-2", gatewayRequest{AmountCents: 2_000_000, Currency: "EUR"})
	require.ErrorIs(t, err, errDeclined)
	out, err = c.lookup(ctx, "k-2")
	require.NoError(t, err)
	assert.Equal(t, outcomeDeclined, out.Status)
	_, err = c.lookup(ctx, "k-3")
	assert.ErrorIs(t, err, errNoCharge)
	assert.Equal(t, GatewayStats{Charges: 1, AmountCents: 300}, gw.Stats())

	for status, want := range map[int]error{http.StatusConflict: errChargeRunning, http.StatusServiceUnavailable: errGateway, http.StatusOK: errGateway} {
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			w.WriteHeader(status) // a 200 with no outcome is malformed
		}))
		_, err := newGatewayClient(srv.URL, idem.NewClient(idem.Config{MaxAttempts: 1})).lookup(ctx, "k-1")
		assert.ErrorIs(t, err, want, "a lookup answered %d", status)
		srv.Close()
	}
}
