package grpcidem

import (
	"context"
	"net/http"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/server"
)

// pushbackKey is gRFC A6's server pushback trailer, which grpc-go's own
// retry policy honours.
const pushbackKey = "grpc-retry-pushback-ms"

// UnaryServerInterceptor returns an interceptor that runs each keyed unary
// call at most once per key and scope and answers every retry with the
// stored result (see the package doc and docs/CONTRACT.md §11). store nil
// means a new [server.MemoryStore]. A call whose request is not a
// proto.Message, or whose method [Config.Methods] leaves out, passes
// through. The call's context governs the claim; the commit of a handler
// that finished runs even if the client has gone. It panics where
// [server.NewAdapter] does, and on a Config.Server with a KeyHeader. The
// interceptor is safe for concurrent use.
func UnaryServerInterceptor(store server.Store, cfg Config) grpc.UnaryServerInterceptor {
	if cfg.Server.KeyHeader != "" {
		panic("grpcidem: Config.Server.KeyHeader must be empty: the key is the idempotency-key metadata entry or Config.Key's")
	}
	i := &interceptor{a: server.NewAdapter(store, cfg.Server), cfg: cfg, allow: allowSet(cfg.Metadata)}
	return i.intercept
}

type interceptor struct {
	a     *server.Adapter
	cfg   Config
	allow map[string]bool
}

func (i *interceptor) intercept(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	msg, ok := req.(proto.Message)
	if !ok || (i.cfg.Methods != nil && !i.cfg.Methods(info.FullMethod)) {
		return handler(ctx, req)
	}
	body, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
	if err != nil {
		return nil, status.Errorf(codes.Internal, "grpcidem: encoding the request: %v", err)
	}
	ex := &exchange{ctx: ctx, req: req, method: info.FullMethod, scope: i.cfg.Scope, handler: handler, allow: i.allow}
	return i.answer(ctx, i.a.ServeCall(ctx, i.headers(ctx, req), body, ex), ex)
}

// headers is the key and the fingerprinted metadata entries as HTTP
// headers. Each entry is looked up alone, without a copy of all the
// call's metadata.
func (i *interceptor) headers(ctx context.Context, req any) http.Header {
	var keyOf func() string
	if i.cfg.Key != nil {
		keyOf = func() string { return i.cfg.Key(req) }
	}
	return rpcidem.CallHeader(keyOf, func(name string) []string {
		return metadata.ValueFromIncomingContext(ctx, strings.ToLower(name))
	}, i.cfg.Server.FingerprintHeaders)
}

// answer turns what the core made of the call into its answer: a
// refusal, a replay, or the handler's own answer with its metadata; each
// with where its operation stands.
func (i *interceptor) answer(ctx context.Context, ans server.CallAnswer, ex *exchange) (any, error) {
	if r := ans.Refusal; r != nil {
		var trailer metadata.MD
		if r.RetryAfter > 0 {
			trailer = metadata.Pairs(pushbackKey, strconv.FormatInt(r.RetryAfter.Milliseconds(), 10))
		}
		_ = send(ctx, outcome(r.Outcome), trailer)
		return nil, refusal(*r).Err()
	}
	if ans.Replay != nil {
		return i.replay(ctx, ans.Replay.Body, ans.Outcome)
	}
	if !ans.Ran {
		return nil, status.Error(codes.Internal, "grpcidem: the adapter answered neither with the handler nor with a refusal")
	}
	header, trailer := ex.stream.held()
	if err := send(ctx, metadata.Join(header, outcome(ans.Outcome)), trailer); err != nil {
		return nil, err
	}
	return ex.resp, ex.err
}

// replay answers with a stored result, marked in the header metadata,
// with where its operation stands.
func (i *interceptor) replay(ctx context.Context, body []byte, o server.Outcome) (any, error) {
	res, err := rpcidem.Decode(body)
	if err != nil {
		return nil, status.Error(codes.Internal, errCorrupt.Error())
	}
	header := metadata.Join(res.Header, metadata.Pairs(MetadataReplayed, "true"), outcome(o))
	if err := send(ctx, header, res.Trailer); err != nil {
		return nil, err
	}
	return storedAnswer(res)
}
