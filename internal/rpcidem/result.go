package rpcidem

import (
	"errors"

	"google.golang.org/protobuf/encoding/protowire"
)

// The fields of a stored result, a protobuf message of its own:
//
//	1 bytes  the response message (an OK answer)
//	2 string the response message's full type name
//	3 bytes  the google.rpc.Status (any other answer)
//	4 entry  a header (metadata) entry, repeated
//	5 entry  a trailer entry, repeated
//
// An entry is 1 the key and 2 the value, both bytes.
const (
	fieldResponse protowire.Number = iota + 1
	fieldType
	fieldStatus
	fieldHeader
	fieldTrailer
)

// ErrCorrupt is what Decode returns for bytes that are no stored result.
var ErrCorrupt = errors.New("rpcidem: the stored result is not one of this package's")

// Result is one call's answer as it is stored and replayed: either the
// response message (Response and TypeName) or a status (Status), and the
// header and trailer entries the adapter allowed. Header and Trailer are
// gRPC metadata or HTTP headers, as the adapter keeps them.
type Result struct {
	Response []byte
	TypeName string
	Status   []byte
	Header   map[string][]string
	Trailer  map[string][]string
}

// Allowed is the entries of m whose keys allow names, or nil when there
// is none.
func Allowed[M ~map[string][]string](m M, allow map[string]bool) M {
	var out M
	for k, vs := range m {
		if allow[k] {
			if out == nil {
				out = M{}
			}
			out[k] = vs
		}
	}
	return out
}

// Encode is the result as stored.
func (res *Result) Encode() []byte {
	var b []byte
	if res.Status != nil {
		b = protowire.AppendTag(b, fieldStatus, protowire.BytesType)
		b = protowire.AppendBytes(b, res.Status)
	} else {
		b = protowire.AppendTag(b, fieldResponse, protowire.BytesType)
		b = protowire.AppendBytes(b, res.Response)
		b = protowire.AppendTag(b, fieldType, protowire.BytesType)
		b = protowire.AppendString(b, res.TypeName)
	}
	b = appendEntries(b, fieldHeader, res.Header)
	return appendEntries(b, fieldTrailer, res.Trailer)
}

func appendEntries(b []byte, field protowire.Number, m map[string][]string) []byte {
	for k, vs := range m {
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

// Decode reads a stored result; it returns ErrCorrupt when b is not one.
func Decode(b []byte) (*Result, error) {
	res := &Result{}
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 || typ != protowire.BytesType {
			return nil, ErrCorrupt
		}
		v, m := protowire.ConsumeBytes(b[n:])
		if m < 0 {
			return nil, ErrCorrupt
		}
		b = b[n+m:]
		var err error
		switch num {
		case fieldResponse:
			res.Response = v
		case fieldType:
			res.TypeName = string(v)
		case fieldStatus:
			res.Status = v
		case fieldHeader:
			res.Header, err = addEntry(res.Header, v)
		case fieldTrailer:
			res.Trailer, err = addEntry(res.Trailer, v)
		}
		if err != nil {
			return nil, err
		}
	}
	return res, nil
}

func addEntry(m map[string][]string, b []byte) (map[string][]string, error) {
	var kv [2]string
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		v, l := protowire.ConsumeBytes(b[max(n, 0):])
		if n < 0 || l < 0 || typ != protowire.BytesType || num < 1 || num > 2 {
			return nil, ErrCorrupt
		}
		kv[num-1], b = string(v), b[n+l:]
	}
	if m == nil {
		m = map[string][]string{}
	}
	m[kv[0]] = append(m[kv[0]], kv[1])
	return m, nil
}
