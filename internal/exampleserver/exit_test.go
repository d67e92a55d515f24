package exampleserver

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
	"testing"
)

// TestExitCode: help and success exit 0 silently, a usage error 2
// silently (the program reported it), any other error 1, printed after
// the program's name.
func TestExitCode(t *testing.T) {
	for _, tc := range []struct {
		err    error
		code   int
		stderr string
	}{
		{nil, 0, ""},
		{flag.ErrHelp, 0, ""},
		{ErrUsage, 2, ""},
		{fmt.Errorf("-db: %w", ErrUsage), 2, ""},
		{errors.New("boom"), 1, "prog: boom\n"},
	} {
		var stderr strings.Builder
		if code := exitCode("prog", tc.err, &stderr); code != tc.code || stderr.String() != tc.stderr {
			t.Errorf("exitCode(%v) = %d, stderr %q; want %d, %q", tc.err, code, stderr.String(), tc.code, tc.stderr)
		}
	}
}

// TestParse: -h is flag.ErrHelp, a bad flag ErrUsage, good flags nil.
func TestParse(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want error
	}{{nil, nil}, {[]string{"-n", "2"}, nil}, {[]string{"-h"}, flag.ErrHelp}, {[]string{"-bogus"}, ErrUsage}} {
		fs := flag.NewFlagSet("prog", flag.ContinueOnError)
		fs.SetOutput(io.Discard)
		fs.Int("n", 0, "a number")
		if err := Parse(fs, tc.args); !errors.Is(err, tc.want) || (tc.want == nil && err != nil) {
			t.Errorf("Parse(%q) = %v, want %v", tc.args, err, tc.want)
		}
	}
}
