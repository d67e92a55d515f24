package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/conformance"
)

// paymentBody is the body template the tests send: every operation has a
// reference of its own.
const paymentBody = `{"account_id": "idemcheck", "amount_cents": 100, "currency": "EUR", "reference": "idemcheck-{{n}}-{{uuid}}"}`

// document is the -json output.
type document struct {
	Passed bool                 `json:"passed"`
	Seed   uint64               `json:"seed"`
	Checks []conformance.Result `json:"checks"`
}

// verdicts maps each check's name to its verdict.
func (d document) verdicts() map[string]conformance.Verdict {
	out := map[string]conformance.Verdict{}
	for _, c := range d.Checks {
		out[c.Name] = c.Verdict
	}
	return out
}

// idemcheck runs the command and returns its exit status, stdout and
// stderr.
func idemcheck(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

// idemcheckJSON runs the command with -json and decodes its document.
func idemcheckJSON(t *testing.T, args ...string) (int, document) {
	t.Helper()
	code, out, errOut := idemcheck(t, append(args, "-json")...)
	var d document
	require.NoError(t, json.Unmarshal([]byte(out), &d), "stdout:\n%s\nstderr:\n%s", out, errOut)
	return code, d
}

// fakeArgs are the flags that point the command at a fake API, with every
// check enabled.
func fakeArgs(srv *httptest.Server) []string {
	return []string{
		"-url", srv.URL + "/v1/payments", "-body", paymentBody,
		"-header", "Authorization: Bearer alice", "-principal2", "Authorization: Bearer bob",
		"-key-required", "-id-field", "payment_id",
		"-count-url", srv.URL + "/v1/count", "-count-field", "payment_count",
		"-n", "12", "-attempt-timeout", "200ms", "-seed", "1", "-timeout", "60s",
	}
}

// TestBrokenServers: the command passes a fake that honours keys, and
// fails exactly the checks that each deliberately broken fake breaks.
func TestBrokenServers(t *testing.T) {
	tests := []struct {
		name   string
		flaw   flaw
		fail   []string
		detail map[string]string // check -> part of its detail
		// mayFail are checks that may also catch the flaw, depending on
		// timing: a retry through the faults that overtakes its first
		// attempt is the racy server's race too.
		mayFail []string
	}{
		{"honours keys", flawNone, nil, nil, nil},
		{"ignores the key", flawIgnoresKey, []string{"replay", "body-mismatch", "key-missing", "key-invalid", "concurrent", "faults"},
			map[string]string{"replay": "it names another resource", "faults": "double effects"}, nil},
		{"replays without comparing the body", flawNoBodyCompare, []string{"body-mismatch"},
			map[string]string{"body-mismatch": "got the first operation's response", "equivalent-json": "the API does not compare bodies"}, nil},
		{"races under concurrency", flawRacy, []string{"concurrent"},
			map[string]string{"concurrent": "resources: the operation ran"}, []string{"faults"}},
		{"stores results per key without scope", flawNoScope, []string{"scope"},
			map[string]string{"scope": "got the first principal's stored response"}, nil},
		{"checks only the key's length", flawKeyLengthOnly, []string{"key-invalid"},
			map[string]string{"key-invalid": "a key with a non-ASCII character got 201"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, srv := newFakeAPI(t, tt.flaw, "")
			code, doc := idemcheckJSON(t, fakeArgs(srv)...)
			want := map[string]conformance.Verdict{}
			for _, name := range conformance.CheckNames() {
				want[name] = conformance.Pass
			}
			want["equivalent-json"] = conformance.Info
			want["outcome"] = conformance.Info // the fakes tell no operation state: not offered
			for _, name := range tt.fail {
				want[name] = conformance.Fail
			}
			got := doc.verdicts()
			for _, name := range tt.mayFail {
				if got[name] == conformance.Fail {
					want[name] = conformance.Fail
				}
			}
			assert.Equal(t, want, got, "checks:\n%s", pretty(doc))
			assert.Equal(t, len(tt.fail) == 0, doc.Passed)
			assert.Equal(t, map[bool]int{true: exitPass, false: exitFail}[len(tt.fail) == 0], code)
			for name, part := range tt.detail {
				c, _ := findCheck(doc, name)
				assert.Contains(t, c.Detail, part, name)
			}
			for _, c := range doc.Checks {
				if c.Verdict == conformance.Fail {
					assert.NotEmpty(t, c.Evidence, "check %s failed without evidence", c.Name)
				}
			}
		})
	}
}

// pretty renders the checks for a failure message.
func pretty(d document) string {
	var b strings.Builder
	for _, c := range d.Checks {
		b.WriteString(c.Name + ": " + string(c.Verdict) + ": " + c.Detail + "\n")
	}
	return b.String()
}
