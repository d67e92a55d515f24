package wire

import (
	"encoding/binary"
	"slices"
	"strings"
)

// The protobuf encodings of the error details a refusal carries, written
// by hand so that the root module needs no protobuf dependency.

// ErrorDomain is the domain of a refusal's google.rpc.ErrorInfo; its
// reason is the problem name in upper snake case, its metadata "problem"
// entry the name itself.
const ErrorDomain = "idem"

// Detail is an error detail: a google.protobuf.Any's type and value.
type Detail struct {
	Type  string // the message's full name, google.rpc.RetryInfo
	Value []byte // the message's protobuf encoding
}

// The ErrorInfo metadata entries of a refusal that say where its
// operation stands (docs/CONTRACT.md §11), beside "problem", in the
// lowerCamelCase ErrorInfo asks for.
const (
	InfoOperationState = "operationState"
	InfoOperationRef   = "operationRef"
	InfoSafeNewKey     = "safeNewKey"
	InfoKeyExpires     = "keyExpires"
)

// RefusalDetails are the details of a refusal: a google.rpc.ErrorInfo
// whose metadata are "problem" and the entries of outcome (InfoOperationState,
// ...), and a google.rpc.RetryInfo when retryAfter (seconds) is positive.
func RefusalDetails(name string, retryAfter int64, outcome map[string]string) []Detail {
	var info []byte
	info = appendBytes(info, 1, []byte(strings.ToUpper(strings.ReplaceAll(name, "-", "_"))))
	info = appendBytes(info, 2, []byte(ErrorDomain))
	info = appendEntry(info, "problem", name)
	keys := make([]string, 0, len(outcome))
	for k := range outcome {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		info = appendEntry(info, k, outcome[k])
	}
	ds := []Detail{{Type: "google.rpc.ErrorInfo", Value: info}}
	if retryAfter > 0 {
		var dur []byte
		dur = binary.AppendUvarint(append(dur, 1<<3), uint64(retryAfter)) // Duration.seconds: field 1, varint
		ds = append(ds, Detail{Type: "google.rpc.RetryInfo", Value: appendBytes(nil, 1, dur)})
	}
	return ds
}

// StatusProto is the encoding of a google.rpc.Status.
func StatusProto(code int, message string, details []Detail) []byte {
	var b []byte
	b = binary.AppendUvarint(append(b, 1<<3), uint64(code)) // Status.code: field 1, varint
	b = appendBytes(b, 2, []byte(message))
	for _, d := range details {
		var anyMsg []byte
		anyMsg = appendBytes(anyMsg, 1, []byte("type.googleapis.com/"+d.Type))
		anyMsg = appendBytes(anyMsg, 2, d.Value)
		b = appendBytes(b, 3, anyMsg)
	}
	return b
}

// appendEntry appends an entry of ErrorInfo's metadata map (field 3).
func appendEntry(info []byte, key, value string) []byte {
	var entry []byte
	entry = appendBytes(entry, 1, []byte(key))
	entry = appendBytes(entry, 2, []byte(value))
	return appendBytes(info, 3, entry)
}

// appendBytes appends a length-delimited field.
func appendBytes(b []byte, field int, v []byte) []byte {
	b = binary.AppendUvarint(b, uint64(field)<<3|2)
	b = binary.AppendUvarint(b, uint64(len(v)))
	return append(b, v...)
}
