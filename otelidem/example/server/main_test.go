package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// start runs the program with args on free loopback ports until the test
// ends, and returns the API's and the metrics' base URLs.
func start(t *testing.T, args ...string) (apiURL, metricsURL string) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, append([]string{"-addr", "127.0.0.1:0", "-metrics", "127.0.0.1:0", "-grace", "2s"}, args...), w, io.Discard, noEnv)
		w.Close()
	}()
	t.Cleanup(func() {
		cancel()
		require.NoError(t, <-done)
	})
	lines := bufio.NewScanner(out)
	for apiURL == "" && lines.Scan() {
		line := lines.Text()
		if u, ok := strings.CutPrefix(line, "payments server: metrics on "); ok {
			metricsURL = u
		}
		if u, ok := strings.CutPrefix(line, "payments server: listening on "); ok {
			apiURL = u
		}
	}
	require.NotEmpty(t, apiURL, "the server did not start")
	go func() { _, _ = io.Copy(io.Discard, out) }()
	return apiURL, metricsURL
}

// send makes one request as acme:alice and returns its status.
func send(t *testing.T, method, url, key, body string) int {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	require.NoError(t, err)
	req.Header.Set("Authorization", "Bearer acme:alice")
	if key != "" {
		req.Header.Set("Idempotency-Key", key)
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// sample is a line of Prometheus's text format: a name, labels, a value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var labelRE = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)

// scrape reads the samples at url.
func scrape(t *testing.T, url string) []sample {
	t.Helper()
	resp, err := http.Get(url)
	require.NoError(t, err)
	defer resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
	var out []sample
	lines := bufio.NewScanner(resp.Body)
	for lines.Scan() {
		line := lines.Text()
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		require.NoError(t, err, line)
		s := sample{name: line[:i], labels: map[string]string{}, value: v}
		if j := strings.IndexByte(line[:i], '{'); j >= 0 {
			s.name = line[:j]
			for _, m := range labelRE.FindAllStringSubmatch(line[j:i], -1) {
				s.labels[m[1]] = m[2]
			}
		}
		out = append(out, s)
	}
	return out
}

// sum adds the values of the samples of name whose labels include want
// ("key=value" pairs).
func sum(samples []sample, name string, want ...string) float64 {
	total := 0.0
next:
	for _, s := range samples {
		if s.name != name {
			continue
		}
		for _, kv := range want {
			k, v, _ := strings.Cut(kv, "=")
			if s.labels[k] != v {
				continue next
			}
		}
		total += s.value
	}
	return total
}

// After a few payments and charges, some of them retried, /metrics shows
// the executions and the replays the server counted, and the attempts its
// idem client made to the card gateway.
func TestMetricsScrape(t *testing.T) {
	apiURL, metricsURL := start(t)
	require.NotEmpty(t, metricsURL)
	require.Equal(t, http.StatusOK, send(t, "PUT", apiURL+"/v1/accounts/acc-1", "", `{"balance_cents":10000,"currency":"EUR"}`))
	pay := `{"account_id":"acc-1","amount_cents":100,"currency":"EUR"}`
	for _, key := range []string{"pay-1", "pay-2", "pay-3", "pay-1", "pay-2"} { // two retries
		require.Equal(t, http.StatusCreated, send(t, "POST", apiURL+"/v1/payments", key, pay))
	}
	for _, key := range []string{"charge-1", "charge-2", "charge-1"} { // one retry
		require.Equal(t, http.StatusCreated, send(t, "POST", apiURL+"/v1/charges", key, pay))
	}
	require.Equal(t, http.StatusUnprocessableEntity, send(t, "POST", apiURL+"/v1/payments", "pay-3",
		`{"account_id":"acc-1","amount_cents":999,"currency":"EUR"}`), "the key of another payment")

	m := scrape(t, metricsURL)
	requests := "idem_server_requests_total"
	assert.Equal(t, 3.0, sum(m, requests, "idem_verdict=executed", "http_route=/v1/payments", "http_request_method=POST"))
	assert.Equal(t, 2.0, sum(m, requests, "idem_verdict=replayed", "http_route=/v1/payments", "http_response_status_code=201"))
	assert.Equal(t, 1.0, sum(m, requests, "idem_verdict=key_reused", "http_route=/v1/payments"))
	assert.Equal(t, 2.0, sum(m, requests, "idem_verdict=executed", "http_route=/v1/charges", "idem_mode=leased"))
	assert.Equal(t, 1.0, sum(m, requests, "idem_verdict=replayed", "http_route=/v1/charges"))
	assert.Equal(t, 9.0, sum(m, "idem_server_claim_duration_seconds_count"), "every keyed request claimed")
	assert.Equal(t, 5.0, sum(m, "idem_server_commit_duration_seconds_count"), "five executions committed")

	attempts := "idem_client_attempts_total"
	assert.Equal(t, 2.0, sum(m, attempts), "one gateway call per charge executed")
	assert.Equal(t, 2.0, sum(m, attempts, "idem_certainty=responded", "http_response_status_code=201",
		"server_address=127.0.0.1", "http_request_method=POST"))
	assert.Zero(t, sum(m, "idem_client_retry_wait_seconds_count"))
	assert.Equal(t, 0.0, sum(m, "idem_server_inflight"), "nothing in flight")
	assert.Len(t, filter(m, "idem_server_inflight_oldest_age_seconds"), 1)
}

func filter(samples []sample, name string) []sample {
	var out []sample
	for _, s := range samples {
		if s.name == name {
			out = append(out, s)
		}
	}
	return out
}

// Without -metrics nothing serves them.
func TestNoMetricsWithoutTheFlag(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, w := io.Pipe()
	done := make(chan error, 1)
	go func() { done <- run(ctx, []string{"-addr", "127.0.0.1:0"}, w, io.Discard, noEnv); w.Close() }()
	line, err := bufio.NewReader(out).ReadString('\n')
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(line, "payments server: listening on "), line)
	cancel()
	go func() { _, _ = io.Copy(io.Discard, out) }()
	require.NoError(t, <-done)
}

// noEnv is an empty environment: -db is empty, the API in memory, unless
// a test names a database.
func noEnv(string) string { return "" }
