package idemredis

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis/internal/redistest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// A store counts and finds only the records of its own prefix, though the
// scan's pattern also matches a prefix that extends it ("p" and "p:x"), or
// one with glob characters.
func TestOperatorScansOnlyItsOwnPrefix(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	base := testPrefix()
	stores := map[string]*Store{}
	for _, prefix := range []string{base, base + ":x", base + "*"} {
		s := newTestStore(t, c, Config{Prefix: prefix}, &storetest.Clock{})
		stores[prefix] = s
		mux := http.NewServeMux()
		h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(http.StatusCreated) })
		mux.Handle("POST /v1/charges", server.Middleware(s, server.Config{Mode: server.Leased, Logger: slog.New(slog.DiscardHandler)})(h))
		srv := httptest.NewServer(mux)
		for _, key := range []string{"k-1", "k-2"} {
			req, _ := http.NewRequest(http.MethodPost, srv.URL+"/v1/charges", nil)
			req.Header.Set("Idempotency-Key", key)
			resp, err := http.DefaultClient.Do(req)
			require.NoError(t, err)
			resp.Body.Close()
		}
		srv.Close()
	}
	for prefix, s := range stores {
		c, err := s.CountRecords(context.Background())
		require.NoError(t, err)
		assert.EqualValues(t, 2, c.Records, "prefix %q", prefix)
		assert.Equal(t, server.CountExact, c.RecordsAre)
		recs, err := s.FindKey(context.Background(), "k-1", 10)
		require.NoError(t, err)
		assert.Len(t, recs, 1, "prefix %q", prefix)
	}
}
