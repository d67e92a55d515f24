package admin

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// An operator who holds only an answer's Idempotency-Operation-Ref finds
// the record with the overview's reference field.
func TestLookUpByOperationReference(t *testing.T) {
	f := newFixture(t)
	f.call(t, "done-1")
	srv := f.page(t, Config{})
	ref := server.OperationRef("acme", "alice", route, "done-1")

	status, body := get(t, srv, "/admin/")
	require.Equal(t, http.StatusOK, status)
	assert.Contains(t, body, `action="/admin/ref"`, "the overview has the reference field")

	status, body = get(t, srv, "/admin/ref?"+url.Values{"ref": {" " + strings.ToUpper(ref)}, "payload": {"1"}}.Encode())
	require.Equal(t, http.StatusOK, status, body)
	assert.Contains(t, body, "<td>done-1</td>")
	assert.Contains(t, body, `<code id="ref">`+ref+`</code>`)
	assert.Contains(t, body, "ch_1", "the payload, when asked")

	status, body = get(t, srv, "/admin/ref?ref="+server.OperationRef("acme", "alice", route, "never"))
	assert.Equal(t, http.StatusNotFound, status)
	assert.Contains(t, body, "No record has operation reference")
	status, _ = get(t, srv, "/admin/ref?ref=done-1")
	assert.Equal(t, http.StatusBadRequest, status, "a key is not a reference")
}
