package idemredis

import (
	"context"
	"crypto/sha256"
	"net/http"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/idemredis/internal/redistest"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/server/storetest"
)

// A record that an earlier version completed (the header as JSON beside
// the status and the body) still replays; a stored form this version
// cannot read is an error, never a replay of something else.
func TestResponseOfEarlierVersionsReplays(t *testing.T) {
	c := redis.NewClient(&redis.Options{Addr: redistest.Addr(t)})
	t.Cleanup(func() { _ = c.Close() })
	s := newTestStore(t, c, Config{}, &storetest.Clock{})
	ctx := context.Background()
	completed := func(key string, fields ...any) *server.Claim {
		t.Helper()
		cl := &server.Claim{Scope: sha256.Sum256([]byte(key)), Route: "POST /v1/charges", Key: key,
			Digest: []byte{1}, DigestAlg: "t", Mode: server.Leased, Lease: time.Minute, Retention: time.Hour}
		res, err := s.Claim(ctx, cl)
		require.NoError(t, err)
		require.NoError(t, res.Attempt.Complete(ctx, &server.Response{Status: 500}))
		require.NoError(t, c.HSet(ctx, keysOf(s.cfg.Prefix, cl.Scope, cl.Route).record, fields...).Err())
		return cl
	}

	tests := map[string]struct {
		header string
		want   http.Header
	}{
		"a JSON header": {`{"Content-Type":["application/json"],"X-Trace":["a","b"]}`, http.Header{"Content-Type": {"application/json"}, "X-Trace": {"a", "b"}}},
		"an empty JSON": {`{}`, http.Header{}},
		"no header":     {``, http.Header{}},
	}
	for name, tt := range tests {
		t.Run(name, func(t *testing.T) {
			cl := completed("k-"+name, "sc", "201", "hd", tt.header, "bd", `{"id":1}`)
			res, err := s.Claim(ctx, cl)
			require.NoError(t, err)
			require.Equal(t, server.VerdictReplay, res.Verdict)
			assert.Equal(t, &server.Response{Status: 201, Header: tt.want, Body: []byte(`{"id":1}`)}, res.Response)
		})
	}

	cl := completed("k-corrupt", "hd", "\x02\x00")
	_, err := s.Claim(ctx, cl)
	assert.ErrorContains(t, err, "stored response")
}
