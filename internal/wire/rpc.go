package wire

import "net/http"

// RPCCode is a gRPC status code by number, and its Connect name; the
// numbers are google.rpc.Code's.
type RPCCode struct {
	Number  int
	Connect string
}

// The codes a refusal can carry.
var (
	CodeInvalidArgument    = RPCCode{3, "invalid_argument"}
	CodeFailedPrecondition = RPCCode{9, "failed_precondition"}
	CodeAborted            = RPCCode{10, "aborted"}
	CodeResourceExhausted  = RPCCode{8, "resource_exhausted"}
	CodeUnimplemented      = RPCCode{12, "unimplemented"}
	CodeInternal           = RPCCode{13, "internal"}
	CodeUnavailable        = RPCCode{14, "unavailable"}
	CodePermissionDenied   = RPCCode{7, "permission_denied"}
	CodeDeadlineExceeded   = RPCCode{4, "deadline_exceeded"}
)

// ProblemProtocolUnsupported names the refusal of a request in a protocol
// the HTTP middleware cannot protect (gRPC, gRPC-Web).
const ProblemProtocolUnsupported = "protocol-unsupported"

// RefusalCode is the RPC code of a refusal by its problem name, or by its
// HTTP status for a name it does not know (docs/CONTRACT.md §11): the
// gRPC interceptor's and the HTTP middleware's Connect answers share it.
func RefusalCode(name string, status int) RPCCode {
	switch name {
	case ProblemKeyMissing, ProblemKeyInvalid, "request-unreadable":
		return CodeInvalidArgument
	case ProblemKeyReused, ProblemOutcomeUncertain:
		// FAILED_PRECONDITION: not to be retried until the state is fixed
		// (another key; an operator's resolution).
		return CodeFailedPrecondition
	case "replay-forbidden":
		return CodePermissionDenied
	case "deadline-expired":
		return CodeDeadlineExceeded
	case ProblemKeyInFlight:
		return CodeAborted
	case ProblemResultUnavailable:
		return CodeInternal
	case "request-too-large":
		return CodeResourceExhausted
	case "store-unavailable", "commit-failed":
		return CodeUnavailable
	case ProblemProtocolUnsupported:
		return CodeUnimplemented
	}
	switch {
	case status == http.StatusServiceUnavailable:
		return CodeUnavailable
	case status == http.StatusConflict:
		return CodeAborted
	case status >= 400 && status < 500:
		return CodeInvalidArgument
	}
	return CodeInternal
}

// ConnectStatus is the HTTP status the Connect protocol gives a code.
func ConnectStatus(c RPCCode) int {
	switch c {
	case CodeInvalidArgument, CodeFailedPrecondition:
		return http.StatusBadRequest
	case CodeAborted:
		return http.StatusConflict
	case CodePermissionDenied:
		return http.StatusForbidden
	case CodeDeadlineExceeded:
		return http.StatusGatewayTimeout
	case CodeResourceExhausted:
		return http.StatusTooManyRequests
	case CodeUnimplemented:
		return http.StatusNotImplemented
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}

// RPCStatus is the HTTP status by which idem judges an RPC answer with
// the gRPC code number (docs/CONTRACT.md §11): grpc-gateway's table, but
// for CANCELED (1) and ABORTED (10), which ask for a retry and so count as
// failures, never stored.
func RPCStatus(code int) int {
	switch code {
	case 0:
		return http.StatusOK
	case 3, 9, 11: // INVALID_ARGUMENT, FAILED_PRECONDITION, OUT_OF_RANGE
		return http.StatusBadRequest
	case 16:
		return http.StatusUnauthorized
	case 7:
		return http.StatusForbidden
	case 5:
		return http.StatusNotFound
	case 6: // ALREADY_EXISTS
		return http.StatusConflict
	case 8:
		return http.StatusTooManyRequests
	case 12:
		return http.StatusNotImplemented
	case 14, 10: // UNAVAILABLE, ABORTED
		return http.StatusServiceUnavailable
	case 4:
		return http.StatusGatewayTimeout
	}
	return http.StatusInternalServerError // CANCELED, UNKNOWN, INTERNAL, DATA_LOSS
}

// ProblemStatus is the HTTP middleware's status for a refusal it names,
// def for a name it does not know: the client of an RPC reads a refusal
// by its ErrorInfo as the HTTP client reads the problem.
func ProblemStatus(name string, def int) int {
	switch name {
	case ProblemKeyMissing, ProblemKeyInvalid, "request-unreadable":
		return http.StatusBadRequest
	case ProblemKeyReused:
		return http.StatusUnprocessableEntity
	case ProblemKeyInFlight:
		return http.StatusConflict
	case ProblemResultUnavailable:
		return http.StatusInternalServerError
	case "store-unavailable":
		return http.StatusServiceUnavailable
	case "request-too-large":
		return http.StatusRequestEntityTooLarge
	case ProblemProtocolUnsupported:
		return http.StatusUnsupportedMediaType
	}
	return def
}
