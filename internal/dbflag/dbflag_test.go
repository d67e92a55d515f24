package dbflag

import (
	"flag"
	"io"
	"strings"
	"testing"
)

func TestVar(t *testing.T) {
	env := map[string]string{}
	getenv := func(k string) string { return env[k] }
	parse := func(args ...string) (string, string) {
		t.Helper()
		var db string
		fs := flag.NewFlagSet("p", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		Var(fs, &db, getenv, Memory)
		if err := fs.Parse(args); err != nil {
			t.Fatalf("Parse(%q): %v", args, err)
		}
		var usage strings.Builder
		fs.SetOutput(&usage)
		fs.PrintDefaults()
		return db, usage.String()
	}
	if db, usage := parse(); db != "" || !strings.Contains(usage, "-db URL\n") ||
		!strings.Contains(usage, "Postgres URL; default $DATABASE_URL; empty: everything in memory") {
		t.Errorf("without DATABASE_URL: -db = %q, usage\n%s", db, usage)
	}
	env[Env] = "postgres://a/b"
	if db, usage := parse(); db != "postgres://a/b" || !strings.Contains(usage, `(default "postgres://a/b")`) {
		t.Errorf("with DATABASE_URL: -db = %q, usage\n%s", db, usage)
	}
	if db, _ := parse("-db", ""); db != "" {
		t.Errorf("-db '' = %q, want empty whatever DATABASE_URL says", db)
	}
	if db, _ := parse("-db", "postgres://c/d"); db != "postgres://c/d" {
		t.Errorf("-db postgres://c/d = %q", db)
	}
}
