package grpcidem

import (
	"errors"
	"fmt"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protowire"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// contentType marks a stored result of this package.
const contentType = "application/x-idem-grpc-result"

// The fields of a stored result, a protobuf message of its own:
//
//	1 bytes  the response message (an OK answer)
//	2 string the response message's full type name
//	3 bytes  the google.rpc.Status (any other answer)
//	4 entry  a header metadata entry, repeated
//	5 entry  a trailer metadata entry, repeated
//
// An entry is 1 the key and 2 the value, both bytes.
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
	header   metadata.MD
	trailer  metadata.MD
}

// newResult is the answer (resp, err) with the allowed entries of header
// and trailer.
func newResult(resp any, err error, header, trailer metadata.MD, allow map[string]bool) (*result, error) {
	res := &result{header: allowed(header, allow), trailer: allowed(trailer, allow)}
	if err != nil {
		b, merr := proto.Marshal(status.Convert(err).Proto())
		res.status = b
		return res, merr
	}
	msg, ok := resp.(proto.Message)
	if !ok {
		return nil, fmt.Errorf("grpcidem: the handler answered a %T, not a proto.Message", resp)
	}
	b, merr := proto.Marshal(msg) // replayed as decoded: its bytes need not be deterministic
	res.response, res.typeName = b, string(msg.ProtoReflect().Descriptor().FullName())
	return res, merr
}

// allowed is the entries of md whose keys allow names.
func allowed(md metadata.MD, allow map[string]bool) metadata.MD {
	var out metadata.MD
	for k, vs := range md {
		if allow[k] {
			if out == nil {
				out = metadata.MD{}
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
	b = appendMD(b, fieldHeader, res.header)
	return appendMD(b, fieldTrailer, res.trailer)
}

func appendMD(b []byte, field protowire.Number, md metadata.MD) []byte {
	for k, vs := range md {
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

var errCorrupt = errors.New("grpcidem: the stored result is not one of this package's")

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

func addEntry(md metadata.MD, b []byte) (metadata.MD, error) {
	var kv [2]string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		v, m := protowire.ConsumeBytes(b[max(n, 0):])
		if n < 0 || m < 0 || typ != protowire.BytesType || num < 1 || num > 2 {
			return nil, errCorrupt
		}
		kv[num-1], b = string(v), b[n+m:]
	}
	if md == nil {
		md = metadata.MD{}
	}
	md[kv[0]] = append(md[kv[0]], kv[1])
	return md, nil
}

// answer is the stored answer: the response message, of the type the
// result names (which must be linked into the program, as generated code
// is), or the status as an error; INTERNAL when it cannot be read.
func (res *result) answer() (any, error) {
	if res.status != nil {
		var st spb.Status
		if err := proto.Unmarshal(res.status, &st); err != nil {
			return nil, status.Error(codes.Internal, errCorrupt.Error())
		}
		return nil, status.ErrorProto(&st)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(res.typeName))
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpcidem: the stored response's type %s is not linked in: %v", res.typeName, err)
	}
	msg := mt.New().Interface()
	if err := proto.Unmarshal(res.response, msg); err != nil {
		return nil, status.Error(codes.Internal, errCorrupt.Error())
	}
	return msg, nil
}
