package trace

import (
	"fmt"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/model"
)

// TestTransitionsAcceptTheModel: every history of idem.pml that spin's
// random simulation generates, in the configurations of its checks
// (Leased: the transitions cover Leased records), is allowed by the
// checker's transitions. With TestTransitionsRefuseTheMutants, this holds
// transitions.go equal to the model on the statements both judge.
func TestTransitionsAcceptTheModel(t *testing.T) {
	seen := map[string]int{}
	for _, cfg := range []model.Config{{Name: "leased", Defines: []string{"REQS=3"}}, {Name: "three-clients", Defines: []string{"CLIENTS=3"}}} {
		for seed := 1; seed <= 40; seed++ {
			evs := model.Simulate(t, cfg, seed, 3000)
			steps := fromModel(evs)
			require.NotEmpty(t, steps, "%s seed %d: no step", cfg.Name, seed)
			if v := Check(steps); v != nil {
				t.Fatalf("%s seed %d: the model allows %v, the checker refuses: %v", cfg.Name, seed, evs, v)
			}
			for _, s := range steps {
				seen[string(s.Op)+" "+s.Wrote.Kind+s.Saw.Kind]++
			}
		}
	}
	// the simulations reach the uncertain state and both resolutions
	for _, want := range []string{"settle uncertain", "resolve done", "resolve not-applied", "read uncertain"} {
		require.Positive(t, seen[want], "no %q step in the simulations: %v", want, seen)
	}
}

// TestTransitionsRefuseTheMutants: the counterexample of each mutant of
// the model whose fault is in a token or a state (not in a time guard,
// which a trace does not judge) is refused by the checker at its last
// step, the one the mutant let through.
func TestTransitionsRefuseTheMutants(t *testing.T) {
	for _, name := range []string{"complete-ignores-token", "takeover-keeps-token", "reconciler-ignores-token", "takeover-trusts-read", "sweep-ignores-uncertain"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			m, ok := model.MutantNamed(name)
			require.True(t, ok)
			evs := model.Verify(t, m.Config, true).Trail(t)
			steps := fromModel(evs)
			require.Nil(t, Check(steps[:len(steps)-1]), "the trail before its last step: %v", evs)
			v := Check(steps)
			require.NotNil(t, v, "the mutant's trail passed: %v", evs)
			require.Equal(t, steps[len(steps)-1].Op, v.Step.Op, "%v", v)
			t.Logf("%s: %s", name, v.Why)
		})
	}
}

// fromModel turns the model's events into a trace of one scope: each
// event at a time of its own (the model's steps are atomic and ordered),
// each process's attempt under a token of its own. Events that reach no
// record (ticks, crashes, claims that did not win) give no step.
func fromModel(evs []model.Event) []Step {
	c := &converter{tok: map[int]uuid.UUID{}, read: map[int]uuid.UUID{}}
	for i, e := range evs {
		at := time.Unix(0, 0).Add(time.Duration(i) * time.Second)
		for _, s := range c.steps(e) {
			s.Scope, s.Start, s.End = "model", at, at
			c.out = append(c.out, s)
		}
	}
	return c.out
}

type converter struct {
	tok    map[int]uuid.UUID // each process's current attempt
	read   map[int]uuid.UUID // the token a process's read saw, for its takeover
	cur    uuid.UUID         // the record's token, as the last claim wrote it
	exists bool
	out    []Step
}

func (c *converter) steps(e model.Event) []Step {
	arg := func(i int) string {
		if i < len(e.Args) {
			return e.Args[i]
		}
		return ""
	}
	ok := arg(0) == "ok"
	mine := c.tok[e.Pid]
	switch e.Op {
	case "claim":
		if arg(1) == "uncertain" { // a claim refused on what it read
			return []Step{{Op: Read, Saw: State{Kind: "uncertain"}}}
		}
		return c.claim(e.Pid, arg(1), arg(2))
	case "read":
		c.read[e.Pid] = c.cur
	case "take":
		return []Step{c.claimed(e.Pid, Take, uuid.Nil)}
	case "complete":
		return []Step{{Op: Complete, Token: mine, OK: ok, Wrote: State{Kind: "done"}}}
	case "checkpoint", "extend":
		return []Step{{Op: Op(e.Op), Token: mine, OK: ok}}
	case "abort":
		return c.abort(mine, arg(0) == "1", arg(1))
	case "rcomplete", "rfree", "rpostpone", "rpark":
		wrote := map[string]string{"rcomplete": "done", "rfree": "none", "rpostpone": "running", "rpark": "uncertain"}[e.Op]
		if ok && wrote == "none" {
			c.exists = false
		}
		return []Step{{Op: Settle, Token: mine, OK: ok, Wrote: State{Kind: wrote}}}
	case "resolve": // "resolve applied|notapplied": a new token
		c.cur = uuid.New()
		wrote := map[string]string{"applied": "done", "notapplied": "not-applied"}[arg(0)]
		return []Step{{Op: Resolve, New: c.cur, OK: true, Wrote: State{Kind: wrote}}}
	case "sweep":
		c.exists = false
		return []Step{{Op: Sweep, OK: true}}
	}
	return nil
}

// claim: "claim fp verdict first point"; a won claim of a first attempt
// is an insert or a reclaim, of a later one a takeover.
func (c *converter) claim(pid int, verdict, first string) []Step {
	switch {
	case verdict != "claimed":
		return nil
	case first == "0":
		return []Step{c.claimed(pid, Takeover, c.read[pid])}
	case c.exists:
		return []Step{c.claimed(pid, Reclaim, uuid.Nil)}
	}
	return []Step{c.claimed(pid, Insert, uuid.Nil)}
}

func (c *converter) claimed(pid int, op Op, read uuid.UUID) Step {
	n := uuid.New()
	c.tok[pid], c.cur, c.exists = n, n, true
	return Step{Op: op, Token: read, New: n, OK: true}
}

// abort: "abort reject released|ended|lost", sqlRelease (when refused)
// then sqlEndLease.
func (c *converter) abort(tok uuid.UUID, reject bool, r string) []Step {
	var out []Step
	if reject {
		out = append(out, Step{Op: Release, Token: tok, OK: r == "released"})
	}
	switch r {
	case "released":
		c.exists = false
		return out
	case "ended", "lost":
		return append(out, Step{Op: EndLease, Token: tok, OK: r == "ended"})
	}
	panic(fmt.Sprintf("abort %q", r))
}
