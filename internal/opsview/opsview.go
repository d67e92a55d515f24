// Package opsview holds what idemctl and the admin page show the same
// way: the headers of an outbox message an operator may see, a stored
// body as text, and durations rounded for people.
package opsview

import (
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
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

// MaxBody is the most of a body that Body shows.
const MaxBody = 64 << 10

// Body returns b as text when it is UTF-8 (cut to MaxBody bytes), or a
// note of its size when it is binary.
func Body(b []byte) string {
	if !utf8.Valid(b) {
		return "(" + strconv.Itoa(len(b)) + " bytes, not UTF-8 text)"
	}
	if len(b) > MaxBody {
		cut := MaxBody
		for cut > 0 && !utf8.RuneStart(b[cut]) {
			cut--
		}
		return string(b[:cut]) + "\n(cut at " + strconv.Itoa(cut) + " of " + strconv.Itoa(len(b)) + " bytes)"
	}
	return string(b)
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
