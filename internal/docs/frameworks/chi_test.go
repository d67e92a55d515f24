package frameworks

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/server"
)

// TestChiPatterns: behind chi, whatever the pattern's syntax (a plain
// parameter, a regexp one, a wildcard), a retry is replayed and the same
// key on another path is refused, never answered with the first path's
// response: chi sets r.Pattern, but the values of "{id:[0-9]+}" and "*"
// are not ServeMux path values, so the path stands in for them.
func TestChiPatterns(t *testing.T) {
	for pattern, paths := range map[string][2]string{
		"/v1/accounts/{id}/payments":        {"/v1/accounts/1/payments", "/v1/accounts/2/payments"},
		"/v1/accounts/{id:[0-9]+}/payments": {"/v1/accounts/1/payments", "/v1/accounts/2/payments"},
		"/v1/files/*":                       {"/v1/files/a", "/v1/files/b"},
	} {
		t.Run(pattern, func(t *testing.T) {
			r := chi.NewRouter()
			r.With(server.Middleware(nil, server.Config{})).Post(pattern, func(w http.ResponseWriter, r *http.Request) {
				w.WriteHeader(http.StatusCreated)
				_, _ = w.Write([]byte(r.URL.Path))
			})
			send := func(path string) *httptest.ResponseRecorder {
				req := httptest.NewRequest(http.MethodPost, path, strings.NewReader("{}"))
				req.Header.Set("Idempotency-Key", "k")
				w := httptest.NewRecorder()
				r.ServeHTTP(w, req)
				return w
			}
			require.Equal(t, http.StatusCreated, send(paths[0]).Code)
			again := send(paths[0])
			assert.Equal(t, "true", again.Header().Get("Idempotent-Replayed"), "the retry")
			other := send(paths[1])
			assert.Equal(t, http.StatusUnprocessableEntity, other.Code, "the key on %s: %s", paths[1], other.Body)
		})
	}
}
