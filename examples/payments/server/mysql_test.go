//go:build unix

package main

import (
	"io"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/examples/payments/internal/mysqltest"
)

// On MySQL (MariaDB here), as on Postgres: a payment whose server died
// (SIGKILL) after it committed, before it answered, is answered after a
// restart on the same database with a replay; one whose server died after
// the handler's writes, before the commit, left nothing (its writes were
// in the claim's transaction), and the retry pays. Either way: paid once.
func TestPaymentSurvivesSIGKILLOnMySQL(t *testing.T) {
	for _, at := range []string{"committed", "handled"} {
		t.Run(at, func(t *testing.T) {
			dsn, bin := mysqltest.Database(t), buildServer(t)
			crash := []string{"IDEM_CRASH_AT=" + at, "IDEM_CRASH_ROUTE=POST /v1/payments"}
			first := startServer(t, bin, crash, "-addr", "127.0.0.1:0", "-mysql", dsn)
			mustSend(t, http.StatusOK, "PUT", first.url+"/v1/accounts/acc-1", "", `{"balance_cents":10000}`)

			key := idem.NewKey()
			resp, _, err := send(t, "POST", first.url+"/v1/payments", key, payment)
			require.Error(t, err, "the switch kills the server before it answers (got %v)", resp)
			requireKilled(t, first)

			second := startServer(t, bin, nil, "-addr", first.addr, "-mysql", dsn)
			resp, body := mustSend(t, http.StatusCreated, "POST", second.url+"/v1/payments", key, payment)
			replayed := map[string]string{"committed": "true", "handled": ""}[at]
			assert.Equal(t, replayed, resp.Header.Get("Idempotent-Replayed"))
			assert.Contains(t, string(body), `"payment_id":"pay_`)
			assert.Equal(t, api.Account{ID: "acc-1", Currency: "EUR", BalanceCents: 7500, PaymentCount: 1}, account(t, second, "acc-1"))
		})
	}
}

// -mysql takes neither an explicit -db nor -notify; $DATABASE_URL gives way.
func TestMySQLFlags(t *testing.T) {
	env := func(string) string { return "postgres://elsewhere/db" }
	o, err := parseFlags([]string{"-mysql", "u@tcp(h:3306)/d"}, io.Discard, env)
	require.NoError(t, err)
	assert.Empty(t, o.db)
	assert.Equal(t, "mysql", storeName(o))
	for _, args := range [][]string{
		{"-mysql", "u@tcp(h:3306)/d", "-db", "postgres://x/y"},
		{"-mysql", "u@tcp(h:3306)/d", "-notify", "http://127.0.0.1:9/"},
	} {
		_, err := parseFlags(args, io.Discard, env)
		assert.ErrorIs(t, err, errUsage, "%v", args)
	}
}
