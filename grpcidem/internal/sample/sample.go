// Package sample is the payment service that grpcidem's tests, its
// conformance run and its benchmark serve: one unary method whose request
// and response are google.protobuf.Struct, so that it needs no generated
// code, registered through grpc's own ServiceDesc as generated code would.
package sample

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/types/known/structpb"
)

// Method is the full name of the service's one method.
const Method = "/idem.sample.Payments/Pay"

// Payer is the service's implementation.
type Payer interface {
	Pay(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error)
}

// PayFunc is a [Payer] from a function.
type PayFunc func(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error)

// Pay calls f.
func (f PayFunc) Pay(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	return f(ctx, req)
}

// desc is the service as protoc-gen-go-grpc would describe it.
var desc = grpc.ServiceDesc{
	ServiceName: "idem.sample.Payments",
	HandlerType: (*Payer)(nil),
	Methods:     []grpc.MethodDesc{{MethodName: "Pay", Handler: payHandler}},
	Metadata:    "sample.proto",
}

func payHandler(srv any, ctx context.Context, dec func(any) error, interceptor grpc.UnaryServerInterceptor) (any, error) {
	in := new(structpb.Struct)
	if err := dec(in); err != nil {
		return nil, err
	}
	h := func(ctx context.Context, req any) (any, error) { return srv.(Payer).Pay(ctx, req.(*structpb.Struct)) }
	if interceptor == nil {
		return h(ctx, in)
	}
	return interceptor(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: Method}, h)
}

// Register registers p on s.
func Register(s grpc.ServiceRegistrar, p Payer) { s.RegisterService(&desc, p) }

// Pay calls the service's method on cc.
func Pay(ctx context.Context, cc grpc.ClientConnInterface, req *structpb.Struct, opts ...grpc.CallOption) (*structpb.Struct, error) {
	out := new(structpb.Struct)
	if err := cc.Invoke(ctx, Method, req, out, opts...); err != nil {
		return nil, err
	}
	return out, nil
}
