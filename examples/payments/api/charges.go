package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// recordedPoint is the data of the recovery point StepRecorded.
type recordedPoint struct {
	GatewayChargeID string `json:"gateway_charge_id"`
}

// createCharge charges the card at the gateway and credits the account.
// It runs in Leased mode, because its main effect leaves the database:
//
//  1. record the recovery point "gateway-called", then call the gateway
//     with a key derived from the incoming one;
//  2. record the charge (credit the account, once per gateway charge),
//     then the recovery point "recorded";
//  3. answer 201; the middleware stores it.
//
// An attempt that takes over after a crash (Lease.Recovery) repeats step 1
// with the same downstream key, so the gateway replays its charge instead
// of charging again, unless the earlier attempt got to "recorded", which
// names the gateway charge: then it goes straight to step 2, which finds
// the charge recorded and credits nothing.
func (a *api) createCharge(w http.ResponseWriter, r *http.Request) {
	ctx := r.Context()
	c, _ := callerFrom(ctx)
	var body amountBody
	if !decodeJSON(w, r, &body) {
		return
	}
	if problem := body.validate(); problem != "" {
		badRequest(w, problem)
		return
	}
	acct, err := a.backend.Account(ctx, c.Tenant, body.AccountID)
	if err == nil {
		err = checkAccount(acct.Currency, 0, body.Currency, 0)
	}
	if err != nil {
		a.writeBusinessError(w, r, err)
		return
	}
	lease, _ := server.LeaseFrom(ctx) // the route is Leased and requires a key
	key, _ := wire.ParseKey(r.Header.Get(wire.HeaderKey))
	gw, err := a.gatewayCharge(ctx, lease, downstreamKey(c, key), body)
	if err != nil {
		a.writeChargeError(w, r, err)
		return
	}
	ch, err := a.backend.RecordCharge(ctx, newCharge(c, key, body, gw))
	if err == nil {
		point, _ := json.Marshal(recordedPoint{GatewayChargeID: gw})
		err = lease.Checkpoint(ctx, StepRecorded, point)
	}
	if err != nil {
		a.writeChargeError(w, r, err)
		return
	}
	a.step(ctx, StepRecorded)
	writeJSON(w, http.StatusCreated, ch)
}

// newCharge is the charge that a gateway charge makes of an operation,
// for Backend.RecordCharge.
func newCharge(c caller, key string, body amountBody, gatewayChargeID string) Charge {
	return Charge{Tenant: c.Tenant, Key: key, AccountID: body.AccountID,
		AmountCents: body.AmountCents, Currency: body.Currency, GatewayChargeID: gatewayChargeID}
}

// recordedChargeID returns the gateway charge that an earlier attempt
// recorded, when it got to the recovery point StepRecorded.
func recordedChargeID(rec server.Recovery) (string, bool) {
	if rec.Point != StepRecorded {
		return "", false
	}
	var p recordedPoint
	if err := json.Unmarshal(rec.Data, &p); err != nil || p.GatewayChargeID == "" {
		return "", false
	}
	return p.GatewayChargeID, true
}

// gatewayCharge returns the id of the gateway's charge for this operation,
// charging the card unless an earlier attempt recorded the charge already.
func (a *api) gatewayCharge(ctx context.Context, lease *server.Lease, key string, body amountBody) (string, error) {
	if rec, ok := lease.Recovery(); ok {
		if id, ok := recordedChargeID(rec); ok {
			return id, nil
		}
	}
	if err := lease.Extend(ctx, 0); err != nil { // a full lease for the call
		return "", err
	}
	ctx, cancel := context.WithTimeout(ctx, a.lease) // a longer call would outlive the lease
	defer cancel()
	point, _ := json.Marshal(map[string]string{"downstream_key": key})
	if err := lease.Checkpoint(ctx, StepGatewayCalled, point); err != nil {
		return "", err
	}
	a.step(ctx, StepGatewayCalled)
	gc, err := a.gateway.charge(ctx, key, gatewayRequest{
		AmountCents: body.AmountCents, Currency: body.Currency, Description: "account " + body.AccountID,
	})
	if err != nil {
		return "", err
	}
	a.step(ctx, StepGatewayAnswered)
	return gc.ID, nil
}

// writeChargeError answers for a failed charge. A decline is the
// operation's own outcome (402, stored). Every other error is a 5xx: the
// middleware ends the lease at once and keeps the recovery point, so the
// next retry takes over, asks the gateway again with the same key, and
// records the charge. That includes a business error of the Backend (the
// account was checked before the gateway was called): once the card may
// be charged, a refusal such as 400 would tell the client that nothing
// happened.
func (a *api) writeChargeError(w http.ResponseWriter, r *http.Request, err error) {
	switch {
	case errors.Is(err, errDeclined):
		writeProblem(w, http.StatusPaymentRequired, "card-declined", "Card declined", "the card gateway declined the charge")
	case errors.Is(err, server.ErrLeaseLost):
		w.Header().Set(wire.HeaderRetryAfter, "1")
		writeProblem(w, http.StatusServiceUnavailable, "lease-lost", "Taken over",
			"another attempt of this operation took it over; retry with the same key")
	case errors.Is(err, errGateway): // err names the gateway's address: logged, not sent
		a.log.WarnContext(r.Context(), "payments API: card gateway unavailable", "err", err)
		writeProblem(w, http.StatusBadGateway, "gateway-unavailable", "Card gateway unavailable",
			"the card gateway did not confirm the charge; retry with the same key")
	default:
		a.serverError(w, r, err)
	}
}
