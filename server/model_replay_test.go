package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/fingerprint"
	"github.com/idemkit/idem/internal/model"
)

// TestModelCounterexamplesAreRefused replays against each store the
// counterexample that spin finds for a seeded mutant of the lease protocol
// (internal/model): every step but the last must come out as the model
// says, and the last, the write that the mutant let through, must be
// refused by the real store and change nothing.
func TestModelCounterexamplesAreRefused(t *testing.T) {
	for _, name := range []string{"complete-ignores-token", "takeover-keeps-token", "reconciler-ignores-token",
		"sweep-ignores-lease", "takeover-trusts-read", "sweep-ignores-uncertain"} {
		m, ok := model.MutantNamed(name)
		require.True(t, ok, "no mutant %s", name)
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			for _, d := range m.Defines {
				require.NotRegexp(t, `^(LEASE|RETENTION|RLEASE|MAXAGE|BACKOFF)=`, d, "replay assumes idem.pml's default bounds")
			}
			trail := model.Verify(t, m.Config, true).Trail(t)
			require.NotEmpty(t, trail)
			eachStore(t, func(t *testing.T, k *kit) {
				r := &replayer{t: t, k: k, atts: map[int]Attempt{}, fps: map[int]int{}, taken: map[int]*Taken{}, reads: map[int]read{}}
				last := trail[len(trail)-1]
				if k.pool == nil && r.interleavesAClaim(trail) {
					t.Skip("MemoryStore reads and takes over under one mutex: no step can come between")
				}
				for _, e := range trail[:len(trail)-1] {
					require.Equal(t, r.modelOutcome(e), r.step(e), "step %q of %v", e, trail)
				}
				before := r.snapshot()
				require.Equal(t, refused(last), r.step(last), "the mutant's step %q of %v", last, trail)
				require.Equal(t, before, r.snapshot(), "the refused step %q changed the record", last)
			})
		})
	}
}

// The model's bounds (idem.pml's defaults) in time: one tick of its clock
// is a minute, far above the milliseconds a step takes.
const (
	modelTick      = time.Minute
	modelLease     = 2 * modelTick
	modelRetention = 4 * modelTick
	modelRLease    = 1 * modelTick
	modelBackoff   = 1 * modelTick
	modelMaxAge    = 2 * modelTick
	modelRoute     = "POST /v1/charges"
)

var modelScope = fingerprint.Scope("t", "p", modelRoute, "k-model")

// replayer drives a store through a model trail. Model processes are
// named by pid: a client's (or the legacy record's) live attempt, the
// reconciler's operation, and a claim's read of the record that the model
// interleaves with other steps before the claim's takeover.
type replayer struct {
	t     *testing.T
	k     *kit
	atts  map[int]Attempt
	fps   map[int]int
	taken map[int]*Taken
	reads map[int]read
	recFp int // the fingerprint of the request the record stores
}

// read is what a claim's sqlRead found, for its sqlTakeover (steal).
type read struct{ f *found }

// interleavesAClaim reports a trail in which a step of another process
// comes between a claim's read and its takeover.
func (r *replayer) interleavesAClaim(trail []model.Event) bool {
	for i, e := range trail {
		if e.Op == "read" && (i+1 == len(trail) || trail[i+1].Pid != e.Pid || trail[i+1].Op != "claim") {
			return true
		}
	}
	return false
}

// modelOutcome is what the model says event e returned, in step's terms.
func (r *replayer) modelOutcome(e model.Event) string {
	switch e.Op {
	case "claim", "read": // after the fingerprint: the verdict, and a claim's first attempt and recovery point
		return strings.Join(e.Args[1:], " ")
	case "abort": // after reject
		return e.Args[1]
	}
	return strings.Join(e.Args, " ")
}

// refused is what a store that refuses e's write returns.
func refused(e model.Event) string {
	switch e.Op {
	case "sweep":
		return "0"
	case "claim":
		return "pending" // a takeover that matched nothing
	}
	return "lost"
}

// step runs e on the store and returns its outcome as the model prints it.
func (r *replayer) step(e model.Event) string {
	ctx := context.Background()
	switch e.Op {
	case "tick":
		r.k.clock.Advance(modelTick)
		return ""
	case "legacy":
		r.legacy(e.Pid)
		return ""
	case "read":
		r.read(e.Pid, r.int(e.Args[0]))
		return e.Args[1]
	case "claim":
		fp := r.int(e.Args[0])
		if _, ok := r.reads[e.Pid]; ok {
			return r.takeover(e.Pid, fp)
		}
		return r.claim(e.Pid, fp)
	case "checkpoint":
		return fenced(r.leased(e).Checkpoint(ctx, "charged", json.RawMessage(`{"charge":"ch_1"}`)))
	case "extend":
		return fenced(r.leased(e).Extend(ctx, modelLease, modelLease))
	case "complete":
		return fenced(r.att(e).Complete(ctx, modelResponse(r.fps[e.Pid])))
	case "abort":
		return r.abort(r.att(e), e.Args[0] == "1")
	case "crash":
		delete(r.atts, e.Pid)
		return ""
	case "take":
		return r.take(e.Pid)
	case "rcomplete":
		return fenced(r.taken[e.Pid].Settler.Complete(ctx, modelResponse(r.fps[e.Pid])))
	case "rpark":
		return fenced(r.taken[e.Pid].Settler.(UncertainSettler).Uncertain(ctx))
	case "resolve":
		return r.resolve(e.Args[0] == "applied")
	case "rfree":
		return fenced(r.taken[e.Pid].Settler.Free(ctx))
	case "rpostpone":
		return fenced(r.taken[e.Pid].Settler.Postpone(ctx, modelBackoff))
	case "sweep":
		n, err := r.k.store.Sweep(ctx, 100)
		require.NoError(r.t, err)
		return strconv.Itoa(n)
	}
	r.t.Fatalf("the model printed an event the replay does not know: %q", e)
	return ""
}

func (r *replayer) int(s string) int {
	n, err := strconv.Atoi(s)
	require.NoError(r.t, err)
	return n
}

func (r *replayer) att(e model.Event) Attempt {
	att := r.atts[e.Pid]
	require.NotNil(r.t, att, "process %d has no attempt for %q", e.Pid, e)
	return att
}

// leased is the Leased attempt of e's process, whose Lease methods the
// model's checkpoint and extend call.
func (r *replayer) leased(e model.Event) LeasedAttempt {
	att, ok := r.att(e).(LeasedAttempt)
	require.True(r.t, ok, "process %d's attempt is not Leased", e.Pid)
	return att
}

// fenced is a fenced write's result: ok, or lost for ErrLeaseLost.
func fenced(err error) string {
	if errors.Is(err, ErrLeaseLost) {
		return "lost"
	}
	if err != nil {
		return err.Error()
	}
	return "ok"
}

// modelResponse is the response of an attempt for fingerprint fp: its body
// names the request it answers.
func modelResponse(fp int) *Response {
	return &Response{Status: http.StatusCreated, Header: http.Header{}, Body: []byte(fmt.Sprintf("fp%d", fp))}
}

func modelClaim(fp int) *Claim {
	return &Claim{
		Scope: modelScope, Tenant: "t", Principal: "p", Route: modelRoute, Key: "k-model",
		Digest: []byte{byte(fp)}, DigestAlg: fingerprint.Alg, Mode: Leased, Lease: modelLease, Retention: modelRetention, Wait: time.Second,
	}
}

// read is a claim's sqlRead, whose takeover comes at the process's next
// claim event. MemoryStore judges and takes over in one step: its claim
// runs there.
func (r *replayer) read(pid, fp int) {
	s, ok := r.k.store.(*PostgresStore)
	if !ok {
		r.reads[pid] = read{}
		return
	}
	f, err := s.read(context.Background(), r.k.pool, modelClaim(fp))
	require.NoError(r.t, err)
	require.NotNil(r.t, f)
	r.reads[pid] = read{f: f}
}

// takeover is the sqlTakeover of a claim that read the record earlier:
// "pending" when it matched nothing.
func (r *replayer) takeover(pid, fp int) string {
	rd := r.reads[pid]
	delete(r.reads, pid)
	s, ok := r.k.store.(*PostgresStore)
	if !ok {
		return r.claim(pid, fp)
	}
	c := modelClaim(fp)
	require.Equal(r.t, vTakeover, decide(rd.f, c), "the read saw an expired lease")
	token := uuid.New()
	g, won, err := s.steal(context.Background(), r.k.pool, c, token, rd.f, vTakeover)
	require.NoError(r.t, err)
	if !won {
		return "pending"
	}
	r.atts[pid], r.fps[pid] = &leasedAttempt{fence: pgFence{s: s, scope: modelScope, token: token}, g: g}, fp
	return fmt.Sprintf("claimed 0 %d", b2i(g.recovery != nil && g.recovery.Point != ""))
}

func (r *replayer) claim(pid, fp int) string {
	res, err := r.k.store.Claim(context.Background(), modelClaim(fp))
	if errors.Is(err, errClaimContention) {
		return "contention 0 0"
	}
	require.NoError(r.t, err)
	switch res.Verdict {
	case VerdictClaimed:
		r.atts[pid], r.fps[pid] = res.Attempt, fp
		if res.Attempt.Number() == 1 {
			r.recFp = fp
		}
		rec, took := res.Attempt.(LeasedAttempt).Recovery()
		return fmt.Sprintf("claimed %d %d", b2i(res.Attempt.Number() == 1), b2i(took && rec.Point != ""))
	case VerdictReplay:
		require.Equal(r.t, fmt.Sprintf("fp%d", fp), string(res.Response.Body), "the replay answers another request")
		return "replay 0 0"
	case VerdictInFlight:
		return "inflight 0 0"
	case VerdictMismatch:
		return "mismatch 0 0"
	case VerdictUnavailable:
		return "unavailable 0 0"
	case VerdictUncertain:
		return "uncertain 0 0"
	}
	r.t.Fatalf("claim verdict %d", res.Verdict)
	return ""
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// abort ends an attempt (reject: the request was refused) and tells a
// released key from an ended lease by whether the record is left.
func (r *replayer) abort(att Attempt, reject bool) string {
	if err := att.Abort(context.Background(), reject); err != nil {
		return fenced(err)
	}
	if r.snapshot() == "none" {
		return "released"
	}
	return "ended"
}

// take runs a reconciler's takeover; the model's take prints whether the
// operation had reached MaxAge.
func (r *replayer) take(pid int) string {
	ts, err := r.k.store.TakeAbandoned(context.Background(), []string{modelRoute}, modelRLease, 16)
	require.NoError(r.t, err)
	require.Len(r.t, ts, 1, "the model's reconciler took the operation over")
	r.taken[pid] = ts[0]
	return strconv.Itoa(b2i(ts[0].Age >= modelMaxAge))
}

// legacy writes, as an older version might have, a running record whose
// lease (two ticks) outlasts its retention (one tick), and gives process
// pid its attempt.
func (r *replayer) legacy(pid int) {
	token := uuid.New()
	var f fence
	switch s := r.k.store.(type) {
	case *PostgresStore:
		_, err := r.k.pool.Exec(context.Background(), `INSERT INTO idem_records (scope_hash, tenant, principal, route,
			idem_key, fp_alg, fingerprint, state, token, attempt, locked_until, created_at, expires_at)
		SELECT $1, 't', 'p', $2, 'k-model', $3, $4, 'running', $5, 1, t + $7::interval, t, t + $8::interval
		FROM (SELECT statement_timestamp() + $6::interval AS t) AS clock`,
			modelScope[:], modelRoute, fingerprint.Alg, []byte{1}, [16]byte(token), r.k.clock.offset(), modelLease, modelTick)
		require.NoError(r.t, err)
		f = pgFence{s: s, scope: modelScope, token: token}
	case *MemoryStore:
		now := s.now()
		s.mu.Lock()
		s.put(modelScope, &memRecord{
			op:        Operation{Tenant: "t", Principal: "p", Route: modelRoute, Key: "k-model"},
			createdAt: now, fpAlg: fingerprint.Alg, fp: []byte{1}, state: stateRunning, mode: Leased,
			token: token, attempt: 1, lockedUntil: now.Add(modelLease), expiresAt: now.Add(modelTick),
		})
		s.mu.Unlock()
		f = memFence{m: s, scope: modelScope, token: token}
	}
	r.atts[pid], r.fps[pid] = &leasedAttempt{fence: f, g: grant{attempt: 1}}, 1
}

// snapshot is the record of the model's key as the store holds it, "none"
// when there is none.
func (r *replayer) snapshot() string {
	switch s := r.k.store.(type) {
	case *PostgresStore:
		var row string
		require.NoError(r.t, r.k.pool.QueryRow(context.Background(), `SELECT coalesce(
			(SELECT to_jsonb(r)::text FROM idem_records AS r WHERE scope_hash = $1), 'none')`, modelScope[:]).Scan(&row))
		return row
	case *MemoryStore:
		s.mu.Lock()
		defer s.mu.Unlock()
		rec := s.recs[modelScope]
		if rec == nil {
			return "none"
		}
		return fmt.Sprintf("%+v %+v", *rec, rec.resp)
	}
	r.t.Fatalf("no snapshot of a %T", r.k.store)
	return ""
}

// resolve is an operator's resolution of the uncertain record: applied
// (with the response of the request it stores) or not: "applied" or
// "notapplied" as the model prints it.
func (r *replayer) resolve(applied bool) string {
	res := Resolution{Applied: applied, By: "model", Reason: "replay", Retention: modelRetention}
	outcome := "notapplied"
	if applied {
		res.Response, outcome = modelResponse(r.recFp), "applied"
	}
	op := Operation{Tenant: "t", Principal: "p", Route: modelRoute, Key: "k-model"}
	_, err := r.k.store.(Resolver).Resolve(context.Background(), op, res)
	require.NoError(r.t, err)
	return outcome
}
