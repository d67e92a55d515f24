package conformance

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Config says which endpoint to check and how. URL is required; every
// other zero field means the default given with it.
type Config struct {
	// URL is the endpoint under test: an absolute http or https URL.
	URL string
	// Method is the method of an operation. Empty means POST.
	Method string
	// Body renders each operation's request body. The zero Template sends
	// an empty body.
	Body Template
	// Header is sent with every request: the first principal's
	// credentials, Content-Type. Nil sends no header but the key.
	Header http.Header
	// Principal2 holds a second principal's headers, which replace the
	// Header fields of the same names in the scope check. Nil makes the
	// scope check not applicable.
	Principal2 http.Header
	// KeyHeader names the request header that carries the key. Empty
	// means Idempotency-Key.
	KeyHeader string
	// KeyFormat is the shape of every key the checker sends (the
	// key-invalid check's malformed keys are built from it). Empty means
	// KeyUUID.
	KeyFormat KeyFormat
	// ReplayedHeader names the response header with which the API marks a
	// replay (Idempotent-Replayed in the idem contract). Empty means the
	// API documents none: a replay is then recognised by its status and
	// body alone.
	ReplayedHeader string
	// KeyRequired says that the endpoint refuses a request without a key;
	// false makes the key-missing check not applicable.
	KeyRequired bool
	// MaxKeyLen is the longest key the API accepts, in bytes; the
	// key-invalid check sends one byte more. Zero means 255.
	MaxKeyLen int
	// Effects says how effects are observed. The zero Effects compares
	// response bodies only.
	Effects Effects
	// Concurrency is how many requests the concurrent check sends at once
	// with one key. Zero means 8.
	Concurrency int
	// Operations is how many operations the faults check makes. Zero
	// means 20.
	Operations int
	// AttemptTimeout bounds each attempt of the faults check's idem
	// client; the proxy's slow responses last twice as long. Zero means
	// 2s.
	AttemptTimeout time.Duration
	// RequestTimeout bounds each request the other checks send. Zero
	// means 10s.
	RequestTimeout time.Duration
	// WaitTimeout bounds how long the concurrent check sends a key again,
	// after duplicates of it were told to wait, for the key to replay: a
	// wait that never ends fails the check. Zero means 30s.
	WaitTimeout time.Duration
	// Seed seeds the faults: the same seed gives the same fault to each
	// (operation number, attempt).
	Seed uint64
	// AllowHosts names the hosts, besides loopback ones, that the checker
	// may send requests to. Nil allows loopback only.
	AllowHosts []string
	// Checks names the checks to run (see CheckNames); nil runs them all.
	// Baseline runs in any case.
	Checks []string
}

// Effects says how the checker observes an operation's effects. Each
// field adds evidence; with none, responses are compared by status and
// body only.
type Effects struct {
	// IDField is the dotted path of the field of a 2xx JSON body that
	// names the resource the operation created ("payment_id", "data.id").
	// Empty means responses are compared by their bodies alone.
	IDField string
	// VerifyURL is a GET URL with the placeholder {id}, filled from
	// IDField: it must answer 2xx for every id a response named, which
	// shows that the effect a client was told of exists. It needs
	// IDField. Empty means ids are not looked up.
	VerifyURL string
	// CountURL answers a GET with a JSON object whose CountField is a
	// number that grows by one per effect of the endpoint (an account's
	// payment count). The checker must be its only writer during the run.
	// Empty means effects are not counted, and the faults check is not
	// applicable.
	CountURL string
	// CountField is the dotted path of the counter in CountURL's body.
	// Required with CountURL.
	CountField string
}

// KeyFormat is the shape of the checker's keys.
type KeyFormat string

// The key formats.
const (
	// KeyUUID is a random UUIDv4, 36 characters: the default, since it is
	// the key the IETF draft shows and the one that APIs which check the
	// key's format accept (gofiber's idempotency middleware requires 36
	// characters).
	KeyUUID KeyFormat = "uuid"
	// KeyPrefixed is "idemcheck-" and a random UUIDv4, 46 characters: easy
	// to find in the API's logs, for an API that takes any key up to its
	// maximum length.
	KeyPrefixed KeyFormat = "prefixed"
)

// Limits of Config, so that a run stays small and bounded: Validate
// refuses a Concurrency or Operations above them.
const (
	MaxConcurrency = 64
	MaxOperations  = 1000
)

// Limits of a response, so that the checker's memory stays bounded at
// MaxConcurrency responses at once, whatever the endpoint sends: a longer
// body, or a larger header block (net/http's default allows 10 MB), is an
// error, not a response.
const (
	MaxBodyBytes   = 1 << 20
	MaxHeaderBytes = 64 << 10
)

// Defaults of Config: what its zero fields mean.
const (
	DefaultKeyHeader      = "Idempotency-Key"
	DefaultMaxKeyLen      = 255
	DefaultConcurrency    = 8
	DefaultOperations     = 20
	DefaultAttemptTimeout = 2 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultWaitTimeout    = 30 * time.Second
)

// ErrConfig is wrapped by the errors that report an invalid Config.
var ErrConfig = errors.New("conformance: invalid configuration")

// ErrHostNotAllowed is wrapped by the error for a URL whose host is
// neither loopback nor named in Config.AllowHosts.
var ErrHostNotAllowed = errors.New("conformance: host is not loopback and not allowed")

// withDefaults returns c with its defaults resolved.
func (c Config) withDefaults() Config {
	if c.Method == "" {
		c.Method = http.MethodPost
	}
	if c.KeyHeader == "" {
		c.KeyHeader = DefaultKeyHeader
	}
	c.KeyHeader = http.CanonicalHeaderKey(c.KeyHeader)
	if c.KeyFormat == "" {
		c.KeyFormat = KeyUUID
	}
	if c.MaxKeyLen == 0 {
		c.MaxKeyLen = DefaultMaxKeyLen
	}
	if c.Concurrency == 0 {
		c.Concurrency = DefaultConcurrency
	}
	if c.Operations == 0 {
		c.Operations = DefaultOperations
	}
	if c.AttemptTimeout == 0 {
		c.AttemptTimeout = DefaultAttemptTimeout
	}
	if c.RequestTimeout == 0 {
		c.RequestTimeout = DefaultRequestTimeout
	}
	if c.WaitTimeout == 0 {
		c.WaitTimeout = DefaultWaitTimeout
	}
	return c
}

// Validate reports an error wrapping ErrConfig (or ErrHostNotAllowed) when
// Run cannot use c.
func (c Config) Validate() error {
	c = c.withDefaults()
	if err := c.validateURLs(); err != nil {
		return err
	}
	switch {
	case !validToken(c.Method):
		return fmt.Errorf("%w: method %q is not a token", ErrConfig, c.Method)
	case !validToken(c.KeyHeader) || (c.ReplayedHeader != "" && !validToken(c.ReplayedHeader)):
		return fmt.Errorf("%w: %q or %q is not a header name", ErrConfig, c.KeyHeader, c.ReplayedHeader)
	case c.KeyFormat != KeyUUID && c.KeyFormat != KeyPrefixed:
		return fmt.Errorf("%w: key format %q is not %s or %s", ErrConfig, c.KeyFormat, KeyUUID, KeyPrefixed)
	case c.MaxKeyLen < 1 || c.MaxKeyLen > 8192:
		return fmt.Errorf("%w: the maximum key length must be 1 to 8192, not %d", ErrConfig, c.MaxKeyLen)
	case c.Concurrency < 2 || c.Concurrency > MaxConcurrency:
		return fmt.Errorf("%w: concurrency must be 2 to %d, not %d", ErrConfig, MaxConcurrency, c.Concurrency)
	case c.Operations < 1 || c.Operations > MaxOperations:
		return fmt.Errorf("%w: operations must be 1 to %d, not %d", ErrConfig, MaxOperations, c.Operations)
	case c.AttemptTimeout < 0 || c.RequestTimeout < 0 || c.WaitTimeout < 0:
		return fmt.Errorf("%w: negative timeout", ErrConfig)
	case c.Effects.VerifyURL != "" && c.Effects.IDField == "":
		return fmt.Errorf("%w: a verify URL needs an id field", ErrConfig)
	case c.Effects.VerifyURL != "" && !strings.Contains(c.Effects.VerifyURL, "{id}"):
		return fmt.Errorf("%w: the verify URL %q has no {id}", ErrConfig, c.Effects.VerifyURL)
	case (c.Effects.CountURL == "") != (c.Effects.CountField == ""):
		return fmt.Errorf("%w: a count URL and a count field go together", ErrConfig)
	}
	_, err := selectChecks(c.Checks)
	return err
}

// validateURLs checks that every URL the run sends to is absolute http(s)
// on an allowed host.
func (c Config) validateURLs() error {
	urls := []string{c.URL, c.Effects.CountURL, strings.ReplaceAll(c.Effects.VerifyURL, "{id}", "id")}
	for i, raw := range urls {
		if raw == "" && i > 0 {
			continue
		}
		u, err := url.Parse(raw)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return fmt.Errorf("%w: %q is not an absolute http(s) URL", ErrConfig, raw)
		}
		if !hostAllowed(u.Hostname(), c.AllowHosts) {
			return fmt.Errorf("%w: %q: name the host to send to it (-allow-host %s)", ErrHostNotAllowed, raw, u.Hostname())
		}
	}
	return nil
}

// hostAllowed reports whether host is loopback (localhost, 127.0.0.0/8,
// ::1) or one of allow, compared case-insensitively.
func hostAllowed(host string, allow []string) bool {
	if ip := net.ParseIP(host); (ip != nil && ip.IsLoopback()) || strings.EqualFold(host, "localhost") {
		return true
	}
	for _, a := range allow {
		if strings.EqualFold(strings.Trim(a, "[]"), host) {
			return true
		}
	}
	return false
}

// validToken reports whether s is an RFC 9110 token (a method or a
// header name).
func validToken(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
		if !alnum && !strings.ContainsRune("!#$%&'*+-.^_`|~", rune(c)) {
			return false
		}
	}
	return true
}
