package replaytest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
)

// ServePayment answers r as the n-th run of the tests' payments handler:
// {"amount": n} with n > 0 gets 201 and one "pay" effect, 402 gets a
// stored decline and a "declined" effect, anything else 400. effect makes
// the effect named label, in the request's transaction when it has one.
// Its 201 carries headers the middleware must keep (X-Trace twice,
// Location) and must not (Set-Cookie, X-Not-Allowlisted), and a body whose
// whitespace and key order a JSON column would change.
func ServePayment(w http.ResponseWriter, r *http.Request, n int64, effect func(ctx context.Context, label string) error) {
	var req struct{ Amount json.Number }
	dec := json.NewDecoder(r.Body)
	dec.UseNumber()
	amount, err := 0.0, dec.Decode(&req)
	if err == nil {
		amount, err = strconv.ParseFloat(string(req.Amount), 64)
	}
	switch {
	case err != nil || amount <= 0:
		w.Header().Set("Content-Type", "application/problem+json")
		w.WriteHeader(http.StatusBadRequest)
		_, _ = io.WriteString(w, `{"title":"amount must be positive"}`)
		return
	case amount == 402:
		_ = effect(r.Context(), "declined")
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = io.WriteString(w, `{"declined":true}`)
		return
	}
	if err := effect(r.Context(), "pay"); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Location", fmt.Sprintf("/v1/payments/%d", n))
	h.Add("X-Trace", "first")
	h.Add("X-Trace", "second")
	h.Set("Set-Cookie", "session=secret")
	h.Set("X-Not-Allowlisted", "x")
	w.WriteHeader(http.StatusCreated)
	// Odd whitespace and key order that a JSON column would normalise.
	_, _ = fmt.Fprintf(w, `{"id":%d,  "status":"paid" ,"amount":%s,"z":{"b":1,"a":[3, 2,1]}}`, n, req.Amount)
}
