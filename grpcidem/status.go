package grpcidem

import (
	"strconv"
	"strings"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idem/internal/wire"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo of every refusal;
// its reason is the problem name in upper snake case (KEY_IN_FLIGHT), and
// its metadata "problem" entry the name itself (key-in-flight).
const ErrorDomain = wire.ErrorDomain

// httpStatus is the HTTP status by which the core judges a handler's
// answer with code c (docs/CONTRACT.md §11).
func httpStatus(c codes.Code) int { return wire.RPCStatus(int(c)) }

// refusalCode is the code of a refusal by the core, by its problem name,
// or by its HTTP status for a name this version does not know: the table
// the HTTP middleware's Connect and gRPC answers use too.
func refusalCode(p wire.Problem) codes.Code {
	return codes.Code(wire.RefusalCode(p.Name(), p.Status).Number)
}

// refusal is the status that answers a problem of the core, with an
// ErrorInfo and, when the problem says to wait (retryAfter > 0), a
// RetryInfo.
func refusal(p wire.Problem, retryAfter time.Duration) *status.Status {
	msg := p.Title
	if p.Detail != "" {
		msg += ": " + p.Detail
	}
	st := status.New(refusalCode(p), msg)
	name := p.Name()
	info := &errdetails.ErrorInfo{
		Reason:   strings.ToUpper(strings.ReplaceAll(name, "-", "_")),
		Domain:   ErrorDomain,
		Metadata: map[string]string{"problem": name},
	}
	var withDetails *status.Status
	var err error
	if retryAfter > 0 {
		withDetails, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(retryAfter)})
	} else {
		withDetails, err = st.WithDetails(info)
	}
	if err != nil {
		return st
	}
	return withDetails
}

// retryAfter reads a problem's wait: its retry_after member, else its
// Retry-After header in seconds; 0 when it says none.
func retryAfter(p wire.Problem, header string) time.Duration {
	if p.RetryAfter > 0 {
		return time.Duration(p.RetryAfter) * time.Second
	}
	if n, err := strconv.ParseInt(header, 10, 64); err == nil && n > 0 {
		return time.Duration(n) * time.Second
	}
	return 0
}
