package outbox

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/pgtest"
	"github.com/idemkit/idem/internal/wire"
)

// downstream is a receiver of messages that records every request and
// answers as its script says.
type downstream struct {
	srv *httptest.Server
	mu  sync.Mutex
	got map[string][]string // key -> bodies received, in order
	// answer returns the status of the n-th request (from 1) of a key.
	answer func(key string, n int) (status int, header http.Header, body string)
	// keyHeader is the header it reads the key from; "" means
	// Idempotency-Key. Set it before the first request.
	keyHeader string
}

func newDownstream(t *testing.T, answer func(key string, n int) (int, http.Header, string)) *downstream {
	t.Helper()
	d := &downstream{got: map[string][]string{}, answer: answer}
	d.srv = httptest.NewServer(http.HandlerFunc(d.serve))
	t.Cleanup(d.srv.Close)
	return d
}

func (d *downstream) serve(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	name := wire.HeaderKey
	if d.keyHeader != "" {
		name = d.keyHeader
	}
	key := r.Header.Get(name)
	d.mu.Lock()
	d.got[key] = append(d.got[key], string(body))
	n := len(d.got[key])
	d.mu.Unlock()
	status, header, text := http.StatusOK, http.Header(nil), "ok"
	if d.answer != nil {
		status, header, text = d.answer(key, n)
	}
	for k, v := range header {
		w.Header()[k] = v
	}
	w.WriteHeader(status)
	_, _ = io.WriteString(w, text)
}

func (d *downstream) requests(key string) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.got[key])
}

func (d *downstream) keys() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	for k := range d.got {
		out = append(out, k)
	}
	return out
}

func (d *downstream) message(name string) Message {
	return Message{Name: name, Method: "POST", URL: d.srv.URL + "/hook",
		Header: http.Header{"Content-Type": {"application/json"}}, Body: []byte(`{"event":"` + name + `"}`)}
}

// events counts what an Observer was told.
type events struct {
	mu                         sync.Mutex
	delivered, retried, parked []Delivery
}

func (e *events) observer() Observer {
	add := func(list *[]Delivery, d Delivery) {
		e.mu.Lock()
		defer e.mu.Unlock()
		*list = append(*list, d)
	}
	return Observer{
		Delivered: func(_ context.Context, d Delivery) { add(&e.delivered, d) },
		Retried:   func(_ context.Context, d Delivery, _ time.Duration) { add(&e.retried, d) },
		Parked:    func(_ context.Context, d Delivery) { add(&e.parked, d) },
	}
}

func (e *events) counts() (delivered, retried, parked int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return len(e.delivered), len(e.retried), len(e.parked)
}

// fastConfig is a Config whose waits suit a test: retries within tens of
// milliseconds, one request per delivery (so River retries it). It has 4
// queues: each has a River producer that polls every PollInterval, and 17
// of them polling every 20 ms load a test's small pool.
func fastConfig(ev *events) Config {
	return Config{
		Queues:  4,
		Client:  idem.Config{MaxAttempts: 1, NoBudget: true},
		Timeout: 2 * time.Second, MinBackoff: 5 * time.Millisecond, MaxBackoff: 20 * time.Millisecond,
		PollInterval: 20 * time.Millisecond, RescueAfter: 5 * time.Second, StopTimeout: time.Second,
		Observer: ev.observer(), Logger: discardLogger(),
	}
}

// target is an outbox under test: the Postgres one or the memory one.
type target struct {
	name    string
	enqueue func(ctx context.Context, m Message) (int64, error) // committed
	run     func(ctx context.Context) error
	parked  func(ctx context.Context, after int64, limit int) ([]ParkedMessage, error)
	redrive func(ctx context.Context, id int64) error
	force   func(ctx context.Context, id int64) error // RedrivePastRetention
}

// migratedPool returns a pool on a fresh schema holding the outbox's tables.
func migratedPool(t *testing.T) *pgxpool.Pool {
	t.Helper()
	pool := pgtest.Pool(t)
	require.NoError(t, Migrate(context.Background(), pool))
	return pool
}

func postgresTarget(t *testing.T, cfg Config) (target, *Outbox, *pgxpool.Pool) {
	t.Helper()
	pool := migratedPool(t)
	o, err := New(pool, cfg)
	require.NoError(t, err)
	enqueue := func(ctx context.Context, m Message) (id int64, err error) {
		err = pgx.BeginFunc(ctx, pool, func(tx pgx.Tx) error {
			id, err = o.Enqueue(ctx, tx, m)
			return err
		})
		return id, err
	}
	return target{"postgres", enqueue, o.Run, o.Parked, o.Redrive, o.RedrivePastRetention}, o, pool
}

func memoryTarget(cfg Config) (target, *Memory) {
	q := NewMemory(cfg)
	return target{"memory", q.Enqueue, q.Run, q.Parked, q.Redrive, q.RedrivePastRetention}, q
}

// waitParked waits until the target holds n parked messages, and returns
// them.
func (tg target) waitParked(t *testing.T, n int, what string) []ParkedMessage {
	t.Helper()
	var parked []ParkedMessage
	eventually(t, func() bool {
		var err error
		parked, err = tg.parked(context.Background(), 0, 10)
		return err == nil && len(parked) == n
	}, what)
	return parked
}

// eachTarget runs f against both outboxes.
func eachTarget(t *testing.T, cfg func() Config, f func(t *testing.T, tg target)) {
	t.Run("memory", func(t *testing.T) {
		tg, _ := memoryTarget(cfg())
		f(t, tg)
	})
	t.Run("postgres", func(t *testing.T) {
		tg, _, _ := postgresTarget(t, cfg())
		f(t, tg)
	})
}

// running runs the target's dispatcher until the test ends, and checks
// that it stopped cleanly.
func running(t *testing.T, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			require.NoError(t, err)
		case <-time.After(15 * time.Second):
			t.Error("the dispatcher did not stop within 15 s")
		}
	})
}

// eventually waits up to 20 s for cond.
func eventually(t *testing.T, cond func() bool, what string) {
	t.Helper()
	require.Eventually(t, cond, 20*time.Second, 5*time.Millisecond, what)
}

// messageCount counts the messages in the pool's schema: those waiting to
// be relayed, and River's jobs.
func messageCount(t *testing.T, pool *pgxpool.Pool) int {
	t.Helper()
	var n int
	require.NoError(t, pool.QueryRow(context.Background(),
		"SELECT (SELECT count(*) FROM idem_outbox_enqueued) + (SELECT count(*) FROM river_job)").Scan(&n))
	return n
}

// jobOf returns the ID of the River job that carries the message id, once
// relayed.
func jobOf(t *testing.T, o *Outbox, id int64) int64 {
	t.Helper()
	var jobID int64
	eventually(t, func() bool {
		res, err := o.client.JobList(context.Background(), byID(id))
		if err != nil || len(res.Jobs) != 1 {
			return false
		}
		jobID = res.Jobs[0].ID
		return true
	}, "the message is relayed")
	return jobID
}
