package grpcidem

import (
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// ErrorDomain is the domain of the google.rpc.ErrorInfo of every refusal;
// its reason is the problem name in upper snake case (KEY_IN_FLIGHT), its
// metadata "problem" entry the name itself (key-in-flight), and its
// operationState, operationRef, safeNewKey and keyExpires entries say
// where the operation stands, as the header metadata does.
const ErrorDomain = wire.ErrorDomain

// httpStatus is the HTTP status by which the core judges a handler's
// answer with code c (docs/CONTRACT.md §11).
func httpStatus(c codes.Code) int { return wire.RPCStatus(int(c)) }

// outcome is o as header metadata (docs/CONTRACT.md §11), nil when o
// says nothing.
func outcome(o server.Outcome) metadata.MD {
	entries := rpcidem.OutcomeEntries(o)
	if entries == nil {
		return nil
	}
	return metadata.New(entries)
}

// refusal is the status that answers a refusal of the core, with an
// ErrorInfo and, when the refusal says to wait, a RetryInfo.
func refusal(r server.Refusal) *status.Status {
	msg := r.Title
	if r.Detail != "" {
		msg += ": " + r.Detail
	}
	st := status.New(codes.Code(wire.RefusalCode(r.Problem, r.Status).Number), msg)
	info := rpcidem.ErrorInfo(r)
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
