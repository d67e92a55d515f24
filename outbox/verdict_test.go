package outbox

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
)

func response(status int, header http.Header, body string) *http.Response {
	if header == nil {
		header = http.Header{}
	}
	return &http.Response{StatusCode: status, Header: header, Body: io.NopCloser(strings.NewReader(body))}
}

func TestClassify(t *testing.T) {
	problem := http.Header{"Content-Type": {"application/problem+json"}}
	tests := []struct {
		name string
		resp *http.Response
		err  error
		want verdict
	}{
		{"200", response(200, nil, "ok"), nil, delivered},
		{"201", response(201, nil, ""), nil, delivered},
		{"204", response(204, nil, ""), nil, delivered},
		{"400", response(400, nil, "bad"), nil, refused},
		{"404", response(404, nil, ""), nil, refused},
		{"409 business conflict", response(409, problem, `{"type":"urn:x:conflict","status":409}`), nil, refused},
		{"409 key-in-flight", response(409, problem, `{"type":"urn:idem:problem:key-in-flight","status":409}`), nil, retry},
		{"410", response(410, nil, ""), nil, refused},
		{"422", response(422, nil, ""), nil, refused},
		{"408", response(408, nil, ""), nil, retry},
		{"425", response(425, nil, ""), nil, retry},
		{"429", response(429, nil, ""), nil, retry},
		{"500", response(500, nil, ""), nil, retry},
		{"503", response(503, nil, ""), nil, retry},
		{"301", response(301, nil, ""), nil, refused},
		{"not sent", nil, &idem.Error{Certainty: idem.NotSent, Err: errors.New("dial")}, retry},
		{"ambiguous", nil, &idem.Error{Certainty: idem.Ambiguous, Reason: idem.ErrAttemptsExhausted, MayHaveTakenEffect: true}, retry},
		{"key in flight", nil, &idem.Error{Reason: idem.ErrKeyInFlight, Status: 409}, retry},
		{"budget", nil, &idem.Error{Reason: idem.ErrBudgetExhausted, Attempts: 2}, retry},
		{"breaker open, nothing sent", nil, &idem.Error{Reason: idem.ErrCircuitOpen}, localRefusal},
		{"budget, nothing sent", nil, &idem.Error{Reason: idem.ErrBudgetExhausted, Certainty: idem.NotSent}, localRefusal},
		{"breaker open after a request", nil, &idem.Error{Reason: idem.ErrCircuitOpen, Attempts: 1}, retry},
		{"deadline", nil, &idem.Error{Reason: idem.ErrDeadline}, retry},
		{"key reused", nil, &idem.Error{Reason: idem.ErrKeyReused, Status: 422}, refused},
		{"key invalid", nil, &idem.Error{Reason: idem.ErrKeyInvalid, Status: 400}, refused},
		{"key missing", nil, &idem.Error{Reason: idem.ErrKeyMissing, Status: 400}, refused},
		{"result unavailable", nil, &idem.Error{Reason: idem.ErrResultUnavailable, Status: 500}, delivered},
		{"plain error", nil, errors.New("boom"), retry},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := classify(tt.resp, tt.err, time.Now())
			require.Equal(t, tt.want, r.verdict, "classify = %s, want %s", r.verdict, tt.want)
		})
	}
}

func TestClassifyKeepsTheResponse(t *testing.T) {
	body := strings.Repeat("x", 10_000)
	r := classify(response(400, http.Header{"X-Why": {"nope"}, "Retry-After": {"3"}}, body), nil, time.Now())
	require.Equal(t, 400, r.status)
	require.Equal(t, "nope", r.header.Get("X-Why"))
	require.Len(t, r.body, keptBodyBytes)
	require.Equal(t, 3*time.Second, r.retryAfter)
}

// A Retry-After given as a date is read against the time the response
// arrived, on the outbox's clock.
func TestClassifyRetryAfterDateOnTheGivenClock(t *testing.T) {
	now := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	at := now.Add(90 * time.Second).Format(http.TimeFormat)
	r := classify(response(503, http.Header{"Retry-After": {at}}, ""), nil, now)
	require.Equal(t, retry, r.verdict)
	require.Equal(t, 90*time.Second, r.retryAfter)
}
