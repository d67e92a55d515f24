package rpcidem

import (
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// The metadata entries that say where a call's operation stands
// (docs/CONTRACT.md §11): the HTTP headers of §4, lower-cased, as gRPC
// metadata keys are.
const (
	MetadataOperationState = "idempotency-operation-state"
	MetadataOperationRef   = "idempotency-operation-ref"
	MetadataSafeNewKey     = "idempotency-safe-new-key"
	MetadataKeyExpires     = "idempotency-key-expires"
)

// OutcomeEntries is o as metadata entries, by their lower-cased names
// (a state, the safe-new-key flag, and the reference and the key's
// expiry, an HTTP-date, when o has them); nil when o says nothing (a call
// that passed through).
func OutcomeEntries(o server.Outcome) map[string]string {
	if o.State == "" {
		return nil
	}
	m := map[string]string{MetadataOperationState: o.State, MetadataSafeNewKey: strconv.FormatBool(o.SafeNewKey)}
	if o.Ref != "" {
		m[MetadataOperationRef] = o.Ref
	}
	if !o.Expires.IsZero() {
		m[MetadataKeyExpires] = o.Expires.UTC().Format(http.TimeFormat)
	}
	return m
}

// ErrorInfo is the google.rpc.ErrorInfo of a refusal: domain idem, the
// problem as its reason in upper snake case and as its "problem" entry,
// and where the operation stands (wire.InfoOperationState, ...).
func ErrorInfo(r server.Refusal) *errdetails.ErrorInfo {
	md := map[string]string{"problem": r.Problem}
	for name, v := range OutcomeEntries(r.Outcome) {
		md[infoName[name]] = v
	}
	return &errdetails.ErrorInfo{
		Reason:   strings.ToUpper(strings.ReplaceAll(r.Problem, "-", "_")),
		Domain:   wire.ErrorDomain,
		Metadata: md,
	}
}

// infoName is the ErrorInfo entry of each outcome metadata entry.
var infoName = map[string]string{
	MetadataOperationState: wire.InfoOperationState,
	MetadataOperationRef:   wire.InfoOperationRef,
	MetadataSafeNewKey:     wire.InfoSafeNewKey,
	MetadataKeyExpires:     wire.InfoKeyExpires,
}

// CopyOutcome sets on h, an attempt's answer as idem's client judges it,
// the outcome entries of md (metadata or an http.Header, whatever the
// case of its names), so that the client's errors say where the operation
// stands as they do over HTTP.
func CopyOutcome[M ~map[string][]string](h http.Header, md M) {
	for k, vs := range md {
		if _, ok := infoName[strings.ToLower(k)]; ok && len(vs) > 0 {
			h.Set(k, vs[0])
		}
	}
}
