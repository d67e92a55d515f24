package api

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"

	"github.com/idemkit/idem/server"
)

// chargesRoute is POST /v1/charges as the middleware names the route: the
// key of its function in ReconcileRoutes.
const chargesRoute = "POST /v1/charges"

// ReconcileRoutes returns, by route, the functions that settle the API's
// abandoned Leased operations, for server.ReconcileConfig.Routes: today one,
// for POST /v1/charges. Start the reconciler beside the API, on its Store:
//
//	go server.RunReconciler(ctx, cfg.Store, server.ReconcileConfig{Routes: api.ReconcileRoutes(cfg)})
//
// cfg must be the Config given to New, with its Backend set: the functions
// record charges in it, and call the gateway at GatewayURL with
// GatewayClient. ReconcileRoutes returns nil when GatewayURL is empty (New
// mounts no POST /v1/charges) or Backend is nil (New would make a memory
// Backend of its own, which the functions could not reach).
//
// The function for POST /v1/charges follows the handler's recovery points:
//
//   - none: the handler records "gateway-called" before it calls the
//     gateway, and a stale attempt cannot record it once the reconciler has
//     taken over, so the gateway was never called: NotHappened, and the next
//     retry charges afresh;
//   - "recorded": the charge is recorded and the point names the gateway's
//     charge: it records it again (a no-op per gateway charge) and answers
//     Completed with the 201 the handler would have written;
//   - "gateway-called": it looks the downstream key up at the gateway
//     (Gateway's GET /v1/charges/by-key/{key}): charged, it records the
//     charge and answers Completed 201; declined, Completed with the 402
//     card-declined the handler writes; no charge, NotHappened; a charge
//     in progress, or a gateway that cannot tell, NotKnown (an error).
//
// A Completed response is the handler's, byte for byte: the same code
// writes it. Like the handler, the function is idempotent, so a reconciler
// that dies while it runs leaves nothing for the next one to undo.
//
// One race remains. A stalled attempt's gateway call may still be on its
// way (sent just before the call's deadline, which is about its lease's
// end) when the lookup finds no charge under the key and the reconciler
// frees the record; the gateway then charges the card for an operation that
// has no record. The deterministic downstream key bounds the damage: the
// card is never charged twice, because any later retry of the operation
// sends the gateway the same key, gets the charge replayed and records it.
// Only when no retry ever comes does the charge stay unrecorded, as it
// would without a reconciler. The gateway's 409 for a request that has
// arrived and is not answered yet leaves the window to the network
// transit of that last request.
func ReconcileRoutes(cfg Config) map[string]server.ReconcileFunc {
	if cfg.GatewayURL == "" || cfg.Backend == nil {
		return nil
	}
	a := &api{backend: cfg.Backend, log: cfg.Logger, gateway: newGatewayClient(cfg.GatewayURL, cfg.GatewayClient)}
	if a.log == nil {
		a.log = slog.Default()
	}
	return map[string]server.ReconcileFunc{chargesRoute: a.reconcileCharge}
}

// reconcileCharge settles an abandoned POST /v1/charges: see
// ReconcileRoutes.
func (a *api) reconcileCharge(ctx context.Context, op *server.Abandoned) (server.Settlement, error) {
	if op.Recovery.Point == "" {
		return server.Settlement{Answer: server.NotHappened}, nil
	}
	var rec recorder
	var body amountBody
	if !decodeJSON(&rec, op.Request, &body) || body.validate() != "" {
		return server.Settlement{}, fmt.Errorf("api: reconcile charge %q: its stored request is not a valid charge", op.Key)
	}
	c := caller{Tenant: op.Tenant, Principal: op.Principal}
	gw, ok := recordedChargeID(op.Recovery)
	if !ok {
		out, err := a.gateway.lookup(ctx, downstreamKey(c, op.Key))
		switch {
		case errors.Is(err, errNoCharge):
			return server.Settlement{Answer: server.NotHappened}, nil
		case err != nil:
			return server.Settlement{}, fmt.Errorf("api: reconcile charge %q: %w", op.Key, err)
		case out.Status == outcomeDeclined:
			a.writeChargeError(&rec, op.Request, errDeclined)
			return rec.settlement(), nil
		}
		gw = out.ID
	}
	ch, err := a.backend.RecordCharge(ctx, newCharge(c, op.Key, body, gw))
	if err != nil {
		return server.Settlement{}, fmt.Errorf("api: reconcile charge %q: %w", op.Key, err)
	}
	writeJSON(&rec, http.StatusCreated, ch)
	return rec.settlement(), nil
}

// settlement is the recorded response as a Completed settlement.
func (r *recorder) settlement() server.Settlement {
	return server.Settlement{Answer: server.Completed, Status: r.status, Header: r.header, Body: r.body.Bytes()}
}
