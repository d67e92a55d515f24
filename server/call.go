package server

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/url"
)

// CallAnswer is what the middleware made of one call that [Adapter.ServeCall]
// served. At most one of Refusal and Replay is set; when neither is and
// Ran is true, the handler's own answer, as [Exchange.Next] got it,
// stands.
type CallAnswer struct {
	Refusal *Refusal  // the call was refused (docs/CONTRACT.md §4)
	Replay  *Response // the stored response a retry gets; it must not be modified
	Outcome Outcome   // where the operation stands, for every answer
	Ran     bool      // ex's Next ran the handler
}

// ServeCall serves one call of a framework that does not answer in HTTP
// (grpcidem, connectidem), with every rule of [Adapter.Serve]: the call is
// a POST of body (the request message, deterministically encoded) to
// ex.Route(), with header h carrying the key and the fingerprinted fields
// as HTTP headers, under ctx. ex's Next must run the handler and write its
// answer, encoded, as the response the core stores; what the core
// answers itself (a refusal, a replay, where the operation stands) comes
// back as values in the CallAnswer, for the framework to state in its own
// terms. ServeCall is safe for concurrent use.
func (a *Adapter) ServeCall(ctx context.Context, h http.Header, body []byte, ex Exchange) CallAnswer {
	var ans CallAnswer
	a.Serve(discard{h: http.Header{}}, callRequest(ctx, ex.Route(), h, body), &answering{Exchange: ex, ans: &ans})
	return ans
}

// answering is the [answerer] that ServeCall hands the core: it keeps what
// the core answers in ans.
type answering struct {
	Exchange
	ans *CallAnswer
}

func (x *answering) Next(w http.ResponseWriter, r *http.Request) {
	x.ans.Ran = true
	x.Exchange.Next(w, r)
}

func (x *answering) Refuse(r Refusal) { x.ans.Refusal, x.ans.Outcome = &r, r.Outcome }

func (x *answering) Replay(res *Response, o Outcome) { x.ans.Replay, x.ans.Outcome = res, o }

func (x *answering) Settled(o Outcome) { x.ans.Outcome = o }

// callRequest is the request the core reads for a call: what
// http.NewRequestWithContext gives for a POST to route (a path), built
// without parsing it as a URL.
func callRequest(ctx context.Context, route string, h http.Header, body []byte) *http.Request {
	r := &http.Request{
		Method: http.MethodPost, URL: &url.URL{Path: route},
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: h, Body: io.NopCloser(bytes.NewReader(body)), ContentLength: int64(len(body)),
	}
	return r.WithContext(ctx)
}

// discard is the writer of a call: everything the core answers reaches
// the exchange as a value, and a call that passes through answers with
// what its handler returned, not with what it wrote.
type discard struct{ h http.Header }

func (d discard) Header() http.Header         { return d.h }
func (d discard) WriteHeader(int)             {}
func (d discard) Write(p []byte) (int, error) { return len(p), nil }
