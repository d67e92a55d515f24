package api_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/testserver"
)

// The API in memory, behind a testserver that drops the response to the
// first attempt of every payment after the payment was made. The idem
// client retries with the same key and gets the stored 201: one payment.
func ExampleNew() {
	payments := api.New(api.Config{Logger: slog.New(slog.DiscardHandler)})
	srv := testserver.New(payments, testserver.Config{Rules: []testserver.Rule{{
		Match:  testserver.Match{Method: "POST", Path: "/v1/payments"},
		Script: []testserver.Fault{{Kind: testserver.FaultDropClose}},
	}}})
	defer srv.Close()
	client := idem.NewClient(idem.Config{Backoff: idem.Backoff{Base: time.Millisecond}})

	call := func(method, path, body string) (*http.Response, string) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		req, _ := http.NewRequestWithContext(ctx, method, srv.URL+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer acme:alice")
		resp, err := client.Do(req)
		if err != nil {
			panic(err)
		}
		defer resp.Body.Close()
		data, _ := io.ReadAll(resp.Body)
		return resp, strings.TrimSpace(string(data))
	}
	call("PUT", "/v1/accounts/acc-1", `{"balance_cents":10000}`)
	resp, _ := call("POST", "/v1/payments", `{"account_id":"acc-1","amount_cents":2500,"currency":"EUR"}`)
	fmt.Println(resp.StatusCode, "replayed:", resp.Header.Get("Idempotent-Replayed"))
	_, account := call("GET", "/v1/accounts/acc-1", "")
	fmt.Println(account)
	// Output:
	// 201 replayed: true
	// {"id":"acc-1","currency":"EUR","balance_cents":7500,"payment_count":1}
}
