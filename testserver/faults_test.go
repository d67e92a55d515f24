package testserver

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
)

// faultCase is one fault seen from a plain http.Client and from the log.
type faultCase struct {
	name       string
	fault      Fault
	timeout    time.Duration // client timeout; zero means 5s
	body       string        // request body
	check      func(t *testing.T, resp *http.Response, body []byte, err error)
	handlerRan bool
	status     int // Event.Status
}

func wantErr(what string, is func(error) bool) func(*testing.T, *http.Response, []byte, error) {
	return func(t *testing.T, resp *http.Response, _ []byte, err error) {
		t.Helper()
		if err == nil || !is(err) {
			t.Fatalf("client error = %v (response %v), want %s", err, resp, what)
		}
	}
}

func wantResponse(status int, bodyHas string) func(*testing.T, *http.Response, []byte, error) {
	return func(t *testing.T, resp *http.Response, body []byte, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("client error = %v, want status %d", err, status)
		}
		if resp.StatusCode != status || !strings.Contains(string(body), bodyHas) {
			t.Fatalf("response = %d %q, want %d containing %q", resp.StatusCode, body, status, bodyHas)
		}
	}
}

func TestFaultsSeenByClientAndLog(t *testing.T) {
	ms := time.Millisecond
	cases := []faultCase{
		{name: "none", check: wantResponse(201, `"id":"pay-1"`), handlerRan: true, status: 201},
		{name: "status", fault: Fault{Kind: FaultStatus, RetryAfter: 2 * time.Second},
			check: func(t *testing.T, resp *http.Response, body []byte, err error) {
				wantResponse(503, "injected 503")(t, resp, body, err)
				if got := resp.Header.Get("Retry-After"); got != "2" {
					t.Fatalf("Retry-After = %q, want 2", got)
				}
			}, status: 503},
		{name: "reset", fault: Fault{Kind: FaultReset}, body: strings.Repeat("b", 1000), check: wantErr("ECONNRESET", isReset)},
		{name: "close", fault: Fault{Kind: FaultClose}, body: strings.Repeat("b", 1000), check: wantErr("EOF", isEOF)},
		{name: "blackhole", fault: Fault{Kind: FaultBlackhole}, timeout: 100 * ms, check: wantErr("timeout", isTimeout)},
		{name: "delay passes", fault: Fault{Kind: FaultDelay, Delay: 20 * ms}, check: wantResponse(201, "pay-1"), handlerRan: true, status: 201},
		{name: "delay past timeout", fault: Fault{Kind: FaultDelay, Delay: time.Hour}, timeout: 100 * ms, check: wantErr("timeout", isTimeout)},
		{name: "slow read passes", fault: Fault{Kind: FaultSlowRead, Bytes: 2, Delay: ms}, body: "0123456789",
			check: wantResponse(201, `"request_bytes":10`), handlerRan: true, status: 201},
		{name: "slow read past timeout", fault: Fault{Kind: FaultSlowRead, Bytes: 1, Delay: 30 * ms}, body: "0123456789",
			timeout: 100 * ms, check: wantErr("timeout", isTimeout)},
		{name: "drop-reset", fault: Fault{Kind: FaultDropReset}, check: wantErr("ECONNRESET", isReset), handlerRan: true},
		{name: "drop-close", fault: Fault{Kind: FaultDropClose}, check: wantErr("EOF", isEOF), handlerRan: true},
		{name: "drop-hang", fault: Fault{Kind: FaultDropHang}, timeout: 100 * ms, check: wantErr("timeout", isTimeout), handlerRan: true},
		{name: "delay-response passes", fault: Fault{Kind: FaultDelayResponse, Delay: 20 * ms}, check: wantResponse(201, "pay-1"), handlerRan: true, status: 201},
		{name: "delay-response past timeout", fault: Fault{Kind: FaultDelayResponse, Delay: time.Hour}, timeout: 100 * ms,
			check: wantErr("timeout", isTimeout), handlerRan: true},
		{name: "partial-body", fault: Fault{Kind: FaultPartialBody, Bytes: 7}, check: checkPartial(7), handlerRan: true, status: 201},
		{name: "partial-body half", fault: Fault{Kind: FaultPartialBody}, check: checkPartial(-1), handlerRan: true, status: 201},
		{name: "slow-body passes", fault: Fault{Kind: FaultSlowBody, Bytes: 16, Delay: ms}, check: wantResponse(201, "pay-1"), handlerRan: true, status: 201},
		{name: "slow-body past timeout", fault: Fault{Kind: FaultSlowBody, Bytes: 1, Delay: 30 * ms}, timeout: 150 * ms,
			check: wantErr("timeout while reading the body", isTimeout), handlerRan: true, status: 201},
		{name: "status-after", fault: Fault{Kind: FaultStatusAfter, Status: 502, RetryAfter: time.Second},
			check: wantResponse(502, "injected 502"), handlerRan: true, status: 502},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			runFaultCase(t, tc)
		})
	}
}

func runFaultCase(t *testing.T, tc faultCase) {
	a := &app{}
	s := startServer(t, a, Config{Rules: []Rule{Always(Match{}, tc.fault)}}, nil)
	timeout := tc.timeout
	if timeout == 0 {
		timeout = 5 * time.Second
	}
	resp, body, err := post(freshClient(timeout), s.URL+"/payments", "k-1", tc.body)
	tc.check(t, resp, body, err)

	ev := waitEvents(t, s, 1)[0]
	if ev.HandlerRan != tc.handlerRan || (a.calls.Load() == 1) != tc.handlerRan {
		t.Errorf("handler ran: event %v, app calls %d; want %v", ev.HandlerRan, a.calls.Load(), tc.handlerRan)
	}
	if ev.Fault != tc.fault || ev.Rule != "#0" {
		t.Errorf("event fault = %v by rule %q, want %v by #0", ev.Fault, ev.Rule, tc.fault)
	}
	if ev.Status != tc.status {
		t.Errorf("event status = %d, want %d (event %+v)", ev.Status, tc.status, ev)
	}
	if ev.Key != "k-1" || ev.Op != "k-1" || ev.Attempt != 1 || ev.Index != 1 || ev.Method != "POST" || ev.Path != "/payments" {
		t.Errorf("event = %+v, want key/op k-1, attempt 1, index 1, POST /payments", ev)
	}
	if tc.handlerRan && ev.HandlerStatus != 201 {
		t.Errorf("event handler status = %d, want 201", ev.HandlerStatus)
	}
}

// checkPartial expects a 201 whose body breaks with an unexpected EOF after
// n bytes of the declared length (-1: half of it).
func checkPartial(n int) func(*testing.T, *http.Response, []byte, error) {
	return func(t *testing.T, resp *http.Response, body []byte, err error) {
		t.Helper()
		if !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("error = %v, want io.ErrUnexpectedEOF while reading the body", err)
		}
		declared, _ := strconv.Atoi(resp.Header.Get("Content-Length"))
		if n < 0 {
			n = declared / 2
		}
		if resp.StatusCode != 201 || len(body) != n || declared <= n || !strings.HasPrefix(`{"id":"pay-1"`, string(body[:min(len(body), 13)])) {
			t.Fatalf("response %d, Content-Length %d, read %d bytes %q; want 201 and %d bytes of more", resp.StatusCode, declared, len(body), body, n)
		}
	}
}

func TestPartialBodyEventCountsBytes(t *testing.T) {
	const bodyLen = 81 // app's response to an empty request
	for _, tc := range []struct{ bytes, want int }{{5, 5}, {bodyLen - 1, bodyLen - 1}, {bodyLen, bodyLen - 1}, {1000, bodyLen - 1}} {
		t.Run(strconv.Itoa(tc.bytes), func(t *testing.T) {
			s := startServer(t, &app{}, Config{Rules: []Rule{Always(Match{}, Fault{Kind: FaultPartialBody, Bytes: tc.bytes})}}, nil)
			resp, body, err := post(freshClient(5*time.Second), s.URL, "", "")
			if !errors.Is(err, io.ErrUnexpectedEOF) || resp.ContentLength != bodyLen {
				t.Fatalf("Bytes %d: error %v, response %v; want a %d-byte body cut short", tc.bytes, err, resp, bodyLen)
			}
			ev := waitEvents(t, s, 1)[0]
			if ev.BodyBytes != int64(tc.want) || len(body) != tc.want {
				t.Fatalf("Bytes %d: body bytes: event %d, client %d; want %d", tc.bytes, ev.BodyBytes, len(body), tc.want)
			}
		})
	}
}

func TestPartialBodyOfEmptyResponseCutsTheStatusLine(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })
	s := startServer(t, h, Config{Rules: []Rule{Always(Match{}, Fault{Kind: FaultPartialBody})}}, nil)
	_, _, err := post(freshClient(5*time.Second), s.URL, "", "")
	if err == nil {
		t.Fatal("client error = nil, want a malformed or cut response")
	}
	if ev := waitEvents(t, s, 1)[0]; ev.Status != 0 || !ev.HandlerRan {
		t.Fatalf("event = %+v, want status 0 and handler ran", ev)
	}
}

func TestStatusRetryAfterDate(t *testing.T) {
	clk := newFakeClock()
	f := Fault{Kind: FaultStatus, Status: 429, RetryAfter: 1500 * time.Millisecond, RetryAfterDate: true}
	s := startServer(t, &app{}, Config{Rules: []Rule{Always(Match{}, f)}}, clk)
	resp, _, err := post(freshClient(5*time.Second), s.URL, "", "")
	if err != nil {
		t.Fatal(err)
	}
	want := clk.Now().Add(2 * time.Second).Format(http.TimeFormat)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != want {
		t.Fatalf("response %d, Retry-After %q; want 429, %q", resp.StatusCode, resp.Header.Get("Retry-After"), want)
	}
	if ev := waitEvents(t, s, 1)[0]; ev.HandlerRan || ev.Fault != f || ev.Status != 429 || ev.HandlerStatus != 0 {
		t.Fatalf("event = %+v, want fault %v, status 429, handler not run", ev, f)
	}
}

// TestDelayResponseNoticesTheClientLeaving: the handler ignores the request
// body, yet the delayed response ends as soon as the client gives up,
// because the server reads the body itself (net/http notices a client that
// leaves only once the body is read).
func TestDelayResponseNoticesTheClientLeaving(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusCreated) })
	s := startServer(t, h, Config{Rules: []Rule{Always(Match{}, Fault{Kind: FaultDelayResponse, Delay: time.Hour})}}, nil)
	_, _, err := post(freshClient(100*time.Millisecond), s.URL, "k", strings.Repeat("b", 100))
	if !isTimeout(err) {
		t.Fatalf("client error = %v, want a timeout", err)
	}
	ev := waitEvents(t, s, 1)[0]
	if !ev.HandlerRan || ev.Status != 0 || !strings.HasPrefix(ev.Err, "delay-response: client left") {
		t.Fatalf("event = %+v, want the handler run, nothing sent, and the client's leaving noted", ev)
	}
}

// TestBufferBodyNamesItsFault: a request whose client already left is
// noted under the fault that was reading its body.
func TestBufferBodyNamesItsFault(t *testing.T) {
	s := &Server{clock: realClock{}}
	for _, tc := range []struct {
		kind FaultKind
		run  func(*exchange) bool
	}{
		{FaultDelay, s.delayRequest},
		{FaultSlowRead, s.slowRead},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		x := &exchange{r: httptest.NewRequestWithContext(ctx, http.MethodPost, "/", strings.NewReader("body"))}
		x.fault = Fault{Kind: tc.kind, Delay: time.Hour}
		if tc.run(x) || !strings.HasPrefix(x.ev.Err, string(tc.kind)+": client left") {
			t.Errorf("%s with the client gone: Err %q, want it to run no handler and name %s", tc.kind, x.ev.Err, tc.kind)
		}
	}
}
