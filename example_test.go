package idem_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/testserver"
)

// paymentsAPI is a payments endpoint protected by the server middleware (in
// memory), in front of which a testserver drops the first response after the
// payment was made: the failure that idempotency keys exist for.
func paymentsAPI() (srv *testserver.Server, payments *atomic.Int32) {
	payments = new(atomic.Int32)
	create := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		n := payments.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"payment_id":"pay_%d"}`, n)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", server.Middleware(server.NewMemoryStore(), server.Config{})(create))
	dropFirst := testserver.Rule{Script: []testserver.Fault{{Kind: testserver.FaultDropClose}}}
	return testserver.New(mux, testserver.Config{Rules: []testserver.Rule{dropFirst}}), payments
}

func ExampleNewClient() {
	srv, payments := paymentsAPI()
	defer srv.Close()

	client := idem.NewClient(idem.Config{Backoff: idem.Backoff{Base: time.Millisecond}})
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payments",
		strings.NewReader(`{"account_id":"acc_1","amount_cents":1250,"currency":"EUR"}`))
	req.Header.Set("Content-Type", "application/json")

	resp, err := client.Do(req) // the first response is lost; the retry carries the same key
	if err != nil {
		fmt.Println(err)
		return
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Println(resp.StatusCode, string(body), "replayed:", resp.Header.Get("Idempotent-Replayed"))
	fmt.Println("payments made:", payments.Load())
	// Output:
	// 201 {"payment_id":"pay_1"} replayed: true
	// payments made: 1
}

func ExampleWithKey() {
	srv, payments := paymentsAPI()
	defer srv.Close()
	client := idem.NewClient(idem.Config{Backoff: idem.Backoff{Base: time.Millisecond}})

	// The key of an order, stored before the first call, survives a restart
	// of this process: a resend after it is recognised as the same payment.
	key := idem.NewKey()
	for range 2 {
		ctx := idem.WithKey(context.Background(), key)
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/v1/payments",
			strings.NewReader(`{"account_id":"acc_1","amount_cents":990,"currency":"EUR"}`))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(err)
			return
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		fmt.Println(resp.StatusCode, string(body), "same key:", resp.Request.Header.Get(idem.KeyHeader) == key)
	}
	fmt.Println("payments made:", payments.Load())
	// Output:
	// 201 {"payment_id":"pay_1"} same key: true
	// 201 {"payment_id":"pay_1"} same key: true
	// payments made: 1
}

func ExampleError() {
	srv, _ := paymentsAPI()
	defer srv.Close()
	client := idem.NewClient(idem.Config{})

	// A key reused for a different request is refused by the server, and
	// never retried.
	key := idem.NewKey()
	for _, amount := range []int{100, 200} {
		req, _ := http.NewRequestWithContext(idem.WithKey(context.Background(), key), http.MethodPost,
			srv.URL+"/v1/payments", strings.NewReader(fmt.Sprintf(`{"amount_cents":%d}`, amount)))
		resp, err := client.Do(req)
		var e *idem.Error
		switch {
		case errors.As(err, &e):
			fmt.Println("reused:", errors.Is(err, idem.ErrKeyReused), "status:", e.Status,
				"attempts:", e.Attempts, "may have taken effect:", e.MayHaveTakenEffect)
		case err == nil:
			resp.Body.Close()
			fmt.Println(resp.StatusCode)
		}
	}
	// Output:
	// 201
	// reused: true status: 422 attempts: 1 may have taken effect: false
}
