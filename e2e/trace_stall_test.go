package e2e

import (
	"context"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/examples/payments/api"
	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/trace"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/testserver"
)

// The stall run: charges whose first attempt stalls after its handler
// returned, before its completion, until its lease (traceStallLease) has
// ended; then traceStorm retries of the key arrive at once on both nodes.
// Half the stalls (stale completions) let the first attempt complete once
// a retry has taken over, while that retry still runs: the store must
// refuse the completion. The other half (stale reads) let it complete
// right after a retry read the record, before that retry's takeover: the
// store must refuse the takeover. The nodes' pools carry a pgx tracer
// that holds that retry after its read. It is the chaos that the faults
// seeded into PostgresStore (internal/trace) need to show.
const (
	traceStallLease = time.Second
	traceStalls     = 6
	traceStorm      = 4
	traceHookBound  = 30 * time.Second // a hook never waits longer
)

// TestStalledTakeoversTraced: the stall run's trace is one the model allows.
func TestStalledTakeoversTraced(t *testing.T) {
	rec := trace.Start(t)
	runStalls(t)
	rec.Require(t, traceStalls*4)
}

// TestTraceCatchesSeededFaults: each fault seeded into PostgresStore's
// code makes the stall run's trace break the model (at the step the fault
// let through, or at a later read that no order of the steps explains);
// the run's own checks (replies) need not notice.
func TestTraceCatchesSeededFaults(t *testing.T) {
	for _, tt := range []struct{ fault trace.Fault }{{trace.CompleteIgnoresToken}, {trace.TakeoverTrustsRead}} {
		t.Run(string(tt.fault), func(t *testing.T) {
			trace.Seed(t, tt.fault)
			rec := trace.Start(t)
			runStalls(t)
			v := trace.Check(rec.Steps())
			require.NotNil(t, v, "the trace of a run with %s seeded passed the model", tt.fault)
			t.Logf("%s caught at %v: %s", tt.fault, v.Step, v.Why)
		})
	}
}

// runStalls runs traceStalls stalled charges at once on two nodes.
func runStalls(t *testing.T) {
	t.Helper()
	db := openDatabase(t, pgtest.SchemaURL(t))
	gw := httptest.NewServer(api.NewGateway(api.GatewayConfig{Logger: slog.New(slog.DiscardHandler)}))
	t.Cleanup(gw.Close)
	rig := &stallRig{stalls: map[string]*stall{}, scopes: map[[32]byte]*stall{}}
	var urls []string
	var servers []*httptest.Server
	for range 2 {
		cfg, err := pgxpool.ParseConfig(withParams(t, db.url, map[string]string{"pool_max_conns": fmt.Sprint(nodeConns)}))
		require.NoError(t, err)
		cfg.ConnConfig.Tracer = rig
		pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
		require.NoError(t, err)
		t.Cleanup(pool.Close)
		srv := httptest.NewServer(api.New(api.Config{Backend: api.NewPostgresBackend(pool), Store: server.NewPostgresStore(pool),
			Logger: slog.New(slog.DiscardHandler), GatewayURL: gw.URL, Lease: traceStallLease, Hooks: rig.hooks()}))
		t.Cleanup(srv.Close)
		servers, urls = append(servers, srv), append(urls, srv.URL)
	}
	proxy, err := testserver.NewProxy(urls, testserver.Config{})
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	var wg sync.WaitGroup
	for i := range traceStalls {
		op := operation{key: fmt.Sprintf("trace-stall-%s-%d", t.Name(), i), account: fundedAccount(i), amount: int64(100 + i)}
		s := rig.add(op.key, i%2 == 1)
		wg.Go(func() { stallOne(t, db, proxy.URL, op, s) })
	}
	wg.Wait()
	for _, srv := range servers {
		srv.Close()
	}
}

// stallOne sends op's first attempt, waits until it stalled and its lease
// ended, then sends the storm of retries, and waits for every reply.
func stallOne(t *testing.T, db *database, url string, op operation, s *stall) {
	first := make(chan reply, 1)
	go func() { first <- postCharge(t, url, op) }()
	if !s.await(s.handled) {
		t.Errorf("%s: the first attempt never reached its handler's end", op.key)
		return
	}
	waitLeaseEnded(t, db, op.key)
	s.armed.Store(true)
	var wg sync.WaitGroup
	for range traceStorm {
		wg.Go(func() { postCharge(t, url, op) })
	}
	wg.Wait()
	<-first
}

// waitLeaseEnded polls the record of key until its lease has ended.
func waitLeaseEnded(t *testing.T, db *database, key string) {
	t.Helper()
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	timeout := time.After(traceHookBound)
	for {
		var ended bool
		err := db.pool.QueryRow(context.Background(),
			`SELECT locked_until <= statement_timestamp() FROM idem_records WHERE idem_key = $1`, key).Scan(&ended)
		if err == nil && ended {
			return
		}
		select {
		case <-tick.C:
		case <-timeout:
			t.Errorf("%s: the stalled attempt's lease did not end within %s (%v)", key, traceHookBound, err)
			return
		}
	}
}

// stallRig holds the stalled keys; its hooks and its pgx tracer make the
// stalls.
type stallRig struct {
	mu     sync.Mutex
	stalls map[string]*stall
	scopes map[[32]byte]*stall
}

// stall is one stalled key: its first attempt reached the end of its
// handler (handled), may complete (release), and did (done). staleRead
// says which retry releases it: the first to read the record once the
// lease ended (armed), or the first to take over.
type stall struct {
	staleRead              bool
	armed                  atomic.Bool
	handled, release, done chan struct{}
	once                   [3]sync.Once
}

func (r *stallRig) add(key string, staleRead bool) *stall {
	s := &stall{staleRead: staleRead, handled: make(chan struct{}), release: make(chan struct{}), done: make(chan struct{})}
	r.mu.Lock()
	r.stalls[key] = s
	r.mu.Unlock()
	return s
}

func (r *stallRig) get(key string) *stall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stalls[key]
}

// await waits for c, at most traceHookBound: false when it timed out.
func (s *stall) await(c chan struct{}) bool {
	select {
	case <-c:
		return true
	case <-time.After(traceHookBound):
		return false
	}
}

// letGo releases the first attempt and waits until its completion ended.
func (s *stall) letGo() {
	s.once[1].Do(func() { close(s.release) })
	s.await(s.done)
}

// hooks: the first attempt stalls at Handled until released; a stale
// completion's retry that took over releases it at Claimed.
func (r *stallRig) hooks() server.Hooks {
	firstDone := func(_ context.Context, e server.Event) {
		if s := r.get(e.Key); s != nil && e.Attempt == 1 {
			s.once[2].Do(func() { close(s.done) })
		}
	}
	return server.Hooks{
		Handled: func(_ context.Context, e server.Event) {
			if s := r.get(e.Key); s != nil && e.Attempt == 1 {
				r.mu.Lock()
				r.scopes[fingerprint.Scope(e.Tenant, e.Principal, e.Route, e.Key)] = s
				r.mu.Unlock()
				s.once[0].Do(func() { close(s.handled) })
				s.await(s.release)
			}
		},
		Claimed: func(_ context.Context, e server.Event) {
			if s := r.get(e.Key); s != nil && e.Attempt > 1 && !s.staleRead {
				s.letGo()
			}
		},
		Committed:       firstDone,
		StaleCompletion: firstDone,
		Released:        firstDone,
	}
}

// stallRead is the scope a traced query reads with sqlRead, if it is a
// stale read's stall.
type stallRead struct{}

// TraceQueryStart notes the scope of a claim's read of a record.
func (r *stallRig) TraceQueryStart(ctx context.Context, _ *pgx.Conn, d pgx.TraceQueryStartData) context.Context {
	if !strings.HasPrefix(d.SQL, "SELECT r.fp_alg") || len(d.Args) == 0 {
		return ctx
	}
	scope, ok := d.Args[0].([]byte)
	if !ok || len(scope) != 32 {
		return ctx
	}
	r.mu.Lock()
	s := r.scopes[[32]byte(scope)]
	r.mu.Unlock()
	if s == nil || !s.staleRead {
		return ctx
	}
	return context.WithValue(ctx, stallRead{}, s)
}

// TraceQueryEnd holds the first read of a stale read's record after its
// lease ended until the first attempt has completed.
func (r *stallRig) TraceQueryEnd(ctx context.Context, _ *pgx.Conn, _ pgx.TraceQueryEndData) {
	if s, ok := ctx.Value(stallRead{}).(*stall); ok && s.armed.Load() {
		s.letGo()
	}
}
