package grpcidem

import (
	"bytes"
	"io"
	"math"
	"net/http"
	"strconv"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/idemkit/idem/internal/rpcidem"
	"github.com/idemkit/idem/internal/wire"
)

// response is an attempt's answer as the HTTP client judges it: the HTTP
// status of its code (an idem refusal's, by its problem, as the HTTP
// middleware would answer), a problem document naming an idem refusal,
// and Retry-After from its RetryInfo or pushback trailer.
func response(r *http.Request, st *status.Status, trailer metadata.MD) *http.Response {
	resp := &http.Response{
		Status: "", StatusCode: clientStatus(st.Code()), Proto: "HTTP/2.0", ProtoMajor: 2,
		Header: http.Header{}, Body: http.NoBody, Request: r, ContentLength: 0,
	}
	var wait time.Duration
	for _, d := range st.Details() {
		switch d := d.(type) {
		case *errdetails.ErrorInfo:
			if name := d.GetMetadata()["problem"]; d.GetDomain() == ErrorDomain && name != "" {
				p := wire.Problem{Type: wire.DefaultProblemPrefix + name, Title: st.Message(), Status: wire.ProblemStatus(name, resp.StatusCode)}
				var b bytes.Buffer
				rec := rpcidem.NewRecorder(resp.Header)
				wire.WriteProblem(rec, p)
				b.Write(rec.Body.Bytes())
				resp.StatusCode, resp.Body, resp.ContentLength = p.Status, io.NopCloser(&b), int64(b.Len())
			}
		case *errdetails.RetryInfo:
			wait = d.GetRetryDelay().AsDuration()
		}
	}
	if vs := trailer.Get(pushbackKey); wait == 0 && len(vs) == 1 {
		if ms, err := strconv.ParseInt(vs[0], 10, 64); err == nil && ms > 0 {
			wait = time.Duration(ms) * time.Millisecond
		}
	}
	if wait > 0 {
		resp.Header.Set(wire.HeaderRetryAfter, strconv.FormatInt(int64(math.Ceil(wait.Seconds())), 10))
	}
	resp.Status = strconv.Itoa(resp.StatusCode) + " " + http.StatusText(resp.StatusCode)
	return resp
}

// clientStatus is the HTTP status of an answer's code for the client: the
// server's table (httpStatus), but ABORTED is 409, as an idem refusal of a
// duplicate in flight, whose RetryInfo says when to retry.
func clientStatus(c codes.Code) int {
	if c == codes.Aborted {
		return http.StatusConflict
	}
	return httpStatus(c)
}
