//go:build unix

package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/examples/payments/internal/testwait"
	"github.com/idemkit/idem/internal/pgtest"
)

const payment = `{"account_id":"acc-1","amount_cents":2500,"currency":"EUR"}`

// A payment whose server died (SIGKILL) after it committed is answered,
// after a restart on the same database, with a replay: the retry does not
// pay again.
func TestPaymentSurvivesSIGKILL(t *testing.T) {
	cases := []struct {
		name string
		env  []string // the crash switch, or nothing for a kill from outside
	}{
		{"killed after commit, before the response", []string{"IDEM_CRASH_AT=committed", "IDEM_CRASH_ROUTE=POST /v1/payments"}},
		{"killed after the response", nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			db, bin := pgtest.SchemaURL(t), buildServer(t)
			first := startServer(t, bin, c.env, "-addr", "127.0.0.1:0", "-db", db)
			mustSend(t, http.StatusOK, "PUT", first.url+"/v1/accounts/acc-1", "", `{"balance_cents":10000}`)

			key := idem.NewKey()
			resp, original, err := send(t, "POST", first.url+"/v1/payments", key, payment)
			if c.env != nil {
				require.Error(t, err, "the switch kills the server before it answers (got %v)", resp)
				requireKilled(t, first)
			} else {
				require.NoError(t, err)
				require.Equal(t, http.StatusCreated, resp.StatusCode, "%s", original)
				first.kill(t)
			}

			second := startServer(t, bin, nil, "-addr", first.addr, "-db", db)
			resp, replayed := mustSend(t, http.StatusCreated, "POST", second.url+"/v1/payments", key, payment)
			assert.Equal(t, "true", resp.Header.Get("Idempotent-Replayed"))
			assert.Contains(t, string(replayed), `"payment_id":"pay_`)
			if original != nil {
				assert.Equal(t, string(original), string(replayed), "the replay is byte for byte")
			}
			assert.Equal(t, api.Account{ID: "acc-1", Currency: "EUR", BalanceCents: 7500, PaymentCount: 1}, account(t, second, "acc-1"))
		})
	}
}

// A charge whose server died at a step of POST /v1/charges is finished,
// after a restart and once the dead attempt's lease expired, by a retry
// that takes the operation over: the gateway, which outlives the servers,
// shows one charge and the account is credited once.
func TestChargeTakeoverAfterSIGKILL(t *testing.T) {
	cases := []struct {
		crashAt        string
		chargedAtCrash int // gateway charges when the server died
	}{
		{api.StepGatewayCalled, 0},
		{api.StepGatewayAnswered, 1}, // the gateway charged; nothing recorded
		{api.StepRecorded, 1},        // charged and recorded; no response stored
	}
	for _, c := range cases {
		t.Run(c.crashAt, func(t *testing.T) {
			t.Parallel()
			gw := api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)})
			gwSrv := httptest.NewServer(gw)
			defer gwSrv.Close()
			db, bin := pgtest.SchemaURL(t), buildServer(t)
			args := []string{"-addr", "127.0.0.1:0", "-db", db, "-lease", "1s", "-gateway", gwSrv.URL}
			first := startServer(t, bin, []string{"IDEM_CRASH_AT=" + c.crashAt}, args...)
			mustSend(t, http.StatusOK, "PUT", first.url+"/v1/accounts/acc-1", "", `{"balance_cents":0}`)

			key := idem.NewKey()
			_, _, err := send(t, "POST", first.url+"/v1/charges", key, `{"account_id":"acc-1","amount_cents":3000,"currency":"EUR"}`)
			require.Error(t, err, "the switch kills the server before it answers")
			requireKilled(t, first)
			require.Equal(t, c.chargedAtCrash, gw.Stats().Charges)

			args[1] = first.addr
			second := startServer(t, bin, nil, args...)
			resp := retryUntilDone(t, second.url+"/v1/charges", key, `{"account_id":"acc-1","amount_cents":3000,"currency":"EUR"}`)
			assert.Equal(t, http.StatusCreated, resp.StatusCode)
			assert.Empty(t, resp.Header.Get("Idempotent-Replayed"), "a takeover ran the handler")
			assert.Equal(t, api.GatewayStats{Charges: 1, AmountCents: 3000}, gw.Stats())
			assert.Equal(t, int64(3000), account(t, second, "acc-1").BalanceCents, "credited once")

			again, _ := mustSend(t, http.StatusCreated, "POST", second.url+"/v1/charges", key, `{"account_id":"acc-1","amount_cents":3000,"currency":"EUR"}`)
			assert.Equal(t, "true", again.Header.Get("Idempotent-Replayed"))
		})
	}
}

// retryUntilDone sends a keyed POST with the idem client, which waits out
// the 409 key-in-flight answers (Retry-After: the time left on the dead
// attempt's lease, by the database clock) and then takes the operation
// over. The loop is bounded by a 20 s deadline and 15 attempts.
func retryUntilDone(t *testing.T, url, key, body string) *http.Response {
	t.Helper()
	var inFlight int
	client := idem.NewClient(idem.Config{MaxAttempts: 15, Observer: idem.Observer{
		OnAttempt: func(a idem.Attempt) {
			if a.Problem == "key-in-flight" {
				inFlight++
			}
		},
	}})
	ctx, cancel := context.WithTimeout(idem.WithKey(context.Background(), key), 20*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer acme:alice")
	resp, err := client.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
	t.Logf("the retry waited out %d key-in-flight answers", inFlight)
	return resp
}

// SIGTERM shuts the server down gracefully: a request in flight (a charge
// held at the gateway) finishes with its 201, then the process exits 0.
func TestGracefulShutdown(t *testing.T) {
	gw := api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)})
	arrived, release := make(chan struct{}), make(chan struct{})
	var once sync.Once // a retry of the charge's gateway call arrives too
	gwSrv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		once.Do(func() { close(arrived) })
		<-release
		gw.ServeHTTP(w, r)
	}))
	defer gwSrv.Close()
	p := startServer(t, buildServer(t), nil, "-addr", "127.0.0.1:0", "-gateway", gwSrv.URL)
	mustSend(t, http.StatusOK, "PUT", p.url+"/v1/accounts/acc-1", "", `{"balance_cents":0}`)

	status := make(chan int, 1)
	go func() {
		resp, _, err := send(t, "POST", p.url+"/v1/charges", idem.NewKey(), `{"account_id":"acc-1","amount_cents":100,"currency":"EUR"}`)
		if err != nil {
			status <- 0
			return
		}
		status <- resp.StatusCode
	}()
	testwait.Recv(t, arrived, "the charge reaching the gateway")
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	p.waitLog(t, "shutting down")
	close(release)
	assert.Equal(t, http.StatusCreated, testwait.Recv(t, status, "the charge's answer"), "the request in flight finished")
	state := p.wait(t)
	assert.True(t, state.Success(), "exit %v; log:\n%s", state, p.stderr)
	assert.Contains(t, p.stderr.String(), "shut down")
}
