package conformance

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestLookup(t *testing.T) {
	body := []byte(`{"id":"p1","data":{"id":42,"deep":{"n":1.5}},"list":[1]}`)
	tests := []struct {
		path string
		want any
		ok   bool
	}{
		{"id", "p1", true},
		{"data.id", "42", true},
		{"data.deep.n", "1.5", true},
		{"missing", nil, false},
		{"id.more", nil, false},
		{"list.0", nil, false},
	}
	for _, tt := range tests {
		v, ok := lookup(body, tt.path)
		assert.Equal(t, tt.ok, ok, tt.path)
		if ok {
			assert.Equal(t, tt.want, toString(v), tt.path)
		}
	}
	_, ok := lookup([]byte("not json"), "id")
	assert.False(t, ok)
}

// toString renders what lookup returns, for comparison.
func toString(v any) any {
	if s, ok := v.(interface{ String() string }); ok {
		return s.String()
	}
	return v
}

func TestCount(t *testing.T) {
	bodies := map[string]string{
		"/ok": `{"account":{"payment_count":12}}`, "/float": `{"account":{"payment_count":12.5}}`,
		"/string": `{"account":{"payment_count":"12"}}`, "/missing": `{}`,
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer first" {
			http.Error(w, "who?", http.StatusUnauthorized)
			return
		}
		_, _ = w.Write([]byte(bodies[r.URL.Path]))
	}))
	defer srv.Close()
	r := newRunner(Config{Header: http.Header{"Authorization": {"Bearer first"}},
		Principal2: http.Header{"Authorization": {"Bearer second"}}})
	for path, want := range map[string]int64{"/ok": 12, "/float": -1, "/string": -1, "/missing": -1} {
		r.cfg.Effects = Effects{CountURL: srv.URL + path, CountField: "account.payment_count"}
		n, err := r.count(context.Background())
		if want < 0 {
			assert.Error(t, err, path)
			continue
		}
		require.NoError(t, err, path)
		assert.Equal(t, want, n, path)
	}
}
