package idem

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// DeadlineHeader carries the time left to the attempt's deadline, in
// whole milliseconds, on every attempt; none is sent by default or
// without a deadline.
func TestDeadlineHeader(t *testing.T) {
	var mu sync.Mutex
	var got []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("X-Request-Deadline-Ms"))
		mu.Unlock()
	}))
	defer srv.Close()
	deadline := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name     string
		header   string
		deadline bool
		want     string
	}{
		{"configured", "x-request-deadline-ms", true, "1500"},
		{"no deadline", "X-Request-Deadline-Ms", false, ""},
		{"not configured", "", true, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, _ := newTestTransport(t, Config{DeadlineHeader: tc.header})
			tr.now = func() time.Time { return deadline.Add(-1500*time.Millisecond - 300*time.Microsecond) }
			ctx := context.Background()
			if tc.deadline {
				var cancel context.CancelFunc
				ctx, cancel = context.WithDeadline(ctx, deadline)
				defer cancel()
			}
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
			resp, err := tr.RoundTrip(req)
			require.NoError(t, err)
			resp.Body.Close()
			mu.Lock()
			defer mu.Unlock()
			if last := got[len(got)-1]; last != tc.want {
				t.Errorf("header = %q, want %q", last, tc.want)
			}
		})
	}
}

func TestDeadlineHeaderInvalidNamePanics(t *testing.T) {
	require.Panics(t, func() { NewTransport(Config{DeadlineHeader: "bad name"}) })
}
