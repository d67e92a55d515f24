package gofiber

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/internal/gobuild"
)

// idemcheckBin is the idemcheck program, built once by TestMain.
var idemcheckBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "idemcheck-gofiber-")
	if err == nil {
		idemcheckBin = filepath.Join(dir, "idemcheck")
		err = gobuild.Build("github.com/idemkit/idem/cmd/idemcheck", idemcheckBin)
	}
	if err != nil {
		_, _ = os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
	code := m.Run()
	_ = os.RemoveAll(dir)
	os.Exit(code)
}

// serve starts the app on a loopback port until the test ends, and
// returns its base URL.
func serve(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	app := New()
	done := make(chan error, 1)
	go func() { done <- app.Listener(ln) }()
	t.Cleanup(func() {
		require.NoError(t, app.Shutdown())
		require.NoError(t, <-done)
	})
	return "http://" + ln.Addr().String()
}

// document is idemcheck's -json output.
type document struct {
	Passed bool                 `json:"passed"`
	Checks []conformance.Result `json:"checks"`
}

// idemcheck runs the program with args and -json, and returns its exit
// status and its document.
func idemcheck(t *testing.T, args ...string) (int, document) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(idemcheckBin, append(args, "-json")...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var exit *exec.ExitError
	if err != nil && !errors.As(err, &exit) {
		t.Fatalf("idemcheck: %v", err)
	}
	var d document
	require.NoError(t, json.Unmarshal(stdout.Bytes(), &d), "stdout:\n%s\nstderr:\n%s", &stdout, &stderr)
	return cmd.ProcessState.ExitCode(), d
}

// args point idemcheck at the app at url, with every check it can run:
// the app takes requests without a key, so key-missing is not asked for.
func args(url string) []string {
	return []string{
		"-url", url + "/v1/payments", "-key-header", "X-Idempotency-Key",
		"-body", `{"account_id": "idemcheck", "amount_cents": 100, "currency": "EUR", "reference": "idemcheck-{{n}}-{{uuid}}"}`,
		"-header", "Authorization: Bearer alice", "-principal2", "Authorization: Bearer bob",
		"-id-field", "payment_id", "-count-url", url + "/v1/accounts/idemcheck", "-count-field", "payment_count",
		"-n", "12", "-attempt-timeout", "300ms", "-seed", "1", "-timeout", "60s",
	}
}

// The verdicts of cmd/idemcheck's README for gofiber's middleware: it
// replays without saying so, replays the first response for another body
// and to another principal, and answers a malformed key with a 500; it
// runs concurrent duplicates once and retries through faults exactly once.
func TestVerdicts(t *testing.T) {
	code, doc := idemcheck(t, args(serve(t))...)
	want := map[string]struct {
		verdict conformance.Verdict
		detail  string
	}{
		"baseline":        {conformance.Pass, "the count grew by 1"},
		"replay":          {conformance.Fail, `the repeat is not marked with Idempotent-Replayed (got "")`},
		"body-mismatch":   {conformance.Fail, "the different body got the first operation's response (201)"},
		"key-missing":     {conformance.NotApplicable, "-key-required"},
		"key-invalid":     {conformance.Fail, "a key of 256 bytes (-max-key-len 255) got 500, want a 4xx refusal; a key with a non-ASCII character got 201"},
		"concurrent":      {conformance.Pass, "the count grew by 3"},
		"scope":           {conformance.Fail, "leaked across principals"},
		"faults":          {conformance.Pass, "12 ok, 0 failed, 0 unknown; 12 effects"},
		"outcome":         {conformance.Info, "not offered"},
		"equivalent-json": {conformance.Info, "replayed, but so is another operation's body: the API does not compare bodies"},
	}
	require.Len(t, doc.Checks, len(want), "checks:\n%s", pretty(doc))
	for _, c := range doc.Checks {
		w, ok := want[c.Name]
		require.True(t, ok, c.Name)
		assert.Equal(t, w.verdict, c.Verdict, "%s: %s", c.Name, c.Detail)
		assert.Contains(t, c.Detail, w.detail, c.Name)
	}
	assert.False(t, doc.Passed)
	assert.Equal(t, 1, code)
}

// With idemcheck-<uuid> keys (46 characters) the middleware refuses every
// request with its 500, and the baseline blames the key.
func TestPrefixedKeysBlamed(t *testing.T) {
	code, doc := idemcheck(t, append(args(serve(t)), "-key-format", "prefixed")...)
	assert.Equal(t, 1, code)
	require.NotEmpty(t, doc.Checks)
	base := doc.Checks[0]
	assert.Equal(t, conformance.Fail, base.Verdict)
	assert.Contains(t, base.Detail, "got 500, and the response names the key")
	assert.Contains(t, base.Detail, "try -key-format uuid")
	require.NotEmpty(t, base.Evidence)
	assert.Contains(t, base.Evidence[0].Response.Body, "invalid length: 46 != 36")
}

// pretty renders the checks for a failure message.
func pretty(d document) string {
	var b strings.Builder
	for _, c := range d.Checks {
		b.WriteString(c.Name + ": " + string(c.Verdict) + ": " + c.Detail + "\n")
	}
	return b.String()
}
