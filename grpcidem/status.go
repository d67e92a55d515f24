package grpcidem

import (
	"strings"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo of every refusal;
// its reason is the problem name in upper snake case (KEY_IN_FLIGHT), and
// its metadata "problem" entry the name itself (key-in-flight).
const ErrorDomain = wire.ErrorDomain

// httpStatus is the HTTP status by which the core judges a handler's
// answer with code c (docs/CONTRACT.md §11).
func httpStatus(c codes.Code) int { return wire.RPCStatus(int(c)) }

// refusal is the status that answers a refusal of the core, with an
// ErrorInfo and, when the refusal says to wait, a RetryInfo.
func refusal(r server.Refusal) *status.Status {
	msg := r.Title
	if r.Detail != "" {
		msg += ": " + r.Detail
	}
	st := status.New(codes.Code(wire.RefusalCode(r.Problem, r.Status).Number), msg)
	info := &errdetails.ErrorInfo{
		Reason:   strings.ToUpper(strings.ReplaceAll(r.Problem, "-", "_")),
		Domain:   ErrorDomain,
		Metadata: map[string]string{"problem": r.Problem},
	}
	var withDetails *status.Status
	var err error
	if r.RetryAfter > 0 {
		withDetails, err = st.WithDetails(info, &errdetails.RetryInfo{RetryDelay: durationpb.New(r.RetryAfter)})
	} else {
		withDetails, err = st.WithDetails(info)
	}
	if err != nil {
		return st
	}
	return withDetails
}
