package testserver

import (
	"errors"
	"strconv"
	"testing"
)

func TestParseSeed(t *testing.T) {
	if n, err := ParseSeed("42"); n != 42 || err != nil {
		t.Errorf(`ParseSeed("42") = %d, %v; want 42`, n, err)
	}
	if _, err := ParseSeed(""); err != nil {
		t.Errorf(`ParseSeed("") = %v, want a seed from the clock`, err)
	}
	for in, want := range map[string]error{"x": strconv.ErrSyntax, "-1": strconv.ErrSyntax, "18446744073709551616": strconv.ErrRange} {
		if _, err := ParseSeed(in); !errors.Is(err, want) {
			t.Errorf("ParseSeed(%q) error = %v, want %v", in, err, want)
		}
	}
}

func TestSeedReadsTheEnvironment(t *testing.T) {
	t.Setenv(seedEnv, "7")
	if got := Seed(t); got != 7 {
		t.Fatalf("Seed with %s=7 = %d, want 7", seedEnv, got)
	}
}
