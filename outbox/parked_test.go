package outbox

import (
	"context"
	"encoding/hex"
	"math/rand/v2"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// headerBytes adds up the names and values of h, a name once per value.
func headerBytes(h http.Header) int {
	n := 0
	for name, values := range h {
		for _, v := range values {
			n += len(name) + len(v)
		}
	}
	return n
}

// headerValues counts the values of h.
func headerValues(h http.Header) int {
	n := 0
	for _, values := range h {
		n += len(values)
	}
	return n
}

// A message refused with megabytes of response headers is parked with a
// few KiB of them (Content-Type first, then in name order, each whole,
// within keptHeaders and keptHeaderBytes), in a row of that size (issue
// 28 defect 2: 20 such messages grew river_job to 94 MB, and listing them
// allocated 196 MB). The delivery's Timeout is long: reading megabytes of
// headers under the race detector on a loaded machine took more than
// fastConfig's 2 s, and a delivery that times out is retried, not parked.
func TestParkedRecordIsBounded(t *testing.T) {
	config := func() Config {
		cfg := fastConfig(&events{})
		cfg.Timeout, cfg.RescueAfter = time.Minute, 2*time.Minute
		return cfg
	}
	for _, name := range []string{"memory", "postgres"} {
		t.Run(name, func(t *testing.T) {
			var tg target
			var rowBytes func() int
			if name == "memory" {
				tg, _ = memoryTarget(config())
			} else {
				var o *Outbox
				tg, o, _ = postgresTarget(t, config())
				rowBytes = func() int {
					var n int
					require.NoError(t, o.pool.QueryRow(context.Background(),
						"SELECT max(pg_column_size(metadata) + pg_column_size(errors)) FROM river_job").Scan(&n))
					return n
				}
			}
			noise := make([]byte, 1<<20) // incompressible: Postgres would store 2 MiB of one letter in 30 kB
			_, _ = rand.NewChaCha8([32]byte{1}).Read(noise)
			huge := http.Header{"X-Reason": {"unknown account"}, "X-Huge": {hex.EncodeToString(noise)},
				"Content-Type": {"application/problem+json"}}
			for i := range 3000 {
				huge["X-Many-"+strconv.Itoa(i)] = []string{"1"}
			}
			d := newDownstream(t, func(string, int) (int, http.Header, string) {
				return http.StatusBadRequest, huge, strings.Repeat("b", 10_000)
			})
			for i := range 3 {
				m := d.message("event")
				m.Key = "big-" + strconv.Itoa(i)
				_, err := tg.enqueue(context.Background(), m)
				require.NoError(t, err)
			}
			running(t, tg.run)
			for _, p := range tg.waitParked(t, 3, "the three refused messages are parked") {
				assert.Equal(t, "application/problem+json", p.Header.Get("Content-Type"), "an explaining header is kept first")
				assert.Empty(t, p.Header.Get("X-Reason"), "after the 3,000 headers that sort before it: over the count")
				assert.Equal(t, "1", p.Header.Get("X-Many-0"), "the headers in name order")
				assert.Zero(t, len(p.Header.Get("X-Huge")), "a header over the bound is dropped whole, not cut")
				assert.LessOrEqual(t, headerBytes(p.Header), keptHeaderBytes, "headers kept")
				assert.LessOrEqual(t, headerValues(p.Header), keptHeaders, "header values kept")
				assert.Len(t, p.Body, keptBodyBytes)
			}
			if rowBytes != nil {
				assert.Less(t, rowBytes(), 16<<10, "bytes of the parked job's record")
			}
		})
	}
}

// Listing parked messages allocates for the messages it returns, whatever
// their history: River keeps an error per delivery in the job's errors
// column (up to a KiB each here, the cut error of the record), which
// grows by up to MaxAttempts with each re-drive, and Parked does not read
// it. Ten parked messages are each given 2,000 such errors, what 80
// re-drives of 25 failed deliveries leave, 2 MB a row; listing them
// allocates about 15 KB a message (through River's JobList, which decodes
// the column, it allocated 6.3 MB a message).
func TestParkedAllocatesForWhatItReturns(t *testing.T) {
	cfg := fastConfig(&events{})
	tg, o, pool := postgresTarget(t, cfg)
	d := newDownstream(t, func(string, int) (int, http.Header, string) {
		return http.StatusBadRequest, http.Header{"Content-Type": {"text/plain"}}, strings.Repeat("b", 10_000)
	})
	ctx := context.Background()
	for i := range 10 {
		m := d.message("event")
		m.Key = "history-" + strconv.Itoa(i)
		_, err := tg.enqueue(ctx, m)
		require.NoError(t, err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- tg.run(runCtx) }()
	tg.waitParked(t, 10, "the ten refused messages are parked")
	stop()
	require.NoError(t, <-done)
	_, err := pool.Exec(ctx, `UPDATE river_job SET errors = array_fill(jsonb_build_object('at', now(), 'attempt', 1,
		'error', repeat('e', 1024), 'trace', ''), ARRAY[2000])`)
	require.NoError(t, err)
	var column int
	require.NoError(t, pool.QueryRow(ctx, "SELECT min(octet_length(errors::text)) FROM river_job").Scan(&column))
	require.Greater(t, column, 2_000_000, "bytes of each row's errors")

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	parked, err := o.Parked(ctx, 0, 10)
	runtime.ReadMemStats(&after)
	require.NoError(t, err)
	require.Len(t, parked, 10)
	perMessage := int(after.TotalAlloc-before.TotalAlloc) / len(parked)
	t.Logf("Parked(0, 10) allocated %d bytes a message", perMessage)
	assert.Less(t, perMessage, 64<<10, "bytes allocated a message returned, for a record of %d bytes of body",
		len(parked[0].Body))
}
