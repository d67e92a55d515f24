package api

import (
	"context"
	"net/http"
	"strings"
)

// caller is who a request is made for, from its bearer token.
type caller struct {
	// Tenant owns the accounts; Principal is the user or service of the
	// tenant that makes the request. Both scope idempotency keys.
	Tenant, Principal string
}

type callerKey struct{}

// callerFrom returns the authenticated caller of the request whose
// context is ctx.
func callerFrom(ctx context.Context) (caller, bool) {
	c, ok := ctx.Value(callerKey{}).(caller)
	return c, ok
}

// authenticate admits requests that carry "Authorization: Bearer
// <tenant>:<principal>" and answers 401 to the others. THIS IS A DEMO
// SCHEME: the token is not a secret and proves nothing; a real service
// verifies a signed token here. It runs before the idempotency middleware,
// so that a 401 stores nothing and the scope comes from the caller.
func authenticate(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		c, ok := parseBearer(r.Header.Get("Authorization"))
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="payments"`)
			writeProblem(w, http.StatusUnauthorized, "unauthenticated", "Unauthenticated",
				`send "Authorization: Bearer <tenant>:<principal>" (demo authentication)`)
			return
		}
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), callerKey{}, c)))
	})
}

// parseBearer reads "Bearer <tenant>:<principal>", each part a valid id.
func parseBearer(header string) (caller, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return caller{}, false
	}
	tenant, principal, ok := strings.Cut(strings.TrimSpace(token), ":")
	if !ok || !validID(tenant) || !validID(principal) {
		return caller{}, false
	}
	return caller{Tenant: tenant, Principal: principal}, true
}

// scope is the idempotency middleware's Config.Scope: keys are scoped by
// the authenticated tenant and principal, never by anything in the body.
func scope(r *http.Request) (tenant, principal string) {
	c, _ := callerFrom(r.Context())
	return c.Tenant, c.Principal
}

// validID reports whether s is 1 to 64 characters of [A-Za-z0-9._-].
func validID(s string) bool {
	if len(s) == 0 || len(s) > 64 {
		return false
	}
	for _, c := range []byte(s) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return false
		}
	}
	return true
}
