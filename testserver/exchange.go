package testserver

import (
	"context"
	"fmt"
	"net/http"
	"runtime/debug"
	"sync"

	"github.com/idemkit/idem/internal/wire"
)

// exchange is one request on its way through the server.
type exchange struct {
	r       *http.Request
	ev      Event
	fault   Fault
	ctx     context.Context // the context the handler gets
	release func()          // releases a detached ctx; nil otherwise

	startOnce sync.Once
	started   []chan struct{} // closed when the handler starts, or at the end
}

// Info is what the server decided about a request, as its handler sees it
// through [InfoFrom].
type Info struct {
	// Index is the global request index (1 for the first request).
	Index int
	// Op is the operation id and Attempt its attempt number.
	Op      string
	Attempt int
	// Conn is the connection id.
	Conn uint64
	// Fault is the fault applied to this request.
	Fault Fault
}

type exchangeKey struct{}

// InfoFrom returns what the [Server] decided about the request whose context
// is ctx (a handler passes r.Context()). ok is false outside a Server's
// handler. A handler that keeps a [Ledger] can use [Info.Op] as the operation
// id of the effect it records.
func InfoFrom(ctx context.Context) (info Info, ok bool) {
	x, ok := ctx.Value(exchangeKey{}).(*exchange)
	if !ok {
		return Info{}, false
	}
	return Info{Index: x.ev.Index, Op: x.ev.Op, Attempt: x.ev.Attempt, Conn: x.ev.Conn, Fault: x.fault}, true
}

// serveHTTP is the [Server]'s handler: it numbers the request, decides its
// fault, applies it and logs the event.
func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if !s.enter() {
		_, _, _ = s.hijack(w) // closed: hijack closes the connection
		return
	}
	defer s.inflight.Done()
	x, err := s.admit(r)
	defer s.finish(x)
	if err != nil {
		x.ev.Err = err.Error()
		http.Error(w, err.Error(), http.StatusBadRequest)
		x.ev.Status = http.StatusBadRequest
		return
	}
	s.holds.arrive(s, x)
	if !s.before(w, x) {
		return
	}
	if x.fault.Kind.AfterHandler() {
		rec := newRecorder()
		s.runHandler(rec, x)
		s.after(w, x, rec)
		return
	}
	cw := &countingWriter{ResponseWriter: w}
	s.runHandler(cw, x)
	x.ev.Status = cw.statusOut()
	x.ev.HandlerStatus = x.ev.Status
	x.ev.BodyBytes = cw.n
}

// admit numbers r and decides its fault. The error reports a malformed
// fault header; the exchange is valid either way.
func (s *Server) admit(r *http.Request) (*exchange, error) {
	x := &exchange{r: r}
	x.ev.Index = int(s.index.Add(1))
	x.ev.Time = s.clock.Now()
	x.ev.Conn, x.ev.Reused = connOf(r)
	x.ev.Method, x.ev.Path = r.Method, r.URL.Path
	x.ev.Key, x.ev.Op = s.operation(r)
	x.ev.Attempt = s.attempts.next(x.ev.Op, x.ev.Time)
	s.log.arrive()
	x.ctx = context.WithValue(r.Context(), exchangeKey{}, x)

	forced, err := s.forcedFault(r)
	if err != nil || forced != nil {
		if forced != nil {
			x.fault, x.ev.Rule = *forced, "header"
		}
		x.ev.Fault = x.fault
		return x, err
	}
	rs := s.rules.Load()
	q := request{
		method: r.Method, path: r.URL.Path, header: r.Header,
		op: x.ev.Op, attempt: x.ev.Attempt, index: x.ev.Index,
		since: x.ev.Time.Sub(rs.since),
	}
	x.fault, x.ev.Rule = rs.decide(s.cfg.Seed, q)
	x.ev.Fault = x.fault
	return x, nil
}

// operation returns the request's idempotency key ([Config.KeyHeader];
// parsed when valid, as received otherwise) and its operation id.
func (s *Server) operation(r *http.Request) (key, op string) {
	if raw := r.Header.Get(s.cfg.KeyHeader); raw != "" {
		key, err := wire.ParseKey(raw)
		if err != nil {
			key = raw // still names the operation; the server under test rejects it
		}
		return key, key
	}
	if s.cfg.OperationHeader != "" {
		return "", r.Header.Get(s.cfg.OperationHeader)
	}
	return "", ""
}

// forcedFault reads [Config.FaultHeader]: nil when disabled or absent.
func (s *Server) forcedFault(r *http.Request) (*Fault, error) {
	if s.cfg.FaultHeader == "" {
		return nil, nil
	}
	v, ok := r.Header[http.CanonicalHeaderKey(s.cfg.FaultHeader)]
	if !ok {
		return nil, nil
	}
	r.Header.Del(s.cfg.FaultHeader)
	f, err := ParseFault(v[0])
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.cfg.FaultHeader, err)
	}
	return &f, nil
}

// runHandler calls the handler with w, recording that it ran.
func (s *Server) runHandler(w http.ResponseWriter, x *exchange) {
	x.ev.HandlerRan = true
	x.handlerStarted()
	defer func() {
		if p := recover(); p != nil {
			x.ev.Err = fmt.Sprintf("handler panic: %v", p)
			if p != http.ErrAbortHandler { // a deliberate abort has no bug to locate
				// The server's error log, where net/http prints the stack,
				// is discarded: the event keeps it.
				x.ev.Err += "\n" + string(debug.Stack())
			}
			panic(p) // net/http recovers it and closes the connection
		}
	}()
	s.handler.ServeHTTP(w, x.r.WithContext(x.ctx))
}

// handlerStarted releases whoever waits for this request's handler to
// start ([FaultHold]); finish calls it too, for requests whose handler never
// runs.
func (x *exchange) handlerStarted() {
	x.startOnce.Do(func() {
		for _, c := range x.started {
			close(c)
		}
	})
}

// finish logs the event.
func (s *Server) finish(x *exchange) {
	x.handlerStarted()
	if x.release != nil {
		x.release()
	}
	if !x.ev.HandlerRan {
		x.ev.HandlerStatus = 0 // a proxy's 502 for an upstream it never reached
	}
	x.ev.End = s.clock.Now()
	s.log.add(x.ev)
	if s.cfg.OnEvent != nil {
		s.cfg.OnEvent(x.ev)
	}
}
