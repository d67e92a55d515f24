package idem

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestRequestKey(t *testing.T) {
	tr := NewTransport(Config{})
	tr.newKey = func() string { return "generated" }
	sf := NewTransport(Config{SFStringKeys: true})
	sf.newKey = func() string { return "generated" }
	long := strings.Repeat("k", 256)
	tests := []struct {
		name      string
		tr        *Transport
		method    string
		ctx       context.Context
		header    []string
		wantKey   string
		wantField string
		wantErr   bool
	}{
		{"POST gets a key", tr, "POST", context.Background(), nil, "generated", "generated", false},
		{"PATCH gets a key", tr, "PATCH", context.Background(), nil, "generated", "generated", false},
		{"custom method gets a key", tr, "CHARGE", context.Background(), nil, "generated", "generated", false},
		{"GET gets none", tr, "GET", context.Background(), nil, "", "", false},
		{"PUT gets none", tr, "PUT", context.Background(), nil, "", "", false},
		{"DELETE gets none", tr, "DELETE", context.Background(), nil, "", "", false},
		{"WithKey", tr, "POST", WithKey(context.Background(), "order-42"), nil, "order-42", "order-42", false},
		{"WithKey on GET", tr, "GET", WithKey(context.Background(), "g"), nil, "g", "g", false},
		{"WithoutKey", tr, "POST", WithoutKey(context.Background()), nil, "", "", false},
		{"header kept", tr, "POST", context.Background(), []string{"mine"}, "mine", "mine", false},
		{"header beats WithKey", tr, "POST", WithKey(context.Background(), "ctx"), []string{"hdr"}, "hdr", "hdr", false},
		{"header kept when opted out", tr, "POST", WithoutKey(context.Background()), []string{"hdr"}, "hdr", "hdr", false},
		{"sf-string header kept", tr, "POST", context.Background(), []string{`"q"`}, "q", `"q"`, false},
		{"sf-string option", sf, "POST", context.Background(), nil, "generated", `"generated"`, false},
		{"sf-string WithKey", sf, "POST", WithKey(context.Background(), "k"), nil, "k", `"k"`, false},
		{"empty WithKey", tr, "POST", WithKey(context.Background(), ""), nil, "", "", true},
		{"long WithKey", tr, "POST", WithKey(context.Background(), long), nil, "", "", true},
		{"spaced WithKey", tr, "POST", WithKey(context.Background(), "a b"), nil, "", "", true},
		{"bad header", tr, "POST", context.Background(), []string{"é"}, "", "", true},
		{"two headers", tr, "POST", context.Background(), []string{"a", "b"}, "", "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(tt.ctx, tt.method, "http://x/", nil)
			require.NoError(t, err)
			for _, h := range tt.header {
				req.Header.Add(KeyHeader, h)
			}
			opts := optionsOf(req.Context())
			key, field, err := tt.tr.requestKey(req, &opts)
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.wantKey, key)
			assert.Equal(t, tt.wantField, field)
		})
	}
}

func TestNewKeyIsUUIDv4(t *testing.T) {
	k := NewKey()
	u, err := uuid.Parse(k)
	require.NoError(t, err)
	assert.Equal(t, uuid.Version(4), u.Version())
	assert.NotEqual(t, k, NewKey())
}

// An invalid caller key is rejected before anything is sent.
func TestInvalidKeyNothingSent(t *testing.T) {
	a := &api{}
	srv := a.start(t)
	tr, _ := newTestTransport(t, Config{})
	_, err := tr.RoundTrip(post(t, WithKey(context.Background(), strings.Repeat("x", 300)), srv.URL, `{}`))
	require.ErrorIs(t, err, ErrKeyInvalid)
	assert.Contains(t, err.Error(), "300 bytes")
	assert.NotContains(t, err.Error(), "Certainty(")
	var e *Error
	require.ErrorAs(t, err, &e)
	assert.Zero(t, e.Attempts)
	assert.Equal(t, NotSent, e.Certainty)
	assert.False(t, e.MayHaveTakenEffect)
	assert.Zero(t, a.requests.Load())
}
