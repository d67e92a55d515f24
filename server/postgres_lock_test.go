package server

import (
	"context"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/wire"
)

// The scope's advisory lock is what makes claims of one key wait for each
// other: these tests cover what the behaviour tests over both stores
// cannot.

func TestLeasedClaimWaitsForATransactionalClaim(t *testing.T) {
	k := postgresKit(t)
	g := newGate(t, k)
	route := func(*http.Request) string { return "POST /v1/payments" } // one operation, two modes (a rolling deploy)
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{Route: route}))(g))
	leased := func(wait time.Duration) http.Handler {
		return Middleware(k.store, quiet(Config{Route: route, Mode: Leased, WaitBound: wait}))(g)
	}
	mux.Handle("POST /v2/payments/hasty", leased(50*time.Millisecond))
	mux.Handle("POST /v2/payments/patient", leased(time.Minute))
	srv := serve(t, mux)

	first := make(chan reply)
	go func() { first <- post(t, srv, "/v1/payments", "k-modes", "{}") }()
	recv(t, g.entered)
	hastyCh := make(chan reply) // a request that runs the handler would hold: receive with a bound
	go func() { hastyCh <- post(t, srv, "/v2/payments/hasty", "k-modes", "{}") }()
	hasty := recv(t, hastyCh)
	assert.Equal(t, http.StatusConflict, hasty.status, hasty.body)
	assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, hasty))

	patient := make(chan reply)
	go func() { patient <- post(t, srv, "/v2/payments/patient", "k-modes", "{}") }()
	k.waitForWaiters(t, 1)
	g.open()
	r1, r2 := recv(t, first), recv(t, patient)
	assert.Equal(t, http.StatusCreated, r1.status)
	assert.Equal(t, http.StatusCreated, r2.status, r2.body)
	assert.True(t, r2.replayed(), "the Leased claim waited for the Transactional one and replays it")
	assert.Equal(t, r1.body, r2.body)
	assert.EqualValues(t, 1, g.runs.Load())
	assert.Equal(t, 1, k.count(t, "pay"))
}

// slowPool is a pool whose every Acquire runs spend first: a test's way to
// make a pool wait take the time it chooses on the store's clock.
type slowPool struct {
	*pgxpool.Pool
	spend func()
}

func (p slowPool) Acquire(ctx context.Context) (*pgxpool.Conn, error) {
	p.spend()
	return p.Pool.Acquire(ctx)
}

// A Leased claim whose pool wait took the whole wait bound waits no longer
// for the scope's lock: 409 key-in-flight at once, not a second bound.
func TestLeasedClaimSpendsOneWaitBound(t *testing.T) {
	k := postgresKit(t)
	g := newGate(t, k)
	route := func(*http.Request) string { return "POST /v1/payments" }
	const bound = 2 * time.Minute // past recv's 30 s: a second bound fails the test
	var spent atomic.Int64
	slow := NewPostgresStore(slowPool{Pool: k.pool, spend: func() { spent.Add(int64(bound)) }})
	slow.clock = k.clock.offset
	slow.now = func() time.Time { return time.Now().Add(time.Duration(spent.Load())) }
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{Route: route}))(g))
	mux.Handle("POST /v2/payments", Middleware(slow, quiet(Config{Route: route, Mode: Leased, WaitBound: bound}))(g))
	srv := serve(t, mux)

	first := make(chan reply)
	go func() { first <- post(t, srv, "/v1/payments", "k-spent", "{}") }()
	recv(t, g.entered) // the Transactional attempt holds the scope's lock
	leased := make(chan reply)
	go func() { leased <- post(t, srv, "/v2/payments", "k-spent", "{}") }()
	r := recv(t, leased)
	assert.Equal(t, http.StatusConflict, r.status, r.body)
	assert.Equal(t, wire.ProblemKeyInFlight, problemName(t, r))
	g.open()
	assert.Equal(t, http.StatusCreated, recv(t, first).status)
	assert.EqualValues(t, 1, g.runs.Load())
}

func TestRecordWrittenWithoutTheLockFailsTheCommit(t *testing.T) {
	k := postgresKit(t)
	const key, route = "k-unlocked", "POST /v1/payments"
	foreign := func(ctx context.Context) error { // a writer that took no lock: an older node, a manual insert
		scope := fingerprint.Scope("", "", route, key)
		fp := fingerprint.Sum(&fingerprint.Input{Method: "POST", Route: route, Body: []byte("{}")})
		_, err := k.pool.Exec(ctx, `INSERT INTO idem_records (scope_hash, tenant, principal, route, idem_key,
    fp_alg, fingerprint, state, token, attempt, created_at, expires_at, status, headers, body)
VALUES ($1, '', '', $2, $3, $4, $5, 'done', $6, 1, now(), now() + interval '1 hour', 201, $7, 'foreign')`,
			scope[:], route, key, fingerprint.Alg, fp, [16]byte(uuid.New()), encodeHeader(http.Header{}))
		return err
	}
	var runs int
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		runs++
		assert.NoError(t, k.effect(r.Context(), "pay"))
		assert.NoError(t, foreign(r.Context()))
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", Middleware(k.store, quiet(Config{}))(h))
	srv := serve(t, mux)
	first := post(t, srv, "/v1/payments", key, "{}")
	assert.Equal(t, http.StatusInternalServerError, first.status, first.body)
	assert.Equal(t, problemCommitFailed, problemName(t, first))
	assert.Equal(t, 0, k.count(t, "pay"), "the handler's effects rolled back")
	retry := post(t, srv, "/v1/payments", key, "{}")
	assert.True(t, retry.replayed())
	assert.Equal(t, "foreign", retry.body, "the record that committed first stands")
	assert.Equal(t, 1, runs)
}
