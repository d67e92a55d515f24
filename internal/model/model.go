// Package model checks idem's record lifecycle with the spin model checker.
// idem.pml is the model, written from docs/CONTRACT.md and the server
// package's Store contract at the grain of PostgresStore's statements
// (docs/CONTRACT.md §10 maps each transition to its SQL). Checks are the
// runs that must find no error, exhaustively within their bounds; Mutants
// are seeded faults that spin must catch. Verify runs one of them, and
// Result.Trail gives a counterexample's events, which the server package's
// tests replay against the real stores.
//
// Verify needs spin and gcc. Outside CI it skips the test when spin is
// missing; under CI=true it fails instead (bash .ci/run installs spin), so
// a green CI run means the model was checked.
package model

import (
	"bytes"
	"context"
	"embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

//go:embed idem.pml outbox.pml
var sources embed.FS

// Config is one run of spin over the model.
type Config struct {
	// Name names the run in logs and subtests.
	Name string
	// File is the model: "" for idem.pml (the record lifecycle), or
	// "outbox.pml" (an outbox message's lifecycle).
	File string
	// Defines are spin's -D flags: a bound ("REQS=3") or a mutant
	// ("M_COMPLETE_NO_TOKEN"); idem.pml documents them.
	Defines []string
	// Liveness checks the ltl formula "settled" under weak fairness
	// (pan -a -f); otherwise the run checks the assertions alone.
	Liveness bool
}

// memLimitMB bounds pan's memory: a run that needs more fails rather than
// exhausting a shared machine.
const memLimitMB = 3072

// maxDepth is pan's search depth; a run that reaches it fails (it would
// have missed states).
const maxDepth = 1000000

// Verify runs cfg and returns what pan reported: spin -a, gcc, pan, in a
// directory of tb's. shortest makes the search breadth-first, for the
// shortest counterexample (not for a Liveness run). It fails tb when a step
// cannot run, and skips it (fails under CI=true) when spin is missing.
func Verify(tb testing.TB, cfg Config, shortest bool) *Result {
	tb.Helper()
	spin := spinPath(tb)
	dir := tb.TempDir()
	file := writeModel(tb, dir, cfg)
	ctx := context.Background()
	run(tb, ctx, dir, spin, append(defines(cfg), "-a", file)...)
	run(tb, ctx, dir, "gcc", append(panFlags(cfg, shortest), "-o", "pan", "pan.c")...)
	args := []string{fmt.Sprintf("-m%d", maxDepth)}
	if cfg.Liveness {
		args = append(args, "-a", "-f")
	}
	start := time.Now()
	out := run(tb, ctx, dir, filepath.Join(dir, "pan"), args...)
	r, err := parse(out)
	if err != nil {
		tb.Fatalf("%s: %v\n%s", cfg.Name, err, out)
	}
	r.Elapsed, r.cfg, r.dir, r.spin, r.Output = time.Since(start), cfg, dir, spin, out
	return r
}

func defines(cfg Config) []string {
	var ds []string
	for _, d := range cfg.Defines {
		ds = append(ds, "-D"+d)
	}
	return ds
}

// panFlags are gcc's flags for pan.c: exhaustive (COLLAPSE compresses
// states without losing any), bounded in memory.
func panFlags(cfg Config, shortest bool) []string {
	flags := []string{"-O2", fmt.Sprintf("-DMEMLIM=%d", memLimitMB), "-DNFAIR=3"}
	switch {
	case cfg.Liveness:
		flags = append(flags, "-DCOLLAPSE")
	case shortest: // small searches: compiling fast matters more
		flags = append(flags, "-O0", "-DSAFETY", "-DNOCLAIM", "-DBFS")
	default:
		flags = append(flags, "-DSAFETY", "-DNOCLAIM", "-DCOLLAPSE")
	}
	return flags
}

// run runs name in dir and returns its output, failing tb on an error.
func run(tb testing.TB, ctx context.Context, dir, name string, args ...string) string {
	tb.Helper()
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		tb.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out.String())
	}
	return out.String()
}

// spinPath finds spin, or skips tb (fails it under CI=true).
func spinPath(tb testing.TB) string {
	tb.Helper()
	path, err := exec.LookPath("spin")
	if err == nil {
		_, err = exec.LookPath("gcc")
	}
	if err == nil {
		return path
	}
	if os.Getenv("CI") == "true" {
		tb.Fatalf("%v; under CI=true the model check must run (bash .ci/run installs spin)", err)
	}
	tb.Skipf("%v; skipping the model check (apt-get install spin, or bash .ci/run)", err)
	return ""
}

// file is cfg's model file.
func (cfg Config) file() string {
	if cfg.File == "" {
		return "idem.pml"
	}
	return cfg.File
}

// writeModel writes cfg's model into dir and returns its name.
func writeModel(tb testing.TB, dir string, cfg Config) string {
	tb.Helper()
	src, err := sources.ReadFile(cfg.file())
	if err == nil {
		err = os.WriteFile(filepath.Join(dir, cfg.file()), src, 0o644)
	}
	if err != nil {
		tb.Fatal(err)
	}
	return cfg.file()
}
