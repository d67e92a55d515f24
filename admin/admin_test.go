package admin

import (
	"context"
	"encoding/json"
	"html"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

const route = "POST /v1/charges"

// fixture is a store (memory, unless newFixtureOn says) with a Leased
// route whose handler does what the key says, and the admin page over it.
type fixture struct {
	store   recordStore
	api     *httptest.Server
	release chan struct{} // ends the handler of "live-*" keys
}

// recordStore is a store whose records the page reads.
type recordStore interface {
	server.Store
	server.RecordStore
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	return newFixtureOn(t, server.NewMemoryStore())
}

// newFixtureOn is newFixture on store.
func newFixtureOn(t *testing.T, store recordStore) *fixture {
	t.Helper()
	f := &fixture{store: store, release: make(chan struct{})}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ls, _ := server.LeaseFrom(r.Context())
		_ = ls.Checkpoint(r.Context(), "gateway-called", json.RawMessage(`{"charge":"ch_1"}`))
		op, _ := server.OperationFrom(r.Context())
		switch {
		case strings.HasPrefix(op.Key, "stuck-"):
			w.WriteHeader(http.StatusBadGateway) // ends the lease, keeps the record
		case strings.HasPrefix(op.Key, "live-"):
			<-f.release
		default:
			w.Header().Set("Set-Cookie", "session=s3cret")
			w.WriteHeader(http.StatusCreated)
			_, _ = io.WriteString(w, `{"charge_id":"ch_1"}`)
		}
	})
	mux := http.NewServeMux()
	cfg := server.Config{Mode: server.Leased, Scope: func(*http.Request) (string, string) { return "acme", "alice" },
		Logger: slog.New(slog.DiscardHandler)}
	mux.Handle(route, server.Middleware(f.store, cfg)(h))
	f.api = httptest.NewServer(mux)
	t.Cleanup(f.api.Close)
	t.Cleanup(func() { close(f.release) }) // before Close, which waits for the handlers
	return f
}

// call makes a charge with key; "live-*" keys return at once, leaving the
// handler running.
func (f *fixture) call(t *testing.T, key string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, f.api.URL+"/v1/charges", strings.NewReader(`{}`))
	req.Header.Set("Idempotency-Key", key)
	if strings.HasPrefix(key, "live-") {
		go func() {
			if resp, err := http.DefaultClient.Do(req); err == nil {
				resp.Body.Close()
			}
		}()
		require.Eventually(t, func() bool { _, err := f.lookup(key); return err == nil }, 10*time.Second, time.Millisecond)
		return
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	resp.Body.Close()
}

func (f *fixture) lookup(key string) (server.Record, error) {
	op := server.Operation{Tenant: "acme", Principal: "alice", Route: route, Key: key}
	return f.store.ReadRecord(context.Background(), op, false)
}

// page serves the admin page with cfg over f's store.
func (f *fixture) page(t *testing.T, cfg Config) *httptest.Server {
	t.Helper()
	cfg.Records = server.NewOperator(f.store, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
	cfg.Prefix, cfg.Logger = "/admin", slog.New(slog.DiscardHandler)
	mux := http.NewServeMux()
	mux.Handle("/admin/", Handler(cfg))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return srv
}

// get fetches path and returns the status and body.
func get(t *testing.T, srv *httptest.Server, path string) (int, string) {
	t.Helper()
	resp, err := http.Get(srv.URL + path)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// postForm posts form to path without following a redirect.
func postForm(t *testing.T, srv *httptest.Server, path string, form url.Values, header ...string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+path, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := client.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

func scopeForm(key string) url.Values {
	return url.Values{"tenant": {"acme"}, "principal": {"alice"}, "route": {route}, "key": {key}}
}

// evictForm is the evict form of key's record, without its token.
func evictForm(key string) url.Values { return url.Values{"scope": {scopeForm(key).Encode()}} }

var csrfField = regexp.MustCompile(`name="csrf" value="([^"]+)"`)

// token reads the form token from the evict confirmation of key.
func token(t *testing.T, srv *httptest.Server, key string) string {
	t.Helper()
	status, body := get(t, srv, "/admin/evict?"+scopeForm(key).Encode())
	require.Equal(t, http.StatusOK, status, body)
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(t, m, "the form has a token: %s", body)
	return m[1]
}

func TestPagesShowRecordsAndTheStuckOnes(t *testing.T) {
	f := newFixture(t)
	f.call(t, "done-1")
	f.call(t, "stuck-1")
	srv := f.page(t, Config{})

	status, body := get(t, srv, "/admin/")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "Stuck")
	assert.Contains(t, body, "read-only")

	status, body = get(t, srv, "/admin/inflight?stuck=1")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `<tr data-key="stuck-1" class="stuck">`)
	assert.NotContains(t, body, "done-1")
	link := regexp.MustCompile(`href="(/admin/key\?[^"]+)"`).FindStringSubmatch(body)
	require.NotNil(t, link, "the row links to the key's page")
	status, _ = get(t, srv, html.UnescapeString(link[1]))
	assert.Equal(t, http.StatusOK, status, "the link names the record: %s", link[1])

	status, body = get(t, srv, "/admin/key?"+scopeForm("done-1").Encode()+"&payload=1")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "the stored 201, replayed")
	assert.Contains(t, body, "ch_1")
	assert.NotContains(t, body, "s3cret", "the capture never stored Set-Cookie, and the page would not show it")
	assert.NotContains(t, body, "Evict", "read-only: no action")

	status, body = get(t, srv, "/admin/key?"+scopeForm("stuck-1").Encode())
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `<span class="state stuck">stuck</span>`)
	assert.Contains(t, body, "gateway-called")
	assert.Contains(t, body, "</html>", "the whole page rendered")

	status, _ = get(t, srv, "/admin/key?"+scopeForm("nope").Encode())
	assert.Equal(t, http.StatusNotFound, status)
	status, _ = get(t, srv, "/admin/key?route=&key=x")
	assert.Equal(t, http.StatusNotFound, status, "the key alone: no scope holds it")
	status, _ = get(t, srv, "/admin/key?tenant=acme&route=&key=x")
	assert.Equal(t, http.StatusBadRequest, status, "a scope without its route")
}

func TestReadOnlyPageRefusesEveryPost(t *testing.T) {
	f := newFixture(t)
	f.call(t, "stuck-ro")
	q, id := parkedMessage(t)
	srv := f.page(t, Config{Outbox: q})
	status, body := get(t, srv, "/admin/message?id=1")
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, body, `action="/admin/redrive"`, "read-only: no form")

	status, _ = postForm(t, srv, "/admin/evict", evictForm("stuck-ro"))
	assert.Equal(t, http.StatusForbidden, status)
	_, err := f.lookup("stuck-ro")
	assert.NoError(t, err, "nothing was evicted")
	status, _ = postForm(t, srv, "/admin/redrive", url.Values{"id": {"1"}})
	assert.Equal(t, http.StatusForbidden, status)
	st, err := q.Lookup(context.Background(), id)
	require.NoError(t, err)
	assert.Equal(t, outbox.StateParked, st.State, "nothing was re-driven")
}

// parkedMessage is an outbox whose one message (its ID returned) a
// downstream refused: parked, with an Authorization header.
func parkedMessage(t *testing.T) (*outbox.Memory, int64) {
	t.Helper()
	refusing := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, "unknown event", http.StatusBadRequest)
	}))
	t.Cleanup(refusing.Close)
	q := outbox.NewMemory(outbox.Config{Logger: slog.New(slog.DiscardHandler)})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() { _ = q.Run(ctx) }()
	id, err := q.Enqueue(ctx, outbox.Message{Name: "payment.created", Method: "POST", URL: refusing.URL + "/hook",
		Header: http.Header{"Authorization": {"Bearer s3cret"}}, Body: []byte(`{}`), Key: "msg-1"})
	require.NoError(t, err)
	require.Eventually(t, func() bool { p, _ := q.Parked(ctx, 0, 10); return len(p) == 1 }, 10*time.Second, time.Millisecond)
	return q, id
}

func TestEvictNeedsTheFormsTokenAndTheSameOrigin(t *testing.T) {
	f := newFixture(t)
	f.call(t, "stuck-csrf")
	srv := f.page(t, Config{AllowWrites: true})

	status, _ := postForm(t, srv, "/admin/evict", evictForm("stuck-csrf"))
	assert.Equal(t, http.StatusForbidden, status, "no token")
	form := evictForm("stuck-csrf")
	form.Set("csrf", "1.forged")
	status, _ = postForm(t, srv, "/admin/evict", form)
	assert.Equal(t, http.StatusForbidden, status, "a forged token")
	form.Set("csrf", token(t, srv, "stuck-csrf"))
	status, _ = postForm(t, srv, "/admin/evict", form, "Sec-Fetch-Site", "cross-site")
	assert.Equal(t, http.StatusForbidden, status, "a cross-site POST")
	_, err := f.lookup("stuck-csrf")
	require.NoError(t, err, "nothing was evicted")

	status, _ = postForm(t, srv, "/admin/evict", form, "Sec-Fetch-Site", "same-origin")
	assert.Equal(t, http.StatusSeeOther, status)
	_, err = f.lookup("stuck-csrf")
	assert.ErrorIs(t, err, server.ErrUnknownKey, "evicted")
}

// The acceptance of issue 30, through the page: evicting a live lease
// without force changes nothing.
func TestEvictOfALiveLeaseNeedsForce(t *testing.T) {
	f := newFixture(t)
	f.call(t, "live-1")
	srv := f.page(t, Config{AllowWrites: true})
	form := evictForm("live-1")
	form.Set("csrf", token(t, srv, "live-1"))
	before, err := f.lookup("live-1")
	require.NoError(t, err)

	status, body := postForm(t, srv, "/admin/evict", form)
	assert.Equal(t, http.StatusConflict, status)
	assert.Contains(t, body, "lease is live")
	after, err := f.lookup("live-1")
	require.NoError(t, err)
	before.ReadAt, after.ReadAt = time.Time{}, time.Time{}
	assert.Equal(t, before, after, "nothing changed")

	form.Set("force", "1")
	status, _ = postForm(t, srv, "/admin/evict", form)
	assert.Equal(t, http.StatusSeeOther, status)
	_, err = f.lookup("live-1")
	assert.ErrorIs(t, err, server.ErrUnknownKey)
}

func TestParkedMessagesAndRedrive(t *testing.T) {
	f := newFixture(t)
	q, id := parkedMessage(t)
	ctx := context.Background()

	srv := f.page(t, Config{Outbox: q, AllowWrites: true})
	status, body := get(t, srv, "/admin/parked")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `data-id="1"`)
	assert.Contains(t, body, "refused")

	status, body = get(t, srv, "/admin/message?key=msg-1")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, "unknown event")
	assert.NotContains(t, body, "s3cret", "a message's credentials are never shown")
	assert.Contains(t, body, "Withheld (never shown): Authorization")
	m := csrfField.FindStringSubmatch(body)
	require.NotNil(t, m)

	status, _ = postForm(t, srv, "/admin/redrive", url.Values{"id": {"1"}, "csrf": {m[1]}})
	assert.Equal(t, http.StatusSeeOther, status)
	require.Eventually(t, func() bool { st, _ := q.Lookup(ctx, id); return st.Attempts == 1 && st.State == outbox.StateParked },
		10*time.Second, time.Millisecond, "re-driven, refused again")
	status, _ = postForm(t, srv, "/admin/redrive", url.Values{"id": {"99"}, "csrf": {m[1]}})
	assert.Equal(t, http.StatusNotFound, status, "no such message")
}
