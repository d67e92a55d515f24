package grpcidem

import (
	"errors"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idem/internal/rpcidem"
)

// contentType marks a stored result of this package (its encoding is
// rpcidem's).
const contentType = "application/x-idem-grpc-result"

var errCorrupt = errors.New("grpcidem: the stored result is not one of this package's")

// newResult is the answer (resp, err) with the allowed entries of header
// and trailer.
func newResult(resp any, err error, header, trailer metadata.MD, allow map[string]bool) (*rpcidem.Result, error) {
	res := &rpcidem.Result{Header: rpcidem.Allowed(header, allow), Trailer: rpcidem.Allowed(trailer, allow)}
	if err != nil {
		return res, res.SetStatus(status.Convert(err).Proto())
	}
	msg, ok := resp.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("grpcidem: the handler answered a %T, not a proto.Message", resp)
	}
	return res, res.SetMessage(msg)
}

// storedAnswer is the answer res stores: the response message, of the type the
// result names (which must be linked into the program, as generated code
// is), or the status as an error; INTERNAL when it cannot be read.
func storedAnswer(res *rpcidem.Result) (any, error) {
	if res.Status != nil {
		st, err := res.DecodeStatus()
		if err != nil {
			return nil, status.Error(codes.Internal, errCorrupt.Error())
		}
		return nil, status.ErrorProto(st)
	}
	mt, err := res.MessageType()
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpcidem: the stored response's type %s is not linked in: %v", res.TypeName, err)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(res.Response, msg); err != nil {
		return nil, status.Error(codes.Internal, errCorrupt.Error())
	}
	return msg, nil
}
