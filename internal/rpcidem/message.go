package rpcidem

import (
	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"
)

// SetMessage stores msg as the response, with its full type name. Its
// bytes need not be deterministic: a replay decodes them.
func (res *Result) SetMessage(msg proto.Message) error {
	b, err := proto.Marshal(msg)
	res.Response, res.TypeName = b, string(msg.ProtoReflect().Descriptor().FullName())
	return err
}

// SetStatus stores st as the answer.
func (res *Result) SetStatus(st *spb.Status) error {
	b, err := proto.Marshal(st)
	res.Status = b
	return err
}

// DecodeStatus is the stored status; ErrCorrupt when it cannot be read.
func (res *Result) DecodeStatus() (*spb.Status, error) {
	var st spb.Status
	if err := proto.Unmarshal(res.Status, &st); err != nil {
		return nil, ErrCorrupt
	}
	return &st, nil
}

// MessageType is the stored response's type, which must be linked into
// the program (as generated code is).
func (res *Result) MessageType() (protoreflect.MessageType, error) {
	return protoregistry.GlobalTypes.FindMessageByName(protoreflect.FullName(res.TypeName))
}
