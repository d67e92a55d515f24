// Package opsview holds what idemctl and the admin page show the same
// way: the headers of an outbox message an operator may see, stored text
// and bodies escaped for a terminal, and durations rounded for people.
package opsview

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// sensitive are headers never shown of a message or of a downstream's
// response: credentials and cookies. (Idempotency records have their own
// rule, server.Operator's, which is stricter: only what a replay sends.)
var sensitive = map[string]bool{
	"Authorization": true, "Proxy-Authorization": true, "Cookie": true, "Set-Cookie": true,
	"X-Api-Key": true, "X-Auth-Token": true,
}

// Header returns the headers of h that may be shown, by canonical name,
// and the sorted names of those withheld.
func Header(h http.Header) (http.Header, []string) {
	out := http.Header{}
	var withheld []string
	for name, values := range h {
		canon := http.CanonicalHeaderKey(name)
		if sensitive[canon] {
			withheld = append(withheld, canon)
			continue
		}
		out[canon] = append(out[canon], values...)
	}
	slices.Sort(withheld)
	return out, slices.Compact(withheld)
}

// Duration rounds d for people: to the millisecond under a second, to
// the second under an hour, to the minute after.
func Duration(d time.Duration) string {
	switch a := d.Abs(); {
	case a < time.Second:
		return d.Round(time.Millisecond).String()
	case a < time.Hour:
		return d.Round(time.Second).String()
	default:
		return strings.TrimSuffix(d.Round(time.Minute).String(), "0s")
	}
}

// Time formats t in UTC to the second, "-" for the zero time.
func Time(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// RedriveNote says until when a parked outbox message may be re-driven:
// redriveBy, its first delivery that may have taken effect plus the key
// retention, or, when that is zero, at any time, with the reason that
// agrees with its last response (status, 0 when none arrived): no
// delivery yet, or every delivery refused by the downstream (a 4xx, which
// takes no effect), so no key of it is held there.
func RedriveNote(redriveBy time.Time, attempts, status int) string {
	switch {
	case !redriveBy.IsZero():
		return Time(redriveBy) + " (the downstream's key retention since the first delivery that may have acted)"
	case attempts == 0 && status == 0:
		return "any time: not delivered yet"
	case status != 0:
		return "any time: no delivery may have taken effect (the downstream refused each)"
	}
	return "any time: no delivery may have taken effect"
}

// Count renders a count of kind "exact" (or ""), "estimate" or "at
// least": "78", "about 1200000 (estimate)", "more than 10000 (not known
// yet: no estimate before the table's first ANALYZE)".
func Count(n int64, kind string) string {
	switch kind {
	case "estimate":
		return fmt.Sprintf("about %d (the planner's estimate)", n)
	case "at least":
		return fmt.Sprintf("more than %d (the exact count is not known yet: no estimate before the table's first ANALYZE)", n-1)
	}
	return fmt.Sprint(n)
}

// RouteProblem says what is wrong with a route an operator typed to name
// a record's scope, "" when nothing is: one that starts with "/" lacks the
// method by which the middleware names every route ("POST /v1/orders").
func RouteProblem(route string) string {
	if !strings.HasPrefix(route, "/") {
		return ""
	}
	return fmt.Sprintf("the route %q has no method: the middleware names a route by its method and pattern, so name it so (%q), or give the key alone to list every scope that holds it", route, "POST "+route)
}
