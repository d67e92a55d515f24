package fingerprint

import (
	"strings"
	"unicode"
)

// explains reports whether pattern, the r.Pattern that routed a request
// to path, names every part of the path that can vary, as a ServeMux
// pattern does: by its wildcards, each one set by the router (values, in
// pattern order; a {name...} may be empty), or, with none, by being the
// path itself ("POST /v1/payments", "{$}" included); a catch-all pattern
// ("/v1/accounts/") leaves the rest to [Input.Subtree]. A pattern in
// another router's syntax does not: echo v5 sets "/v1/accounts/:id", chi
// "{id:[0-9]+}" or "/files/*", and keeps their values to itself. The path
// then stands in for them.
func explains(pattern, path string, values [][2]string) bool {
	p := patternPath(pattern)
	if p == "" || strings.Contains(p, "*") || strings.Contains(p, "/:") {
		return false
	}
	n := 0
	for rest := p; ; n++ {
		open := strings.IndexByte(rest, '{')
		if open < 0 {
			break
		}
		end := strings.IndexByte(rest[open:], '}')
		if end < 0 {
			return false
		}
		name := rest[open+1 : open+end]
		rest = rest[open+end+1:]
		if name == "$" {
			n--
			continue
		}
		multi := strings.HasSuffix(name, "...")
		if !identifier(strings.TrimSuffix(name, "...")) || n >= len(values) || (!multi && values[n][1] == "") {
			return false
		}
	}
	return n > 0 || strings.HasSuffix(p, "/") || strings.TrimSuffix(p, "{$}") == path
}

// patternPath is pattern without its method and host: "POST
// example.com/v1/{id}" gives "/v1/{id}".
func patternPath(pattern string) string {
	p := pattern
	if i := strings.IndexAny(p, " \t"); i >= 0 {
		p = strings.TrimLeft(p[i:], " \t")
	}
	if i := strings.IndexByte(p, '/'); i > 0 {
		p = p[i:]
	}
	return p
}

// identifier reports whether name is a Go identifier, as a ServeMux
// wildcard's name must be.
func identifier(name string) bool {
	for i, c := range name {
		if c != '_' && !unicode.IsLetter(c) && (i == 0 || !unicode.IsDigit(c)) {
			return false
		}
	}
	return name != ""
}
