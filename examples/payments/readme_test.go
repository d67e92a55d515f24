package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/testserver"
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

// tableHeader is the first row of the demo's table.
var tableHeader = fmt.Sprintf("%-40s %14s %14s", "", "idem client", "naive client")

// reportLabels returns the labels of the table's rows as printReport
// prints them when every fault of the demo's mix occurred.
func reportLabels(t *testing.T) []string {
	t.Helper()
	faults := map[testserver.FaultKind]int{}
	for k := range faultLabels {
		faults[k] = 1
	}
	idemc := column{name: "idem client", summary: testserver.Summary{Faults: faults}, gaveUp: map[string]int{}}
	naive := column{name: "naive client", summary: testserver.Summary{Faults: faults}, budgetDenied: -1, breakerTrips: -1}
	var out bytes.Buffer
	printReport(&out, result{idem: idemc, naive: naive})
	lines := strings.Split(out.String(), "\n")
	require.Equal(t, tableHeader, lines[0])
	var labels []string
	for _, row := range lines[1:] {
		if row == "" {
			break
		}
		labels = append(labels, tableRow(t, row))
	}
	return labels
}

// tableRow returns the label of a row of the table, after checking that
// the row has the table's format: the label, then two values right-aligned
// in 14 columns.
func tableRow(t *testing.T, row string) string {
	t.Helper()
	if !assert.Greater(t, len(row), 30, "row %q", row) {
		return ""
	}
	label := strings.TrimRight(row[:len(row)-30], " ")
	values := strings.Fields(row[len(row)-30:])
	if assert.Len(t, values, 2, "row %q", row) {
		assert.Equal(t, fmt.Sprintf("%-40s %14s %14s", label, values[0], values[1]), row, "the table's format")
	}
	return label
}

// sampleBlocks returns the code blocks of path that hold the demo's table.
func sampleBlocks(t *testing.T, path string) [][]string {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	var blocks [][]string
	var block []string
	in := false
	for _, line := range strings.Split(string(b), "\n") {
		switch {
		case strings.HasPrefix(line, "```") && !in:
			in, block = true, nil
		case strings.HasPrefix(line, "```"):
			in = false
			if slices.Contains(block, tableHeader) {
				blocks = append(blocks, block)
			}
		case in:
			block = append(block, line)
		}
	}
	return blocks
}

// The sample output in the docs is the program's: a sample that shows the
// header shows what printHeader prints for the rerun command it gives,
// and the rows of its table are printReport's, in its order and format
// (all of them in a sample with a header; a shortened table's rows are
// some of them, in order).
func TestDocsSampleIsTheDemosOutput(t *testing.T) {
	labels := reportLabels(t)
	paths := []string{"README.md", "../../README.md"}
	docs, err := filepath.Glob("../../docs/*.md")
	require.NoError(t, err)
	n := 0
	for _, path := range append(paths, docs...) {
		for _, block := range sampleBlocks(t, path) {
			n++
			at := slices.Index(block, tableHeader)
			var got []string
			for _, row := range block[at+1:] {
				if row == "" {
					break
				}
				got = append(got, tableRow(t, row))
			}
			if at == 0 {
				assert.True(t, isSubsequence(got, labels), "%s: the table's rows %q are not rows of the report %q, in order", path, got, labels)
				continue
			}
			assert.Equal(t, labels, got, "%s: the table's rows", path)
			checkHeader(t, path, block[:at])
		}
	}
	assert.Positive(t, n, "no sample of the demo's output found")
}

// checkHeader checks a sample's header against printHeader's, for the
// options of the rerun command it shows.
func checkHeader(t *testing.T, path string, header []string) {
	t.Helper()
	m := regexp.MustCompile(`^seed \d+ \(rerun: go run \./examples/payments (.*)\)$`).FindStringSubmatch(header[1])
	require.NotNil(t, m, "%s: the header's second line %q", path, header[1])
	o, err := parseFlags(strings.Fields(m[1]), io.Discard, func(string) string { return "" })
	require.NoError(t, err, "%s: %s", path, m[1])
	rate, err := parseFaults(o.faults)
	require.NoError(t, err)
	var want bytes.Buffer
	printHeader(&want, o, rate, "memory")
	assert.Equal(t, want.String(), strings.Join(header, "\n")+"\n", "%s: the header", path)
}

// isSubsequence reports whether sub's elements appear in all, in order.
func isSubsequence(sub, all []string) bool {
	i := 0
	for _, s := range all {
		if i < len(sub) && sub[i] == s {
			i++
		}
	}
	return i == len(sub)
}
