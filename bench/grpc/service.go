package main

import (
	"context"
	"math/rand/v2"
	"net"
	"sync"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/types/known/structpb"
)

// method is the payment RPC's full name: a unary call whose request and
// response are google.protobuf.Struct, registered through grpc's own
// ServiceDesc as generated code would.
const method = "/idem.bench.Payments/Pay"

// payments is the service: each run of Pay is one effect, counted by the
// request's "call" field (one per logical call, whatever the retries).
type payments struct {
	mu      sync.Mutex
	effects map[string]int
}

func (p *payments) pay(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error) {
	call := req.GetFields()["call"].GetStringValue()
	p.mu.Lock()
	p.effects[call]++
	n := len(p.effects)
	p.mu.Unlock()
	return structpb.NewStruct(map[string]any{"payment_id": float64(n), "call": call})
}

// doubles counts the calls whose effect ran more than once.
func (p *payments) doubles() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for _, e := range p.effects {
		if e > 1 {
			n++
		}
	}
	return n
}

type payer interface {
	pay(ctx context.Context, req *structpb.Struct) (*structpb.Struct, error)
}

var desc = grpc.ServiceDesc{
	ServiceName: "idem.bench.Payments",
	HandlerType: (*payer)(nil),
	Methods: []grpc.MethodDesc{{MethodName: "Pay", Handler: func(srv any, ctx context.Context, dec func(any) error, ic grpc.UnaryServerInterceptor) (any, error) {
		in := new(structpb.Struct)
		if err := dec(in); err != nil {
			return nil, err
		}
		h := func(ctx context.Context, req any) (any, error) { return srv.(payer).pay(ctx, req.(*structpb.Struct)) }
		if ic == nil {
			return h(ctx, in)
		}
		return ic(ctx, in, &grpc.UnaryServerInfo{Server: srv, FullMethod: method}, h)
	}}},
}

// serve serves a fresh payments service on loopback with the
// interceptors, until stop.
func serve(ics ...grpc.UnaryServerInterceptor) (addr string, p *payments, stop func(), err error) {
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, nil, err
	}
	p = &payments{effects: map[string]int{}}
	srv := grpc.NewServer(grpc.ChainUnaryInterceptor(ics...))
	srv.RegisterService(&desc, p)
	go func() { _ = srv.Serve(lis) }()
	return lis.Addr().String(), p, srv.Stop, nil
}

// dropper answers UNAVAILABLE in place of a share of the answers, after
// the call ran (and, behind idem, committed): a response lost on the way.
func dropper(share float64, seed uint64) grpc.UnaryServerInterceptor {
	var mu sync.Mutex
	rnd := rand.New(rand.NewPCG(seed, seed))
	return func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		mu.Lock()
		drop := rnd.Float64() < share
		mu.Unlock()
		if drop {
			return nil, status.Error(codes.Unavailable, "response dropped after the handler ran")
		}
		return resp, err
	}
}

// pay makes one call.
func pay(ctx context.Context, cc *grpc.ClientConn, call string) error {
	req, err := structpb.NewStruct(map[string]any{"call": call, "amount_cents": 1250.0})
	if err != nil {
		return err
	}
	return cc.Invoke(ctx, method, req, new(structpb.Struct))
}
