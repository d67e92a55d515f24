package conformance

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestHostAllowed(t *testing.T) {
	tests := []struct {
		host  string
		allow []string
		want  bool
	}{
		{"127.0.0.1", nil, true},
		{"127.1.2.3", nil, true},
		{"::1", nil, true},
		{"localhost", nil, true},
		{"LOCALHOST", nil, true},
		{"10.0.0.1", nil, false},
		{"api.example.com", nil, false},
		{"api.example.com", []string{"API.example.com"}, true},
		{"fd00::1", []string{"[fd00::1]"}, true},
		{"api.example.com", []string{"example.com"}, false},
		{"localhost.example.com", nil, false},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, hostAllowed(tt.host, tt.allow), "hostAllowed(%q, %q)", tt.host, tt.allow)
	}
}

func TestValidate(t *testing.T) {
	ok := Config{URL: "http://127.0.0.1:8080/v1/payments"}
	assert.NoError(t, ok.Validate())
	tests := []struct {
		name   string
		modify func(*Config)
		want   error
	}{
		{"relative url", func(c *Config) { c.URL = "/v1/payments" }, ErrConfig},
		{"ftp url", func(c *Config) { c.URL = "ftp://127.0.0.1/x" }, ErrConfig},
		{"remote url", func(c *Config) { c.URL = "https://api.example.com/x" }, ErrHostNotAllowed},
		{"remote verify url", func(c *Config) {
			c.Effects = Effects{IDField: "id", VerifyURL: "https://api.example.com/p/{id}"}
		}, ErrHostNotAllowed},
		{"verify url without {id}", func(c *Config) { c.Effects = Effects{IDField: "id", VerifyURL: "http://127.0.0.1/p"} }, ErrConfig},
		{"count field alone", func(c *Config) { c.Effects.CountField = "n" }, ErrConfig},
		{"bad method", func(c *Config) { c.Method = "PO ST" }, ErrConfig},
		{"bad key header", func(c *Config) { c.KeyHeader = "Idempotency Key" }, ErrConfig},
		{"unknown key format", func(c *Config) { c.KeyFormat = "ulid" }, ErrConfig},
		{"one request at a time", func(c *Config) { c.Concurrency = 1 }, ErrConfig},
		{"unknown check", func(c *Config) { c.Checks = []string{"replay", "nope"} }, ErrConfig},
		{"negative timeout", func(c *Config) { c.RequestTimeout = -1 }, ErrConfig},
	}
	for _, tt := range tests {
		c := ok
		tt.modify(&c)
		err := c.Validate()
		assert.True(t, errors.Is(err, tt.want), "%s: Validate() = %v, want %v", tt.name, err, tt.want)
	}
	remote := Config{URL: "https://api.example.com/x", AllowHosts: []string{"api.example.com"}}
	assert.NoError(t, remote.Validate(), "a host named in AllowHosts")
}

func TestSelectChecks(t *testing.T) {
	all, err := selectChecks(nil)
	assert.NoError(t, err)
	assert.Len(t, all, len(CheckNames()))
	some, err := selectChecks([]string{"scope", "replay"})
	assert.NoError(t, err)
	var names []string
	for _, c := range some {
		names = append(names, c.name)
	}
	assert.Equal(t, []string{"baseline", "replay", "scope"}, names, "baseline always, battery order")
}
