package otelidem_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/contrib/instrumentation/net/http/otelhttp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/otelidem"
)

// The wrapping order: idem outside otelhttp. Each attempt is an
// idem.attempt span under the caller's span, and otelhttp's HTTP client
// span, which carries the attempt's trace context to the server, is its
// child. The server here (in memory) answers 503, then 201.
func ExampleClient() {
	spans := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans))
	tel, err := otelidem.NewClient(otelidem.Config{TracerProvider: tp})
	if err != nil {
		panic(err)
	}
	client := idem.NewClient(idem.Config{
		Base:     otelhttp.NewTransport(flakyServer(), otelhttp.WithTracerProvider(tp)),
		Observer: tel.Observer(),
		Backoff:  idem.Backoff{Base: time.Millisecond},
	})

	ctx, call := tp.Tracer("example").Start(context.Background(), "create payment")
	req, _ := http.NewRequestWithContext(ctx, "POST", "http://payments.test/v1/payments", strings.NewReader(`{"amount":100}`))
	resp, err := client.Do(req)
	if err != nil {
		panic(err)
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	call.End()

	for _, s := range spans.Ended() {
		if s.Name() != otelidem.AttemptSpan {
			continue
		}
		fmt.Printf("%s under %q:", s.Name(), nameOf(spans.Ended(), s.Parent().SpanID()))
		for _, kv := range s.Attributes() {
			switch kv.Key {
			case "http.request.resend_count", "idem.retry.reason", "http.response.status_code":
				fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
			}
		}
		fmt.Println()
		for _, child := range spans.Ended() {
			if child.Parent().SpanID() == s.SpanContext().SpanID() {
				fmt.Printf("  %s (otelhttp, %s)\n", child.Name(), child.SpanKind())
			}
		}
	}
	// Output:
	// idem.attempt under "create payment": http.response.status_code=503
	//   HTTP POST (otelhttp, client)
	// idem.attempt under "create payment": http.request.resend_count=1 idem.retry.reason=status http.response.status_code=201
	//   HTTP POST (otelhttp, client)
}

// nameOf returns the name of the span of id.
func nameOf(spans []sdktrace.ReadOnlySpan, id trace.SpanID) string {
	for _, s := range spans {
		if s.SpanContext().SpanID() == id {
			return s.Name()
		}
	}
	return "none"
}

// flakyServer is an in-memory server that answers 503 to the first request
// and 201 to the others.
func flakyServer() http.RoundTripper {
	var n atomic.Int32
	return roundTrip(func(r *http.Request) (*http.Response, error) {
		_, _ = io.Copy(io.Discard, r.Body)
		status := http.StatusCreated
		if n.Add(1) == 1 {
			status = http.StatusServiceUnavailable
		}
		return &http.Response{StatusCode: status, Header: http.Header{}, Body: http.NoBody, Request: r}, nil
	})
}

type roundTrip func(*http.Request) (*http.Response, error)

func (f roundTrip) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
