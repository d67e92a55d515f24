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
	case ProblemKeyReused:
		return CodeFailedPrecondition
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
	case CodeResourceExhausted:
		return http.StatusTooManyRequests
	case CodeUnimplemented:
		return http.StatusNotImplemented
	case CodeUnavailable:
		return http.StatusServiceUnavailable
	}
	return http.StatusInternalServerError
}
