package testserver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestConfigRejectsNonLoopbackAndBadRules(t *testing.T) {
	cases := []struct {
		name string
		cfg  Config
		want error
	}{
		{"all interfaces", Config{Addr: ":0"}, ErrNotLoopback},
		{"wildcard", Config{Addr: "0.0.0.0:0"}, ErrNotLoopback},
		{"bad rule", Config{Rules: []Rule{Always(Match{}, Fault{Kind: "nope"})}}, ErrBadFault},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewProxy([]string{"http://127.0.0.1:1"}, tc.cfg)
			if !errors.Is(err, tc.want) {
				t.Fatalf("NewProxy(%+v) error = %v, want %v", tc.cfg, err, tc.want)
			}
		})
	}
	for _, addr := range []string{"127.0.0.1:0", "[::1]:0", "localhost:0"} {
		s, err := NewProxy([]string{"http://127.0.0.1:1"}, Config{Addr: addr})
		if err != nil {
			if strings.Contains(addr, "::1") { // no IPv6 on this host
				continue
			}
			t.Fatalf("NewProxy(Addr %q) = %v, want a server", addr, err)
		}
		s.Close()
	}
}

func TestConfigHeaderNamesAreTokens(t *testing.T) {
	for _, name := range []string{"X(Op)", "X Op", "X:Op", `X"Op`, "X/Op", "X@Op", "X\u00e9"} {
		if _, err := NewProxy([]string{"http://127.0.0.1:1"}, Config{OperationHeader: name}); err == nil {
			t.Errorf("NewProxy(OperationHeader %q) = nil error, want one: not an RFC 9110 token", name)
		}
		if _, err := NewProxy([]string{"http://127.0.0.1:1"}, Config{FaultHeader: name}); err == nil {
			t.Errorf("NewProxy(FaultHeader %q) = nil error, want one: not an RFC 9110 token", name)
		}
	}
	for _, name := range []string{"X-Operation-Id", "x_op.1~", "!#$%&'*+-.^_`|~09az"} {
		s, err := NewProxy([]string{"http://127.0.0.1:1"}, Config{OperationHeader: name, FaultHeader: name})
		if err != nil {
			t.Fatalf("NewProxy(header %q) = %v, want a server", name, err)
		}
		s.Close()
	}
}

func TestNewPanicsOnBadConfig(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("New with a non-loopback address did not panic")
		}
	}()
	New(&app{}, Config{Addr: "0.0.0.0:0"})
}

func TestFaultHeader(t *testing.T) {
	var sawHeader atomic.Bool
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sawHeader.Store(r.Header.Get("X-Fault") != "")
		w.WriteHeader(http.StatusCreated)
	})
	send := func(s *Server, fault string) (*http.Response, error) {
		req, _ := http.NewRequest(http.MethodPost, s.URL, nil)
		req.Header.Set("X-Fault", fault)
		resp, err := freshClient(5 * time.Second).Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return resp, err
	}

	off := startServer(t, h, Config{}, nil)
	if resp, err := send(off, "status;status=418"); err != nil || resp.StatusCode != 201 || !sawHeader.Load() {
		t.Fatalf("header off: %v, %v, handler saw header %v; want 201, header passed through untouched", resp, err, sawHeader.Load())
	}

	on := startServer(t, h, Config{FaultHeader: "X-Fault", Rules: []Rule{Always(Match{}, Fault{Kind: FaultReset})}}, nil)
	if resp, err := send(on, "status;status=418;retry-after=3"); err != nil || resp.StatusCode != 418 || resp.Header.Get("Retry-After") != "3" {
		t.Fatalf("header status: %v, %v; want 418 with Retry-After 3 (the header wins over the rules)", resp, err)
	}
	if resp, err := send(on, "none"); err != nil || resp.StatusCode != 201 || sawHeader.Load() {
		t.Fatalf("header none: %v, %v, handler saw header %v; want 201 and the header removed", resp, err, sawHeader.Load())
	}
	if _, err := send(on, "drop-reset"); !isReset(err) {
		t.Fatalf("header drop-reset: error %v, want ECONNRESET", err)
	}
	if resp, err := send(on, "explode"); err != nil || resp.StatusCode != 400 {
		t.Fatalf("malformed header: %v, %v; want 400", resp, err)
	}
	events := waitEvents(t, on, 4)
	byIndex := map[int]Event{}
	for _, ev := range events {
		byIndex[ev.Index] = ev
	}
	if ev := byIndex[3]; ev.Rule != "header" || ev.Fault.Kind != FaultDropReset || !ev.HandlerRan {
		t.Fatalf("event of the drop-reset header = %+v", ev)
	}
	if ev := byIndex[4]; ev.HandlerRan || ev.Status != 400 || ev.Err == "" {
		t.Fatalf("event of the malformed header = %+v, want 400 without the handler", ev)
	}
}

func TestSetRulesWhileServing(t *testing.T) {
	a := &app{}
	s := startServer(t, a, Config{}, nil)
	if err := s.SetRules([]Rule{Always(Match{}, Fault{Kind: "bad"})}); !errors.Is(err, ErrBadFault) {
		t.Fatalf("SetRules(bad) = %v, want ErrBadFault", err)
	}
	sets := [][]Rule{
		{Always(Match{}, Fault{Kind: FaultStatus, Status: 503})},
		{Always(Match{}, Fault{Kind: FaultStatusAfter, Status: 502})},
		nil,
	}
	// The rules change at every arrival, so requests meet each set while
	// others are in flight; the loop ends with the 100 requests.
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		for i := 1; i <= 100; i++ {
			if err := s.log.waitArrived(ctx, i); err != nil {
				t.Errorf("waiting for request %d: %v", i, err)
				return
			}
			if err := s.SetRules(sets[i%len(sets)]); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	c := &http.Client{Timeout: 5 * time.Second}
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 25; i++ {
				if resp, _, err := post(c, s.URL, "", ""); err != nil || (resp.StatusCode != 503 && resp.StatusCode != 502 && resp.StatusCode != 201) {
					t.Errorf("request during SetRules: %v, %v", resp, err)
				}
			}
		}()
	}
	wg.Wait()
	for _, ev := range waitEvents(t, s, 100) {
		if ev.Fault.Kind == FaultStatus && ev.HandlerRan || ev.Fault.Kind == FaultStatusAfter && !ev.HandlerRan {
			t.Fatalf("event %+v: fault and handler disagree", ev)
		}
	}
}

func TestEventsRecordConnectionsAndOperations(t *testing.T) {
	s := startServer(t, &app{}, Config{OperationHeader: "X-Operation-Id"}, nil)
	c := &http.Client{Timeout: 5 * time.Second}
	for i, hdr := range []map[string]string{
		{"Idempotency-Key": `"sf-key"`},
		{"Idempotency-Key": "sf-key"},
		{"X-Operation-Id": "naive-1"},
		{},
		{},
	} {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/p", strings.NewReader("{}"))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	events := waitEvents(t, s, 5)
	var got []string
	for _, ev := range events {
		got = append(got, fmt.Sprintf("%d:%s/%s#%d conn%d reused=%v %d %dB", ev.Index, ev.Key, ev.Op, ev.Attempt, ev.Conn, ev.Reused, ev.Status, ev.BodyBytes))
	}
	want := "[1:sf-key/sf-key#1 conn1 reused=false 201 81B 2:sf-key/sf-key#2 conn1 reused=true 201 81B " +
		"3:/naive-1#1 conn1 reused=true 201 81B 4:/#1 conn1 reused=true 201 81B 5:/#1 conn1 reused=true 201 81B]"
	if fmt.Sprint(got) != want {
		t.Fatalf("events:\n%v\nwant\n%v", got, want)
	}
	sum := Summarize(events)
	if sum.Requests != 5 || sum.Operations != 2 || sum.MaxAttempt != 2 || sum.Conns != 1 || sum.Reused != 4 || sum.HandlerRuns != 5 || sum.Faults[FaultNone] != 5 {
		t.Fatalf("Summarize = %+v", sum)
	}
	if !strings.Contains(sum.String(), "requests: 5 for 2 operations (max attempt 2), handler ran 5 times") {
		t.Fatalf("Summary.String() = %q", sum.String())
	}
}

func TestMaxEventsKeepsTheLatest(t *testing.T) {
	s := startServer(t, &app{}, Config{MaxEvents: 2}, nil)
	c := freshClient(5 * time.Second)
	for i := 0; i < 5; i++ {
		if _, _, err := post(c, s.URL, "", ""); err != nil {
			t.Fatal(err)
		}
	}
	events := waitEvents(t, s, 5)
	if len(events) != 2 || events[0].Index != 4 || events[1].Index != 5 {
		t.Fatalf("kept events %+v, want indexes 4 and 5", events)
	}
}

func TestProxyRoundRobinAndFaults(t *testing.T) {
	var counts [2]atomic.Int64
	var upstreams []string
	for i := range counts {
		up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			counts[i].Add(1)
			w.WriteHeader(http.StatusCreated)
			fmt.Fprintf(w, "node %d saw %s", i, r.Header.Get("Idempotency-Key"))
		}))
		t.Cleanup(up.Close)
		upstreams = append(upstreams, up.URL)
	}
	rule := Rule{Match: Match{Key: "drop-me"}, Script: []Fault{{Kind: FaultDropReset}}}
	s, err := NewProxy(upstreams, Config{Rules: []Rule{rule}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	c := freshClient(5 * time.Second)
	for i, want := range []string{"node 0 saw a", "node 1 saw b"} {
		_, body, err := post(c, s.URL, string(rune('a'+i)), "")
		if err != nil || string(body) != want {
			t.Fatalf("request %d: %q, %v; want %q", i, body, err, want)
		}
	}
	if _, _, err := post(c, s.URL, "drop-me", ""); !isReset(err) {
		t.Fatalf("dropped request: error %v, want ECONNRESET", err)
	}
	events := waitEvents(t, s, 3)
	if counts[0].Load() != 2 || counts[1].Load() != 1 {
		t.Fatalf("upstream counts %d, %d; want 2, 1 (the drop reached node 0)", counts[0].Load(), counts[1].Load())
	}
	for _, ev := range events {
		if ev.Upstream != upstreams[(ev.Index-1)%2] || !ev.HandlerRan {
			t.Fatalf("event %+v: want upstream %s, handler ran", ev, upstreams[(ev.Index-1)%2])
		}
	}
}

func TestProxyErrors(t *testing.T) {
	for _, bad := range [][]string{nil, {"127.0.0.1:80"}, {"ftp://x"}, {"http://%zz"}} {
		if _, err := NewProxy(bad, Config{}); err == nil {
			t.Errorf("NewProxy(%q) = nil error, want one", bad)
		}
	}
	dead := httptest.NewServer(http.NotFoundHandler())
	dead.Close()
	s, err := NewProxy([]string{dead.URL}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	resp, _, err := post(freshClient(5*time.Second), s.URL, "", "")
	if err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("dead upstream: %v, %v; want 502", resp, err)
	}
	if ev := waitEvents(t, s, 1)[0]; !strings.HasPrefix(ev.Err, "upstream: ") || ev.Status != 502 || ev.HandlerRan || ev.HandlerStatus != 0 {
		t.Fatalf("event %+v, want 502 with the upstream error, and the handler not run (the upstream refused the connection)", ev)
	}

	// An upstream that got the request and hung up without an answer: it
	// may have acted, so the handler counts as run.
	mute := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			c.Close()
		}
	}))
	defer mute.Close()
	s2, err := NewProxy([]string{mute.URL}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	resp, _, err = post(freshClient(5*time.Second), s2.URL, "", "")
	if err != nil || resp.StatusCode != http.StatusBadGateway {
		t.Fatalf("mute upstream: %v, %v; want 502", resp, err)
	}
	if ev := waitEvents(t, s2, 1)[0]; ev.Status != 502 || !ev.HandlerRan {
		t.Fatalf("event %+v, want 502 with the handler run (the upstream had the request)", ev)
	}
}

// TestNetHTTPResendsKeyedRequests pins down the net/http behaviour that the
// package doc warns about: a keyed POST whose response is dropped on a
// reused connection is resent by http.Transport itself, and the event log
// shows both attempts.
func TestNetHTTPResendsKeyedRequests(t *testing.T) {
	a := &app{}
	rule := Rule{Match: Match{Key: "k"}, Script: []Fault{{Kind: FaultDropClose}}}
	s := startServer(t, a, Config{Rules: []Rule{rule}}, nil)
	c := &http.Client{Timeout: 5 * time.Second}
	if _, _, err := post(c, s.URL, "warm-up", ""); err != nil {
		t.Fatal(err)
	}
	resp, _, err := post(c, s.URL, "k", "{}")
	if err != nil || resp.StatusCode != http.StatusCreated {
		t.Fatalf("one Do call: %v, %v; want the transport's resend to get 201", resp, err)
	}
	events := waitEvents(t, s, 3)
	if a.calls.Load() != 3 || len(events) != 3 {
		t.Fatalf("handler ran %d times over %d events, want 3: warm-up, the dropped attempt, the resend", a.calls.Load(), len(events))
	}
	var dropped, resent Event
	for _, ev := range events {
		switch {
		case ev.Op == "k" && ev.Attempt == 1:
			dropped = ev
		case ev.Op == "k" && ev.Attempt == 2:
			resent = ev
		}
	}
	if !dropped.Reused || dropped.Fault.Kind != FaultDropClose || resent.Reused || resent.Status != 201 {
		t.Fatalf("dropped %+v\nresent %+v\nwant the drop on the reused connection and the resend on a new one", dropped, resent)
	}
}

// roundTripperFunc is an http.RoundTripper that is not an *http.Transport.
type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestNewProxyWithReplacedDefaultTransport: a test that swapped
// http.DefaultTransport for its own RoundTripper can still start a proxy,
// and the proxy does not go through the swapped one. Not parallel: it
// changes a global.
func TestNewProxyWithReplacedDefaultTransport(t *testing.T) {
	upstream := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusCreated)
	}))
	t.Cleanup(upstream.Close)
	saved := http.DefaultTransport
	var swappedUsed atomic.Bool
	http.DefaultTransport = roundTripperFunc(func(r *http.Request) (*http.Response, error) {
		swappedUsed.Store(true)
		return nil, errors.New("the swapped DefaultTransport")
	})
	t.Cleanup(func() { http.DefaultTransport = saved })

	s, err := NewProxy([]string{upstream.URL}, Config{})
	if err != nil {
		t.Fatalf("NewProxy: %v", err)
	}
	t.Cleanup(s.Close)
	resp, _, err := post(freshClient(5*time.Second), s.URL, "", "")
	if err != nil || resp.StatusCode != http.StatusCreated || swappedUsed.Load() {
		t.Fatalf("through the proxy: %v, %v, swapped transport used %v; want 201 from the upstream", resp, err, swappedUsed.Load())
	}
}

func TestHandlerPanicKeepsTheStack(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { panic("boom") })
	s := startServer(t, h, Config{}, nil)
	if _, _, err := post(freshClient(5*time.Second), s.URL, "", ""); err == nil {
		t.Fatal("client error = nil, want the connection closed by the panic")
	}
	ev := waitEvents(t, s, 1)[0]
	if !strings.HasPrefix(ev.Err, "handler panic: boom\n") || !strings.Contains(ev.Err, "TestHandlerPanicKeepsTheStack.func1") {
		t.Fatalf("event Err = %q, want the panic value and the stack down to the handler", ev.Err)
	}
}
