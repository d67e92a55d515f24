//go:build unix

package mysqlidem

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/mysqlidem/internal/mysqltest"
	"github.com/idemkit/idem/testserver"
)

// payserverBin builds internal/payserver once per test process, into
// binDir (which TestMain removes).
var payserverBin = sync.OnceValues(func() (string, error) {
	bin := filepath.Join(binDir, "payserver")
	out, err := exec.Command("go", "build", "-o", bin, "./internal/payserver").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build ./internal/payserver: %v\n%s", err, out)
	}
	return bin, nil
})

// payDB is a database of its own with the store's table and payments.
func payDB(t *testing.T) (string, *sql.DB) {
	t.Helper()
	dsn := mysqltest.Database(t)
	db := mysqltest.Open(t, dsn, 4)
	require.NoError(t, Migrate(context.Background(), db))
	_, err := db.Exec(`CREATE TABLE payments (id BIGINT AUTO_INCREMENT PRIMARY KEY, op VARCHAR(64) NOT NULL,
		amount INT NOT NULL, KEY (op)) ENGINE=InnoDB`)
	require.NoError(t, err)
	return dsn, db
}

// process is a payserver process.
type process struct {
	url string
	cmd *exec.Cmd
	out *bytes.Buffer
	end chan error
}

// startPayserver starts a payserver on dsn, with env, and waits until it
// accepts connections; it is killed when the test ends. It records its
// steps (traceChild), which are checked once every process of the test
// is killed.
func startPayserver(t *testing.T, dsn string, env ...string) *process {
	t.Helper()
	env = append(env, traceChild(t))
	bin, err := payserverBin()
	require.NoError(t, err)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := l.Addr().String()
	require.NoError(t, l.Close())
	p := &process{url: "http://" + addr, out: &bytes.Buffer{}, end: make(chan error, 1)}
	p.cmd = exec.Command(bin, "-addr", addr, "-dsn", dsn)
	p.cmd.Env = append(p.cmd.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	require.NoError(t, p.cmd.Start())
	go func() { p.end <- p.cmd.Wait() }()
	t.Cleanup(func() { _ = p.cmd.Process.Kill(); <-p.end })
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("tcp", addr)
		if err == nil {
			_ = c.Close()
			return p
		}
		require.True(t, time.Now().Before(deadline), "payserver did not listen: %s", p.out)
		time.Sleep(20 * time.Millisecond)
	}
}

// payOnce posts a payment of amount with key to url.
func payOnce(client *http.Client, url, key string, amount int) (int, string, error) {
	req, err := http.NewRequest(http.MethodPost, url+"/v1/payments", bytes.NewReader(fmt.Appendf(nil, `{"amount":%d}`, amount)))
	if err != nil {
		return 0, "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	resp, err := client.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// pay posts until a 201 comes back: a lost response, a 409 in flight or a
// 503 is retried with the same key, at most 50 times.
func pay(t *testing.T, client *http.Client, url, key string, amount int) string {
	t.Helper()
	for range 50 {
		code, body, err := payOnce(client, url, key, amount)
		if err == nil && code == http.StatusCreated {
			return body
		}
		if err == nil && code != http.StatusConflict && code != http.StatusServiceUnavailable {
			t.Fatalf("payment %s: %d %s", key, code, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("payment %s: no 201 after 50 attempts", key)
	return ""
}

// rowsPerOp counts the payments rows of each op, from the database.
func rowsPerOp(t *testing.T, db *sql.DB) map[string]int {
	t.Helper()
	rows, err := db.Query(`SELECT op, COUNT(*) FROM payments GROUP BY op`)
	require.NoError(t, err)
	defer rows.Close()
	got := map[string]int{}
	for rows.Next() {
		var op string
		var n int
		require.NoError(t, rows.Scan(&op, &n))
		got[op] = n
	}
	require.NoError(t, rows.Err())
	return got
}

// TestEndToEndTwoNodesDropAfterCommit: two payserver processes on one
// database behind testserver's fault proxy, which drops a third of the
// responses after the handler committed (reset or close) and answers some
// with 503 after it. The clients retry with the same key; every payment
// makes exactly one row in the database, and every retry that got an
// answer got the first run's bytes.
func TestEndToEndTwoNodesDropAfterCommit(t *testing.T) {
	dsn, db := payDB(t)
	a, b := startPayserver(t, dsn), startPayserver(t, dsn)
	proxy, err := testserver.NewProxy([]string{a.url, b.url}, testserver.Config{
		Seed: testserver.Seed(t),
		Rules: []testserver.Rule{{Name: "drop-after-commit", Match: testserver.Match{Method: "POST"}, Mix: []testserver.Chance{
			{P: 0.15, Fault: testserver.Fault{Kind: testserver.FaultDropReset}},
			{P: 0.15, Fault: testserver.Fault{Kind: testserver.FaultDropClose}},
			{P: 0.1, Fault: testserver.Fault{Kind: testserver.FaultStatusAfter}},
		}}},
	})
	require.NoError(t, err)
	t.Cleanup(proxy.Close)
	const ops, workers = 200, 8
	client := &http.Client{Timeout: 10 * time.Second}
	bodies := make([]string, ops)
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < ops; i += workers {
				bodies[i] = pay(t, client, proxy.URL, fmt.Sprintf("op-%d", i), i+1)
			}
		})
	}
	wg.Wait()
	got := rowsPerOp(t, db)
	require.Len(t, got, ops, "payments in the database")
	for op, n := range got {
		assert.Equal(t, 1, n, "rows of %s", op)
	}
	for i, body := range bodies { // each answer is the stored first run's
		code, again, err := payOnce(client, a.url, fmt.Sprintf("op-%d", i), i+1)
		require.NoError(t, err)
		assert.Equal(t, http.StatusCreated, code)
		assert.Equal(t, body, again, "op-%d's replay", i)
	}
	var dropped int
	for _, e := range proxy.Events() {
		if e.Fault.Kind != testserver.FaultNone {
			dropped++
		}
	}
	assert.NotZero(t, dropped, "the proxy dropped responses")
	t.Logf("%d payments, %d responses dropped or replaced after the commit, each payment one row", ops, dropped)
}

// TestEndToEndKilledBetweenHandlerAndCommit: a payserver SIGKILLs itself
// after the handler inserted the payment and before the commit. The
// database then holds no payment and no record; a retry on another
// process makes one payment, and the next replays it.
func TestEndToEndKilledBetweenHandlerAndCommit(t *testing.T) {
	dsn, db := payDB(t)
	doomed := startPayserver(t, dsn, "PAYSERVER_CRASH_AFTER=1")
	_, _, err := payOnce(&http.Client{Timeout: 10 * time.Second}, doomed.url, "op-crash", 7)
	require.Error(t, err, "the process died before it answered")
	ended := <-doomed.end
	doomed.end <- ended
	var exit *exec.ExitError
	require.ErrorAs(t, ended, &exit)
	require.Equal(t, syscall.SIGKILL, exit.Sys().(syscall.WaitStatus).Signal(), "the process was SIGKILLed: %s", doomed.out)
	require.Contains(t, doomed.out.String(), "crash switch: SIGKILL")
	assert.Empty(t, rowsPerOp(t, db), "nothing committed")
	var records int
	require.NoError(t, db.QueryRow(`SELECT COUNT(*) FROM idem_records`).Scan(&records))
	assert.Zero(t, records, "no record")

	other := startPayserver(t, dsn)
	client := &http.Client{Timeout: 10 * time.Second}
	first := pay(t, client, other.url, "op-crash", 7)
	code, again, err := payOnce(client, other.url, "op-crash", 7)
	require.NoError(t, err)
	assert.Equal(t, http.StatusCreated, code)
	assert.Equal(t, first, again, "the replay")
	assert.Equal(t, map[string]int{"op-crash": 1}, rowsPerOp(t, db))
}

// TestEndToEndRaceOfOneKeyOnTwoProcesses: 100 requests of one key at once,
// half to each of two processes: one payment row; every 201 carries its
// bytes; every other answer is a 409 or 503 to retry.
func TestEndToEndRaceOfOneKeyOnTwoProcesses(t *testing.T) {
	dsn, db := payDB(t)
	procs := []*process{startPayserver(t, dsn), startPayserver(t, dsn)}
	client := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxConnsPerHost: 100, MaxIdleConnsPerHost: 100}}
	const n = 100
	codes, bodies := make([]int, n), make([]string, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			<-start
			var err error
			codes[i], bodies[i], err = payOnce(client, procs[i%2].url, "op-race", 5)
			assert.NoError(t, err)
		})
	}
	close(start)
	wg.Wait()
	created := ""
	for i, code := range codes {
		switch code {
		case http.StatusCreated:
			if created == "" {
				created = bodies[i]
			}
			assert.Equal(t, created, bodies[i], "every 201 is the one run's")
		case http.StatusConflict, http.StatusServiceUnavailable:
		default:
			t.Errorf("request %d: %d %s", i, code, bodies[i])
		}
	}
	assert.NotEmpty(t, created, "a request ran")
	assert.Equal(t, map[string]int{"op-race": 1}, rowsPerOp(t, db))
}
