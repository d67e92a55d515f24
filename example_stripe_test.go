package idem_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/testserver"
)

// stripeDialect is a Classifier for Stripe's API, which does not speak
// problem+json: a request whose key is still being processed gets 409 with
// a JSON error of code idempotency_key_in_use, a key reused with other
// parameters gets 400 with an error of type idempotency_error, and
// Stripe-Should-Retry says whether a retry can help (false on a stored 500:
// Stripe replays it to every retry of the key).
func stripeDialect(o idem.Outcome) idem.Decision {
	if o.Certainty != idem.Responded {
		return idem.Decision{} // lost responses, refused dials: the default rules
	}
	var e struct{ Error struct{ Type, Code string } }
	if o.Status >= 400 {
		json.Unmarshal(o.Body, &e) // read ahead for a Classifier: the first 16 KiB
	}
	switch {
	case o.Status == http.StatusConflict && e.Error.Code == "idempotency_key_in_use":
		return idem.Decision{Verdict: idem.InFlight}
	case o.Status == http.StatusBadRequest && e.Error.Type == "idempotency_error":
		return idem.Decision{Verdict: idem.Fail, Err: idem.ErrKeyReused}
	}
	switch o.Header.Get("Stripe-Should-Retry") {
	case "true":
		return idem.Decision{Verdict: idem.Retry}
	case "false":
		return idem.Decision{Verdict: idem.Stop}
	}
	return idem.Decision{}
}

// stripeLike serves /v1/charges, /v1/refunds and /v1/payouts in Stripe's
// dialect. A charge stays in progress for one more request after the one
// that made it, which then gets 409 idempotency_key_in_use; a finished
// key's response is replayed; the same key with another body gets 400
// idempotency_error. A refund's first request meets a lock held elsewhere:
// 409 lock_timeout, which the default rules would return, with
// Stripe-Should-Retry: true. A payout fails with a 500 that Stripe would
// store: Stripe-Should-Retry: false.
type stripeLike struct {
	mu       sync.Mutex
	charges  map[string]string // key -> request body
	progress map[string]int    // key -> requests still answered "in use"
	refunds  map[string]int    // key -> requests seen
	made     int
	requests int
}

func (s *stripeLike) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	key := r.Header.Get("Idempotency-Key")
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests++
	w.Header().Set("Content-Type", "application/json")
	switch r.URL.Path {
	case "/v1/payouts":
		w.Header().Set("Stripe-Should-Retry", "false")
		stripeError(w, http.StatusInternalServerError, "api_error", "")
		return
	case "/v1/refunds":
		if s.refunds[key]++; s.refunds[key] == 1 {
			w.Header().Set("Stripe-Should-Retry", "true")
			stripeError(w, http.StatusConflict, "invalid_request_error", "lock_timeout")
			return
		}
		fmt.Fprint(w, `{"id":"re_1","object":"refund"}`)
		return
	}
	stored, seen := s.charges[key]
	switch {
	case !seen:
		s.made++
		s.charges[key], s.progress[key] = string(body), 1
	case stored != string(body):
		stripeError(w, http.StatusBadRequest, "idempotency_error", "")
		return
	case s.progress[key] > 0:
		s.progress[key]--
		w.Header().Set("Stripe-Should-Retry", "true")
		stripeError(w, http.StatusConflict, "invalid_request_error", "idempotency_key_in_use")
		return
	default:
		w.Header().Set("Idempotent-Replayed", "true")
	}
	fmt.Fprintf(w, `{"id":"ch_%d","object":"charge"}`, s.made)
}

func stripeError(w http.ResponseWriter, status int, typ, code string) {
	w.WriteHeader(status)
	fmt.Fprintf(w, `{"error":{"type":%q,"code":%q,"message":"..."}}`, typ, code)
}

// A Classifier teaches the client Stripe's dialect. The test server drops
// the response to the first request of each charge; the retry finds the
// charge still in progress (409 idempotency_key_in_use), waits and
// retries with the same key, and gets the charge, made once. The refund's
// 409 lock_timeout is retried because Stripe-Should-Retry says so; the
// payout's stored 500 is not, because it says not.
func ExampleClassifier() {
	api := &stripeLike{charges: map[string]string{}, progress: map[string]int{}, refunds: map[string]int{}}
	dropFirst := testserver.Rule{Match: testserver.Match{Path: "/v1/charges"}, Script: []testserver.Fault{{Kind: testserver.FaultDropClose}}}
	srv := testserver.New(api, testserver.Config{Rules: []testserver.Rule{dropFirst}})
	defer srv.Close()
	client := idem.NewClient(idem.Config{Classifier: stripeDialect, Backoff: idem.Backoff{Base: time.Millisecond}})

	call := func(ctx context.Context, path, form string) {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+path, strings.NewReader(form))
		resp, err := client.Do(req)
		var e *idem.Error
		if errors.As(err, &e) {
			fmt.Println("error:", errors.Is(err, idem.ErrKeyReused), e.Status)
			return
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		fmt.Printf("%d %s replayed=%s\n", resp.StatusCode, bytes.TrimSpace(body), resp.Header.Get("Idempotent-Replayed"))
	}
	ctx := idem.WithKey(context.Background(), "order-1042")
	call(ctx, "/v1/charges", "amount=1250&currency=eur")
	call(ctx, "/v1/charges", "amount=9999&currency=eur") // the same key, other parameters
	call(context.Background(), "/v1/refunds", "charge=ch_1")
	call(context.Background(), "/v1/payouts", "amount=500")
	fmt.Println("charges made:", api.made, "requests:", api.requests)
	// Output:
	// 200 {"id":"ch_1","object":"charge"} replayed=true
	// error: true 400
	// 200 {"id":"re_1","object":"refund"} replayed=
	// 500 {"error":{"type":"api_error","code":"","message":"..."}} replayed=
	// charges made: 1 requests: 7
}

// Without the Classifier the same calls go wrong in the three ways the
// dialect prevents: the 409 idempotency_key_in_use reaches the caller as
// the charge's answer, so does the refund's 409 that Stripe said to retry,
// and the stored 500 is retried in vain.
func ExampleClassifier_without() {
	api := &stripeLike{charges: map[string]string{}, progress: map[string]int{}, refunds: map[string]int{}}
	dropFirst := testserver.Rule{Match: testserver.Match{Path: "/v1/charges"}, Script: []testserver.Fault{{Kind: testserver.FaultDropClose}}}
	srv := testserver.New(api, testserver.Config{Rules: []testserver.Rule{dropFirst}})
	defer srv.Close()
	client := idem.NewClient(idem.Config{Backoff: idem.Backoff{Base: time.Millisecond}})
	for _, path := range []string{"/v1/charges", "/v1/refunds", "/v1/payouts"} {
		req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader("amount=1250"))
		resp, err := client.Do(req)
		if err != nil {
			fmt.Println(errors.Is(err, idem.ErrAttemptsExhausted))
			continue
		}
		resp.Body.Close()
		fmt.Println(resp.StatusCode)
	}
	fmt.Println("requests:", api.requests)
	// Output:
	// 409
	// 409
	// true
	// requests: 9
}
