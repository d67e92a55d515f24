package main

import (
	"errors"
	"flag"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// -h prints every flag with its default: a flag whose zero means the
// outbox's default says so, with the value, and -db names DATABASE_URL.
func TestHelpShowsTheDefaults(t *testing.T) {
	var out strings.Builder
	_, err := parseFlags([]string{"-h"}, &out, func(string) string { return "" })
	require.True(t, errors.Is(err, flag.ErrHelp), "parseFlags(-h) = %v", err)
	help := out.String()
	assert.Contains(t, help, "default $DATABASE_URL; empty: refused")
	assert.Contains(t, help, `bound of each HTTP attempt (default 2s)`)
	outboxDefault := regexp.MustCompile(`\(0: the outbox's default, [^)]+\)`)
	for _, name := range []string{"timeout", "rescue-after", "poll", "workers", "max-attempts", "min-backoff", "max-backoff"} {
		usage := regexp.MustCompile(`(?m)^  -` + name + `\b.*\n((?:    .*\n)*)`).FindStringSubmatch(help)
		if assert.NotNil(t, usage, "-h lists no -%s:\n%s", name, help) {
			assert.Regexp(t, outboxDefault, usage[1], "-%s's usage", name)
		}
	}
}

func TestDatabaseURLIsTheDefault(t *testing.T) {
	o, err := parseFlags(nil, io.Discard, func(k string) string {
		return map[string]string{"DATABASE_URL": "postgres://db/x"}[k]
	})
	require.NoError(t, err)
	assert.Equal(t, "postgres://db/x", o.db)

	var out strings.Builder
	_, err = parseFlags(nil, &out, func(string) string { return "" })
	assert.ErrorIs(t, err, errUsage, "no -db and no DATABASE_URL")
	assert.Contains(t, out.String(), "-db (or DATABASE_URL) is required")
}
