package connectidem

import (
	"errors"
	"net/http"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"

	"github.com/idemkit/idem/internal/rpcidem"
)

// contentType marks a stored result of this package (its encoding is
// rpcidem's).
const contentType = "application/x-idem-connect-result"

var errCorrupt = errors.New("connectidem: the stored result is not one of this package's")

// newResult is the answer (resp, err) with its allowed headers and
// trailers.
func newResult(resp connect.AnyResponse, err error, allow map[string]bool) (*rpcidem.Result, error) {
	if err != nil {
		res := &rpcidem.Result{}
		var ce *connect.Error
		if errors.As(err, &ce) {
			res.Header = rpcidem.Allowed(ce.Meta(), allow)
		}
		return res, res.SetStatus(statusOf(err))
	}
	res := &rpcidem.Result{Header: rpcidem.Allowed(resp.Header(), allow), Trailer: rpcidem.Allowed(resp.Trailer(), allow)}
	msg, ok := resp.Any().(proto.Message)
	if !ok {
		return nil, errors.New("connectidem: the handler answered a message that is not a proto.Message")
	}
	return res, res.SetMessage(msg)
}

// statusOf is err as a google.rpc.Status.
func statusOf(err error) *spb.Status {
	st := &spb.Status{Code: int32(connect.CodeOf(err)), Message: err.Error()}
	var ce *connect.Error
	if errors.As(err, &ce) {
		st.Message = ce.Message()
		for _, d := range ce.Details() {
			st.Details = append(st.Details, &anypb.Any{TypeUrl: "type.googleapis.com/" + d.Type(), Value: d.Bytes()})
		}
	}
	return st
}

// storedAnswer is the answer res stores: the response message as a
// *dynamicpb.Message of the stored type, or the error; an internal error
// when it cannot be read.
func storedAnswer(res *rpcidem.Result) (connect.AnyResponse, error) {
	if res.Status != nil {
		st, err := res.DecodeStatus()
		if err != nil {
			return nil, connect.NewError(connect.CodeInternal, errCorrupt)
		}
		ce := connect.NewError(connect.Code(st.GetCode()), errors.New(st.GetMessage()))
		for _, a := range st.GetDetails() {
			if d, err := connect.NewErrorDetail(a); err == nil {
				ce.AddDetail(d)
			}
		}
		copyHeader(ce.Meta(), res.Header)
		return nil, ce
	}
	mt, err := res.MessageType()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, errors.New("connectidem: the stored response's type "+res.TypeName+" is not linked in"))
	}
	msg := dynamicpb.NewMessage(mt.Descriptor())
	if err := proto.Unmarshal(res.Response, msg); err != nil {
		return nil, connect.NewError(connect.CodeInternal, errCorrupt)
	}
	resp := connect.NewResponse(msg)
	copyHeader(resp.Header(), res.Header)
	copyHeader(resp.Trailer(), res.Trailer)
	return resp, nil
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k], vs...)
	}
}
