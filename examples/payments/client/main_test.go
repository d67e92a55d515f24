package main

import (
	"bytes"
	"context"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/testserver"
)

// apiServer runs the API behind a testserver with the given rules.
func apiServer(t *testing.T, rules ...testserver.Rule) *testserver.Server {
	t.Helper()
	srv := testserver.New(api.New(api.Config{Logger: slog.New(slog.DiscardHandler)}), testserver.Config{Rules: rules})
	t.Cleanup(srv.Close)
	return srv
}

// dropFirstPayment drops the response to the first attempt of each
// payment, after the payment was made.
var dropFirstPayment = testserver.Rule{
	Match:  testserver.Match{Method: "POST", Path: "/v1/payments"},
	Script: []testserver.Fault{{Kind: testserver.FaultDropClose}},
}

// createAccount creates acc-1 on a connection of its own, so that the
// client under test opens a fresh one (net/http would otherwise re-send a
// keyed request by itself when the reused connection breaks).
func createAccount(t *testing.T, url string) {
	t.Helper()
	req, _ := http.NewRequest("PUT", url+"/v1/accounts/acc-1", strings.NewReader(`{"balance_cents":10000}`))
	req.Header.Set("Authorization", "Bearer acme:alice")
	resp, err := (&http.Client{Transport: &http.Transport{DisableKeepAlives: true}}).Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}

func lines(out *bytes.Buffer) []string {
	return strings.Split(strings.TrimSpace(out.String()), "\n")
}

func TestClientPrintsTheRetryAndTheReplay(t *testing.T) {
	srv := apiServer(t, dropFirstPayment)
	createAccount(t, srv.URL)
	var out bytes.Buffer
	require.NoError(t, run(context.Background(), []string{"-url", srv.URL, "-key", "order-1"}, &out, &out), out.String())
	got := lines(&out)
	require.Len(t, got, 6, out.String())
	assert.Equal(t, "POST "+srv.URL+"/v1/payments  Idempotency-Key: order-1", got[0])
	assert.Regexp(t, `^attempt 1: ambiguous: .* in \d+`, got[1])
	assert.Regexp(t, `^  retrying with the same key in \d+`, got[2])
	assert.Regexp(t, `^attempt 2: 201 Created in \d+`, got[3])
	assert.Equal(t, "201 Created  (Idempotent-Replayed: a stored response; the payment was made once)", got[4])
	assert.Contains(t, got[5], `"balance_cents":7500`)

	// The same key again: a replay; the payment is not made twice.
	out.Reset()
	require.NoError(t, run(context.Background(), []string{"-url", srv.URL, "-key", "order-1"}, &out, &out))
	assert.Contains(t, out.String(), "Idempotent-Replayed")
	assert.Contains(t, out.String(), `"balance_cents":7500`)
}

func TestClientSaysWhenThePaymentMayHaveBeenMade(t *testing.T) {
	srv := apiServer(t, dropFirstPayment)
	createAccount(t, srv.URL)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL, "-attempts", "1", "-key", "order-2"}, &out, &out)
	require.Error(t, err)
	assert.Contains(t, err.Error(), "may have been made: resend it with -key order-2")
}

func TestClientCreatesTheAccount(t *testing.T) {
	srv := apiServer(t)
	var out bytes.Buffer
	err := run(context.Background(), []string{"-url", srv.URL, "-balance", "900", "-amount", "1000", "-key", "k"}, &out, &out)
	require.EqualError(t, err, "the API answered 402 Payment Required")
	got := lines(&out)
	require.Len(t, got, 6, out.String())
	assert.Equal(t, "PUT "+srv.URL+"/v1/accounts/acc-1  balance_cents: 900", got[0])
	assert.Regexp(t, `^attempt 1: 200 OK in \d+`, got[1])
	assert.Regexp(t, `^attempt 1: 402 Payment Required \(insufficient-funds\) in \d+`, got[3])
	assert.Equal(t, "402 Payment Required", got[4])
}

func TestClientFlags(t *testing.T) {
	var out bytes.Buffer
	for _, args := range [][]string{{"extra"}, {"-attempts", "0"}, {"-timeout", "0s"}, {"-nope"}} {
		assert.ErrorIs(t, run(context.Background(), args, &out, &out), errUsage, "%v", args)
	}
}
