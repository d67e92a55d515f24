package testserver_test

import (
	"fmt"
	"io"
	"net/http"
	"sync"
	"time"

	"github.com/idemkit/idem/testserver"
)

// send POSTs to url with the given headers and returns the body, or the
// error. Each attempt gets a fresh connection: net/http silently retries a
// request that carries an Idempotency-Key once when a reused connection
// breaks, which would hide attempts from these examples.
func send(url string, headers map[string]string) (string, error) {
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, err := http.NewRequest(http.MethodPost, url, nil)
	if err != nil {
		return "", err
	}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return fmt.Sprintf("%d %s", resp.StatusCode, body), err
}

// An idempotent payments handler behind a rule that loses the first
// response of every key: the client retries with the same key, the handler
// replays instead of charging again, and the checker agrees.
func ExampleNew() {
	var ledger testserver.Ledger
	var mu sync.Mutex
	charged := map[string]string{} // key -> payment id
	payments := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		id, seen := charged[key]
		if !seen {
			id = fmt.Sprintf("pay-%d", len(charged)+1)
			charged[key] = id
			ledger.Record(key, id) // the business effect
		}
		mu.Unlock()
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, id)
	})

	srv := testserver.New(payments, testserver.Config{Rules: []testserver.Rule{{
		Name:   "lose-first-response",
		Match:  testserver.Match{Method: http.MethodPost},
		Script: []testserver.Fault{{Kind: testserver.FaultDropReset}}, // attempt 1; later attempts pass
	}}})
	defer srv.Close()

	var history testserver.History
	for _, key := range []string{"order-1", "order-2"} {
		for attempt := 1; attempt <= 3; attempt++ {
			got, err := send(srv.URL+"/payments", map[string]string{"Idempotency-Key": key})
			if err != nil {
				fmt.Printf("%s attempt %d: no response\n", key, attempt)
				continue // safe: the same key
			}
			fmt.Printf("%s attempt %d: %s\n", key, attempt, got)
			history.OK(key, got[len("201 "):])
			break
		}
	}
	report := testserver.Check(&ledger, &history)
	fmt.Println("violations:", len(report.Violations))
	// Output:
	// order-1 attempt 1: no response
	// order-1 attempt 2: 201 pay-1
	// order-2 attempt 1: no response
	// order-2 attempt 2: 201 pay-2
	// violations: 0
}

// The point of the product: a naive loop that retries a POST on any error,
// without an Idempotency-Key, pays twice when a response is lost after the
// server acted. The requests carry X-Operation-Id only so that the test
// harness knows which logical payment each one was; the server ignores it.
func Example_naiveRetry() {
	var ledger testserver.Ledger
	var mu sync.Mutex
	payments := 0
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := testserver.InfoFrom(r.Context()) // Op comes from X-Operation-Id
		mu.Lock()
		payments++
		id := fmt.Sprintf("pay-%d", payments)
		mu.Unlock()
		ledger.Record(info.Op, id)
		w.WriteHeader(http.StatusCreated)
		fmt.Fprint(w, id)
	})
	srv := testserver.New(handler, testserver.Config{
		OperationHeader: "X-Operation-Id",
		Rules: []testserver.Rule{{
			Script: []testserver.Fault{{Kind: testserver.FaultDropClose}}, // the server acts, the client hears nothing
		}},
	})
	defer srv.Close()

	var history testserver.History
	for _, op := range []string{"a", "b"} {
		for attempt := 1; attempt <= 3; attempt++ {
			got, err := send(srv.URL+"/payments", map[string]string{"X-Operation-Id": op})
			if err != nil {
				continue // naive: retry on any error
			}
			history.OK(op, got[len("201 "):])
			break
		}
	}
	report := testserver.Check(&ledger, &history)
	fmt.Println("double effects:", report.DoubleEffects)
	for _, v := range report.Violations {
		fmt.Println(v)
	}
	// Output:
	// double effects: 2
	// testserver: operation took effect more than once: op "a": took effect 2 times, results ["pay-1" "pay-2"]
	// testserver: operation took effect more than once: op "b": took effect 2 times, results ["pay-3" "pay-4"]
}

// A rules file for the faultproxy program, or for SetRules.
func ExampleParseRules() {
	rules, err := testserver.ParseRules([]byte(`{"rules": [
	  {"name": "lose-first", "match": {"method": "POST", "path": "/payments*"},
	   "script": ["drop-reset", {"kind": "status", "status": 503, "retry_after": 1}]},
	  {"name": "chaos", "mix": [{"p": 0.1, "fault": "partial-body"}, {"p": 0.05, "fault": "delay-response;delay=2s"}]}
	]}`))
	if err != nil {
		fmt.Println(err)
		return
	}
	for _, r := range rules {
		fmt.Println(r.Name, r.Script, r.Mix)
	}
	// Output:
	// lose-first [drop-reset status;status=503;retry-after=1s] []
	// chaos [] [{0.1 partial-body} {0.05 delay-response;delay=2s}]
}
