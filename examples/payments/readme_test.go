package main

import (
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
)

// The walk-throughs in the READMEs run on a fresh machine: they need no
// uuidgen (a machine may lack it, and the header then goes out empty), the
// command they give for a key makes a valid one, and they write no file
// into the repository.
func TestWalkThroughsRunOnAFreshMachine(t *testing.T) {
	var docs strings.Builder
	for _, path := range []string{"README.md", "../../README.md"} {
		b, err := os.ReadFile(path)
		require.NoError(t, err)
		docs.Write(b)
	}
	text := docs.String()
	assert.NotContains(t, text, "uuidgen")
	assert.NotRegexp(t, `>\s*rules\.json`, text, "a rules file written into the working directory")

	m := regexp.MustCompile(`KEY=\$\((.+?)\)\s+#`).FindStringSubmatch(text)
	require.NotNil(t, m, "the walk-through gives a command for a key")
	out, err := exec.Command("sh", "-c", m[1]).Output()
	require.NoError(t, err, "sh -c %q", m[1])
	key := string(out)
	assert.NoError(t, wire.ValidateKey(key), "the key %q", key)
	assert.Len(t, key, 32)
}
