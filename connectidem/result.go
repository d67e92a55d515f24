package connectidem

import (
	"errors"
	"net/http"

	"connectrpc.com/connect"
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
	"google.golang.org/protobuf/types/dynamicpb"
	"google.golang.org/protobuf/types/known/anypb"
)

// contentType marks a stored result of this package.
const contentType = "application/x-idem-connect-result"

// The fields of a stored result, a protobuf message of its own: 1 the
// response message, 2 its full type name, 3 the google.rpc.Status of an
// error, 4 a header and 5 a trailer entry (repeated; 1 the name, 2 the
// value).
const (
	fieldResponse protowire.Number = iota + 1
	fieldType
	fieldStatus
	fieldHeader
	fieldTrailer
)

// result is one call's answer as it is stored and replayed.
type result struct {
	response []byte
	typeName string
	status   []byte
	header   http.Header
	trailer  http.Header
}

var errCorrupt = errors.New("connectidem: the stored result is not one of this package's")

// newResult is the answer (resp, err) with its allowed headers and
// trailers.
func newResult(resp connect.AnyResponse, err error, allow map[string]bool) (*result, error) {
	if err != nil {
		res := &result{}
		var ce *connect.Error
		if errors.As(err, &ce) {
			res.header = allowed(ce.Meta(), allow)
		}
		b, merr := proto.Marshal(statusOf(err))
		res.status = b
		return res, merr
	}
	res := &result{header: allowed(resp.Header(), allow), trailer: allowed(resp.Trailer(), allow)}
	msg, ok := resp.Any().(proto.Message)
	if !ok {
		return nil, errors.New("connectidem: the handler answered a message that is not a proto.Message")
	}
	b, merr := proto.Marshal(msg) // replayed as decoded: its bytes need not be deterministic
	res.response, res.typeName = b, string(msg.ProtoReflect().Descriptor().FullName())
	return res, merr
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

func allowed(h http.Header, allow map[string]bool) http.Header {
	var out http.Header
	for k, vs := range h {
		if allow[k] {
			if out == nil {
				out = http.Header{}
			}
			out[k] = vs
		}
	}
	return out
}

func (res *result) encode() []byte {
	var b []byte
	if res.status != nil {
		b = protowire.AppendTag(b, fieldStatus, protowire.BytesType)
		b = protowire.AppendBytes(b, res.status)
	} else {
		b = protowire.AppendTag(b, fieldResponse, protowire.BytesType)
		b = protowire.AppendBytes(b, res.response)
		b = protowire.AppendTag(b, fieldType, protowire.BytesType)
		b = protowire.AppendString(b, res.typeName)
	}
	b = appendHeader(b, fieldHeader, res.header)
	return appendHeader(b, fieldTrailer, res.trailer)
}

func appendHeader(b []byte, field protowire.Number, h http.Header) []byte {
	for k, vs := range h {
		for _, v := range vs {
			var e []byte
			e = protowire.AppendTag(e, 1, protowire.BytesType)
			e = protowire.AppendString(e, k)
			e = protowire.AppendTag(e, 2, protowire.BytesType)
			e = protowire.AppendString(e, v)
			b = protowire.AppendTag(b, field, protowire.BytesType)
			b = protowire.AppendBytes(b, e)
		}
	}
	return b
}

// decodeResult reads a stored result.
func decodeResult(b []byte) (*result, error) {
	res := &result{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, errCorrupt
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, errCorrupt
		}
		b = b[n+m:]
		var err error
		switch num {
		case fieldResponse:
			res.response = v
		case fieldType:
			res.typeName = string(v)
		case fieldStatus:
			res.status = v
		case fieldHeader:
			res.header, err = addEntry(res.header, v)
		case fieldTrailer:
			res.trailer, err = addEntry(res.trailer, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

func addEntry(h http.Header, b []byte) (http.Header, error) {
	var kv [2]string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		v, m := protowire.ConsumeBytes(b[max(n, 0):])
		if n < 0 || m < 0 || typ != protowire.BytesType || num < 1 || num > 2 {
			return nil, errCorrupt
		}
		kv[num-1], b = string(v), b[n+m:]
	}
	if h == nil {
		h = http.Header{}
	}
	h[kv[0]] = append(h[kv[0]], kv[1])
	return h, nil
}

// answer is the stored answer: the response message as a
// *dynamicpb.Message of the stored type, or the error; an internal error
// when it cannot be read.
func (res *result) answer() (connect.AnyResponse, error) {
	if res.status != nil {
		var st spb.Status
		if err := proto.Unmarshal(res.status, &st); err != nil {
			return nil, connect.NewError(connect.CodeInternal, errCorrupt)
		}
		ce := connect.NewError(connect.Code(st.GetCode()), errors.New(st.GetMessage()))
		for _, a := range st.GetDetails() {
			if d, err := connect.NewErrorDetail(a); err == nil {
				ce.AddDetail(d)
			}
		}
		copyHeader(ce.Meta(), res.header)
		return nil, ce
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(res.typeName))
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, errors.New("connectidem: the stored response's type "+res.typeName+" is not linked in"))
	}
	msg := dynamicpb.NewMessage(mt.Descriptor())
	if err := proto.Unmarshal(res.response, msg); err != nil {
		return nil, connect.NewError(connect.CodeInternal, errCorrupt)
	}
	resp := connect.NewResponse(msg)
	copyHeader(resp.Header(), res.header)
	copyHeader(resp.Trailer(), res.trailer)
	return resp, nil
}

func copyHeader(dst, src http.Header) {
	for k, vs := range src {
		dst[k] = append(dst[k], vs...)
	}
}
