package conformance

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestNewKeyFormats(t *testing.T) {
	r := newRunner(Config{URL: "http://127.0.0.1:1/x"})
	r.newUUID = func() string { return "8e12ac42-651b-4960-86ee-2cf188b8f1c6" }
	assert.Equal(t, "8e12ac42-651b-4960-86ee-2cf188b8f1c6", r.newKey(), "a plain UUID by default")
	r.cfg.KeyFormat = KeyPrefixed
	assert.Equal(t, "idemcheck-8e12ac42-651b-4960-86ee-2cf188b8f1c6", r.newKey())
}

func TestNamesKey(t *testing.T) {
	r := newRunner(Config{URL: "http://127.0.0.1:1/x", KeyHeader: "X-Request-Key"})
	key := "idemcheck-8e12ac42-651b-4960-86ee-2cf188b8f1c6"
	tests := []struct {
		body string
		want bool
	}{
		{"invalid idempotency key: invalid length: 46 != 36", true},
		{`{"error":"Idempotency-Key must be a UUID"}`, true},
		{`{"code":"IDEMPOTENCY_KEY_INVALID"}`, true},
		{"x-request-key: too long", true},
		{"bad key " + strings.ToUpper(key), true},
		{"insufficient funds", false},
		{"invalid API key", false},
	}
	for _, tt := range tests {
		x := exchange{call: call{key: key}, status: 400, body: []byte(tt.body)}
		assert.Equal(t, tt.want, r.namesKey(x), "namesKey(%q)", tt.body)
	}
}
