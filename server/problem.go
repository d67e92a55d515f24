package server

import (
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idem/internal/dberr"
	"github.com/idemkit/idem/internal/wire"
)

// Problem names of this package beyond the contract's: they carry statuses
// that the client already treats by status (413 is final; 500 and 503 are
// retried with the same key, which is safe).
const (
	problemTooLarge         = "request-too-large"  // 413: the body is over MaxRequestBytes
	problemUnreadable       = "request-unreadable" // 400: reading the body failed
	problemStoreUnavailable = "store-unavailable"  // 503: the claim failed; nothing ran
	problemScopeUnstorable  = "scope-unstorable"   // 400: the store cannot keep the request's scope (ErrUnstorableScope); nothing ran
	problemCommitFailed     = "commit-failed"      // 500, or 503 when the store was lost: the outcome did not commit (or is unknown)
	problemReplayForbidden  = "replay-forbidden"   // 403: Config.AuthorizeReplay refused the caller a stored response
	problemDeadlineExpired  = "deadline-expired"   // 504: the client's deadline passed before the request arrived; nothing ran
)

// problem is a problem the middleware answers with.
type problem struct {
	status     int
	name       string
	title      string
	detail     string
	retryAfter int64 // seconds, sent as Retry-After and retry_after when > 0
	// st is where the operation stands (state and safe set by the
	// problem's constructor, the reference by the caller), sent as
	// headers and as the members operation_state, operation_ref and
	// safe_new_key.
	st standing
}

func (s *settings) writeProblem(w http.ResponseWriter, p problem) {
	doc := wire.Problem{Type: s.ProblemPrefix + p.name, Title: p.title, Status: p.status, Detail: p.detail,
		OperationState: p.st.state, OperationRef: p.st.ref, SafeNewKey: &p.st.safe}
	p.st.write(w.Header())
	if p.retryAfter > 0 {
		doc.RetryAfter = p.retryAfter
		w.Header().Set(wire.HeaderRetryAfter, strconv.FormatInt(p.retryAfter, 10))
	}
	wire.WriteProblem(w, doc)
}

func keyMissing(route string) problem {
	return problem{st: nothingDone(""), status: http.StatusBadRequest, name: wire.ProblemKeyMissing, title: "Idempotency-Key required",
		detail: route + " requires an Idempotency-Key header: one key (a UUID) per operation, the same on every retry"}
}

func keyInvalid(why string) problem {
	return problem{st: nothingDone(""), status: http.StatusBadRequest, name: wire.ProblemKeyInvalid, title: "Invalid Idempotency-Key", detail: why}
}

func keyReused() problem {
	return problem{st: nothingDone(""), status: http.StatusUnprocessableEntity, name: wire.ProblemKeyReused, title: "Idempotency-Key reused",
		detail: "this key was already used for a different request (method, path, body or selected headers); use a new key for a new operation"}
}

// keyInFlight is the 409 answer, to retry after the given time in whole
// seconds, at least one.
func keyInFlight(retryAfter time.Duration) problem {
	return problem{st: standing{state: wire.StateInFlight}, status: http.StatusConflict, name: wire.ProblemKeyInFlight, title: "Request in progress",
		detail:     "a request with this key is still being processed; retry after Retry-After seconds with the same key",
		retryAfter: wire.RetryAfterSeconds(retryAfter)}
}

func resultUnavailable() problem {
	return problem{st: standing{state: wire.StateUnavailable}, status: http.StatusInternalServerError, name: wire.ProblemResultUnavailable, title: "Result unavailable",
		detail: "the operation with this key completed, but its response was too large or streamed and was not stored; it will not run again"}
}

func tooLarge(limit int64) problem {
	return problem{st: nothingDone(""), status: http.StatusRequestEntityTooLarge, name: problemTooLarge, title: "Request body too large",
		detail: "the request body is larger than " + strconv.FormatInt(limit, 10) + " bytes"}
}

func unreadable(err error) problem {
	return problem{st: nothingDone(""), status: http.StatusBadRequest, name: problemUnreadable, title: "Request body unreadable",
		detail: "the request body could not be read: " + err.Error()}
}

func deadlineExpired(header string) problem {
	return problem{st: standing{state: wire.StateUnknown}, status: http.StatusGatewayTimeout, name: problemDeadlineExpired, title: "Deadline expired",
		detail: "the request's " + header + " says that its client stopped waiting before it arrived; it was not processed, and a retry with the same key will be"}
}

func scopeUnstorable(err error) problem {
	return problem{st: nothingDone(""), status: http.StatusBadRequest, name: problemScopeUnstorable, title: "Scope cannot be stored",
		detail: "the tenant, principal or route that this request is made for cannot be kept by the idempotency store (" + err.Error() +
			"); it was not processed, and a retry of the same request will not be either"}
}

func storeUnavailable() problem {
	return problem{st: standing{state: wire.StateUnknown}, status: http.StatusServiceUnavailable, name: problemStoreUnavailable, title: "Idempotency store unavailable",
		detail: "the request was not processed; retry with the same key", retryAfter: 1}
}

// commitFailed is the answer for an outcome that could not be committed
// (err says why): 503 with Retry-After 1 when the store was lost on the
// way (its connection broke, it shut down or became a standby, or the
// commit outlasted its bound), as in a failover, which the retry must wait
// out; 500 for anything else. The name is commit-failed either way: the
// outcome is unknown, unlike store-unavailable's.
func commitFailed(err error) problem {
	p := problem{st: standing{state: wire.StateUnknown}, status: http.StatusInternalServerError, name: problemCommitFailed, title: "Outcome not committed",
		detail: "the operation's outcome could not be committed; retry with the same key to learn it or run it again"}
	if dberr.Unreachable(err) { // the commit's own bound passing included
		p.status, p.retryAfter = http.StatusServiceUnavailable, 1
		p.detail = "the store was lost while the operation's outcome was committed, which may or may not have happened; " +
			"retry after Retry-After seconds with the same key to learn it or run it again"
	}
	return p
}

// outcomeUncertain is the 409 of an operation whose outcome no one could
// tell, which waits for an operator: no Retry-After, since waiting does not
// settle it (docs/CONTRACT.md §6).
func outcomeUncertain() problem {
	return problem{st: standing{state: wire.StateUncertain}, status: http.StatusConflict,
		name: wire.ProblemOutcomeUncertain, title: "Outcome uncertain",
		detail: "the operation with this key may or may not have taken effect, and an operator must settle it; " +
			"do not send it again under a new key: quote the operation reference to support"}
}

// replayForbidden is the answer to a retry whose caller [Config.AuthorizeReplay]
// refused: no stored response is sent, and the operation's state is not told.
func replayForbidden() problem {
	return problem{st: standing{state: wire.StateUnknown}, status: http.StatusForbidden,
		name: problemReplayForbidden, title: "Replay not authorized",
		detail: "the caller is not authorized to receive this operation's stored response"}
}
