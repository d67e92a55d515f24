package admin

import (
	"context"
	"html"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// The answers of issue 46 that misled on the page: each test here failed
// before.

// A key alone lists every scope that holds it, from the lookup form
// (whose empty fields arrive as empty values) or a link.
func TestKeyAloneListsEveryScope(t *testing.T) {
	f := newFixture(t)
	f.call(t, "done-1")
	srv := f.page(t, Config{})
	for _, path := range []string{"/admin/key?key=done-1", "/admin/key?tenant=&principal=&route=&key=done-1"} {
		status, body := get(t, srv, path)
		require.Equal(t, http.StatusOK, status, "%s: %s", path, body)
		body = html.UnescapeString(body)
		assert.Contains(t, body, "POST /v1/charges", path)
		assert.Contains(t, body, "alice", path)
		assert.Contains(t, body, "/admin/key?key=done-1&principal=alice&route=POST+%2Fv1%2Fcharges&tenant=acme", path)
	}
	status, body := get(t, srv, "/admin/key?key=never-used")
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, "No record has this key in any scope")
}

// A route typed without its method is refused, not answered "no record".
func TestRouteWithoutItsMethodIsRefused(t *testing.T) {
	f := newFixture(t)
	f.call(t, "done-1")
	srv := f.page(t, Config{})
	status, body := get(t, srv, "/admin/key?tenant=acme&principal=alice&route=%2Fv1%2Fcharges&key=done-1")
	assert.Equal(t, http.StatusBadRequest, status, body)
	body = html.UnescapeString(body)
	assert.Contains(t, body, `the route "/v1/charges" has no method`)
	assert.Contains(t, body, `"POST /v1/charges"`)
	assert.NotContains(t, body, "No record has this key")
}

// countingAs is a record store whose count is c.
type countingAs struct {
	server.RecordStore
	c server.RecordCounts
}

func (s countingAs) CountRecords(context.Context) (server.RecordCounts, error) { return s.c, nil }

// The overview says what its count is: exact, an estimate, or not known
// yet, never a bare number that may be the planner's -1 read as 0.
func TestOverviewSaysWhatTheCountIs(t *testing.T) {
	for _, tt := range []struct {
		counts server.RecordCounts
		want   string
	}{
		{server.RecordCounts{Records: 78, RecordsAre: server.CountExact}, "<td>78</td>"},
		{server.RecordCounts{Records: 1200000, RecordsAre: server.CountEstimate}, "about 1200000 (the planner&#39;s estimate)"},
		{server.RecordCounts{Records: 10001, RecordsAre: server.CountAtLeast}, "more than 10000 (the exact count is not known yet"},
	} {
		ops := server.NewOperator(countingAs{server.NewMemoryStore(), tt.counts}, server.OperatorConfig{Logger: slog.New(slog.DiscardHandler)})
		mux := http.NewServeMux()
		mux.Handle("/admin/", Handler(Config{Records: ops, Prefix: "/admin", Logger: slog.New(slog.DiscardHandler)}))
		srv := httptest.NewServer(mux)
		status, body := get(t, srv, "/admin/")
		srv.Close()
		require.Equal(t, http.StatusOK, status)
		assert.Contains(t, body, tt.want)
	}
}

// A message the downstream refused (400) says no delivery may have taken
// effect, not that none reached the downstream above its last response.
func TestMessagePageAgreesWithItsLastResponse(t *testing.T) {
	f := newFixture(t)
	q, _ := parkedMessage(t)
	srv := f.page(t, Config{Outbox: q})
	status, body := get(t, srv, "/admin/message?key=msg-1")
	require.Equal(t, http.StatusOK, status)
	assert.NotContains(t, body, "no delivery reached the downstream")
	assert.Contains(t, body, "any time: no delivery may have taken effect (the downstream refused each)")
}
