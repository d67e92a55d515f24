package fingerprint

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestForeignPatternsKeepThePath: a pattern that does not name every part
// of the path that can vary (another router's syntax: echo v5 sets
// "/v1/accounts/:id", chi "{id:[0-9]+}" or "/files/*", none of which are
// ServeMux wildcards) leaves the path in the fingerprint, so that one key
// on two accounts is two requests; a ServeMux pattern keeps its inputs as
// they were, so that stored digests stay reachable.
func TestForeignPatternsKeepThePath(t *testing.T) {
	tests := []struct {
		pattern, path string
		values        map[string]string // what the router set
		keepsPath     bool
	}{
		{"POST /v1/payments", "/v1/payments", nil, false},
		{"POST example.com/v1/payments", "/v1/payments", nil, false},
		{"POST /v1/payments/{$}", "/v1/payments/", nil, false},
		{"POST /v1/{acct}/payments", "/v1/a1/payments", map[string]string{"acct": "a1"}, false},
		{"/files/{path...}", "/files/", map[string]string{"path": ""}, false},
		{"POST /v1/accounts/", "/v1/accounts/a1", nil, false}, // Subtree holds it
		{"/v1/accounts/:id/payments", "/v1/accounts/1/payments", nil, true},
		{"/v1/accounts/{id:[0-9]+}/payments", "/v1/accounts/1/payments", map[string]string{"id": "1"}, true},
		{"/v1/files/*", "/v1/files/a", map[string]string{"*": "a"}, true},
		{"/v1/{acct}/payments", "/v1/a1/payments", nil, true}, // a router that set no value
		{"/v1/payments", "/v1/other", nil, true},
	}
	for _, tc := range tests {
		r := httptest.NewRequest(http.MethodPost, tc.path, nil)
		r.Pattern = tc.pattern
		for k, v := range tc.values {
			r.SetPathValue(k, v)
		}
		in := NewInput(r, "POST x", nil, nil)
		kept := len(in.PathValues) > 0 && in.PathValues[0] == [2]string{"", tc.path}
		assert.Equal(t, tc.keepsPath, kept, "pattern %q, path %q: PathValues %q", tc.pattern, tc.path, in.PathValues)
	}
}
