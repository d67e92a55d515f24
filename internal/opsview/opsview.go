// Package opsview holds what idemctl and the admin page show the same
// way: the headers of an outbox message an operator may see, stored text
// and bodies escaped for a terminal, and durations rounded for people.
package opsview

import (
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
