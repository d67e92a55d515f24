package idem

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The tables of the client's contract are the outcome table (issue 18):
// the doc comment of outcomes.go, docs/client.md's contract table and
// docs/CONTRACT.md §8 render the rows of outcomes, and nothing else.
// README.md keeps the table's last row, what an open breaker does, as a
// sentence: its words are the row's (issue 26).
func TestOutcomeTableDocs(t *testing.T) {
	src, err := os.ReadFile("outcomes.go")
	require.NoError(t, err)
	assert.Equal(t, renderComment(t), commentTable(string(src)),
		"outcomes.go's doc table; the want side is what it should read")

	for _, doc := range []struct{ path, section string }{
		{"docs/client.md", "## The contract in one table"},
		{"docs/CONTRACT.md", "## 8. The client"},
	} {
		text, err := os.ReadFile(doc.path)
		require.NoError(t, err)
		assert.Equal(t, renderMarkdown(), markdownTable(t, string(text), doc.section),
			"%s, the first table under %q", doc.path, doc.section)
	}

	readme, err := os.ReadFile("README.md")
	require.NoError(t, err)
	assert.Contains(t, strings.Join(strings.Fields(string(readme)), " "), notLetThroughClient,
		"README.md's client section says what the client does with an attempt its breaker does not let through, in the table's words")
}

// Two sentences restate columns of the table in words: the package doc's
// statuses that are retried, and BreakerConfig's statuses that are
// failures of the host. They name exactly the table's statuses.
func TestOutcomeTableProse(t *testing.T) {
	statuses := func(keep func(rule) bool) []int {
		var out []int
		for _, r := range outcomes {
			if r.certainty == Responded && r.problem == "" && keep(r) {
				out = append(out, r.codes...)
			}
		}
		slices.Sort(out)
		return out
	}
	for _, tt := range []struct {
		file, pattern string
		want          []int
	}{
		{"doc.go", `- ((?:\d{3}, )*\d{3}): retried \(keyed or idempotent\)`,
			statuses(func(r rule) bool { return r.verdict == Retry })},
		{"breaker.go", `and ((?:\d{3},? )*and \d{3}) responses\. Not failures`,
			statuses(func(r rule) bool { return r.failure })},
	} {
		src, err := os.ReadFile(tt.file)
		require.NoError(t, err)
		prose := strings.Join(strings.Fields(strings.ReplaceAll(string(src), "//", " ")), " ")
		m := regexp.MustCompile(tt.pattern).FindStringSubmatch(prose)
		require.NotNil(t, m, "%s: no sentence matching %s", tt.file, tt.pattern)
		var got []int
		for _, n := range regexp.MustCompile(`\d{3}`).FindAllString(m[1], -1) {
			code, _ := strconv.Atoi(n)
			got = append(got, code)
		}
		slices.Sort(got)
		assert.Equal(t, tt.want, got, "%s: %q", tt.file, m[1])
	}
}

// renderComment renders outcomes as the table of outcomes.go's comment.
func renderComment(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	row := func(cells ...string) {
		fmt.Fprintf(&b, "%-26s %-22s %-8s %s\n", cells[0], cells[1], cells[2], cells[3])
	}
	row("outcome of an attempt", "verdict", "breaker", "may have acted")
	for _, r := range outcomes {
		verdict := r.verdict.String()
		switch {
		case r.verdict == Fail:
			verdict = sentinelName(t, r.reason)
		case r.safeOnly:
			verdict += " if safe"
		}
		row(r.name, verdict, yes(r.failure, "failure", "-"), yes(r.acted, "yes", "no"))
	}
	return b.String()
}

// commentTable returns the indented table of a Go comment that starts with
// "outcome of an attempt", without the comment marks.
func commentTable(src string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(src, "\n") {
		cell, ok := strings.CutPrefix(line, "//\t")
		switch {
		case ok && strings.HasPrefix(cell, "outcome of an attempt"):
			in = true
		case !ok && in:
			return b.String()
		}
		if in {
			b.WriteString(strings.TrimRight(cell, " ") + "\n")
		}
	}
	return b.String()
}

// renderMarkdown renders outcomes as the contract table of the docs.
func renderMarkdown() string {
	var b strings.Builder
	b.WriteString("| outcome of an attempt | the client | the host's breaker counts a failure | may have taken effect |\n")
	b.WriteString("|---|---|---|---|\n")
	for _, r := range outcomes {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", r.outcome, r.client, yes(r.failure, "yes", "no"), yes(r.acted, "yes", "no"))
	}
	b.WriteString("| " + notLetThrough + " |\n")
	return b.String()
}

// notLetThrough is the docs' last row: an attempt that its host's breaker
// does not let through, which no rule of the table sees;
// notLetThroughClient is its cell for what the client does.
const (
	notLetThroughClient = "sends nothing and waits for the host (oldest first, within the deadline and `MaxWait`), then sends; " +
		"`ErrCircuitOpen` at once when the open period outlasts the deadline or the call is fail-fast (`FailFast`, `WithFailFast`), " +
		"or when the wait ends first"
	notLetThrough = "not let through: the host's breaker is open, or its probe is out | " + notLetThroughClient + " | not counted | no"
)

// markdownTable returns the first table after the line heading in text.
func markdownTable(t *testing.T, text, heading string) string {
	t.Helper()
	_, after, ok := strings.Cut(text, "\n"+heading+"\n")
	require.True(t, ok, "no heading %q", heading)
	var b strings.Builder
	for _, line := range strings.Split(after, "\n") {
		if strings.HasPrefix(line, "|") {
			b.WriteString(line + "\n")
		} else if b.Len() > 0 {
			break
		}
	}
	return b.String()
}

func yes(b bool, y, n string) string {
	if b {
		return y
	}
	return n
}

func sentinelName(t *testing.T, err error) string {
	t.Helper()
	names := map[error]string{
		ErrKeyReused: "ErrKeyReused", ErrKeyMissing: "ErrKeyMissing",
		ErrKeyInvalid: "ErrKeyInvalid", ErrResultUnavailable: "ErrResultUnavailable",
		ErrOutcomeUncertain: "ErrOutcomeUncertain",
	}
	name, ok := names[err]
	require.True(t, ok, "no name for %v", err)
	return name
}

// outcomeBase returns a base transport that produces an outcome that r
// covers on its first calls and a not-sent
// attempt after them, counting its calls.
func outcomeBase(r rule, first int, calls *int) roundTripFunc {
	return func(req *http.Request) (*http.Response, error) {
		*calls++
		if req.Body != nil {
			io.Copy(io.Discard, req.Body)
			req.Body.Close()
		}
		trace := httptrace.ContextClientTrace(req.Context())
		trace.GetConn(req.URL.Host)
		certainty := r.certainty
		if *calls > first {
			certainty = NotSent
		}
		switch certainty {
		case NotSent:
			return nil, &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
		case Ambiguous:
			trace.GotConn(httptrace.GotConnInfo{})
			return nil, io.ErrUnexpectedEOF
		}
		status := 200
		switch {
		case r.codes != nil:
			status = r.codes[0]
		case r.lo == 500:
			status = 501
		}
		rec := httptest.NewRecorder()
		if r.problem != "" {
			writeProblem(rec, status, r.problem)
		} else {
			rec.WriteHeader(status)
		}
		resp := rec.Result()
		resp.Request = req
		return resp, nil
	}
}

// Each row of the table decides what follows its outcome (issue 18): the
// verdict for a keyed POST and, for the rows that retry only when safe, for
// an unkeyed one; the breaker's count; and whether the call may have taken
// effect, seen through a retry that a Classifier forces after the row's
// outcome and that is then not sent.
func TestOutcomeTable(t *testing.T) {
	for _, r := range outcomes {
		t.Run(r.name, func(t *testing.T) {
			calls := 0
			tr, _ := newTestTransport(t, Config{Base: outcomeBase(r, 9, &calls), MaxAttempts: 2, NoBudget: true})
			resp, err := tr.RoundTrip(post(t, context.Background(), "http://api.test/", `{}`))
			switch r.verdict {
			case Retry:
				assert.Equal(t, 2, calls, "retried")
			case InFlight:
				assert.Equal(t, 2, calls, "retried")
				assert.ErrorIs(t, err, ErrKeyInFlight)
			case Stop:
				require.NoError(t, err)
				assert.Equal(t, 1, calls, "not retried")
				discard(resp)
			case Fail:
				assert.Equal(t, 1, calls, "not retried")
				assert.ErrorIs(t, err, r.reason)
			}
			if r.safeOnly {
				calls = 0
				resp, err := tr.RoundTrip(post(t, WithoutKey(context.Background()), "http://api.test/", `{}`))
				assert.Equal(t, 1, calls, "an unkeyed POST is not retried")
				if r.certainty == Ambiguous {
					assert.ErrorIs(t, err, ErrOutcomeUnknown)
				} else {
					require.NoError(t, err)
					discard(resp)
				}
			}

			calls = 0
			force := func(o Outcome) Decision {
				if o.Attempts == 1 {
					return Decision{Verdict: Retry}
				}
				return Decision{}
			}
			tr, _ = newTestTransport(t, Config{Base: outcomeBase(r, 1, &calls), MaxAttempts: 2, NoBudget: true, Classifier: force})
			_, err = tr.RoundTrip(post(t, context.Background(), "http://api.test/", `{}`))
			var e *Error
			require.ErrorAs(t, err, &e)
			assert.Equal(t, r.acted, e.MayHaveTakenEffect, "may have taken effect")
			failures := 1 // the second attempt, not sent
			if r.failure {
				failures++
			}
			assert.EqualValues(t, failures, tr.breakers.get("http://api.test:80").Counts().TotalFailures, "breaker failures")
		})
	}
}
