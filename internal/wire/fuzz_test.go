package wire

import (
	"net/http"
	"strings"
	"testing"
	"time"
)

// FuzzParseKey: ParseKey never panics; a key it accepts is valid, reads back
// the same through both wire forms, and a bare field is its own key.
//
//	go test -run '^$' -fuzz FuzzParseKey ./internal/wire
func FuzzParseKey(f *testing.F) {
	for _, s := range []string{"8e03978e-40d5-43e8-bc93-6894a57f9324", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`,
		`"a\"b\\c"`, "", `""`, `"`, `"abc`, `"a b"`, "a b", "\x00", "é", strings.Repeat("k", 256), ` "x" `} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, field string) {
		key, err := ParseKey(field)
		if err != nil {
			return
		}
		if err := ValidateKey(key); err != nil {
			t.Fatalf("ParseKey(%q) = %q, which ValidateKey rejects: %v", field, key, err)
		}
		for _, sf := range []bool{false, true} {
			if got, err := ParseKey(FormatKey(key, sf)); err != nil || got != key {
				t.Fatalf("ParseKey(FormatKey(%q, %v)) = %q, %v", key, sf, got, err)
			}
		}
		if trimmed := strings.Trim(field, " \t"); !strings.HasPrefix(trimmed, `"`) && key != trimmed {
			t.Fatalf("ParseKey(%q) = %q, want the bare field itself", field, key)
		}
	})
}

// FuzzParseRetryAfter: ParseRetryAfter never panics and never returns a
// negative wait; a delta it accepts formats back to at least itself, and an
// HTTP-date in the future gives the time until it.
//
//	go test -run '^$' -fuzz FuzzParseRetryAfter ./internal/wire
func FuzzParseRetryAfter(f *testing.F) {
	for _, s := range []string{"0", "5", "120", " 7 ", "-1", "1.5", "", "soon", "99999999999999999999",
		"Wed, 21 Oct 2015 07:28:00 GMT", "Monday, 30-Nov-26 12:00:00 GMT", "Mon Nov 30 12:00:00 2026"} {
		f.Add(s, int64(30))
	}
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	f.Fuzz(func(t *testing.T, value string, ahead int64) {
		wait, ok := ParseRetryAfter(value, now)
		if wait < 0 || (!ok && wait != 0) {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v", value, wait, ok)
		}
		if ok && isDigits(strings.TrimSpace(value)) {
			back, ok2 := ParseRetryAfter(FormatRetryAfter(wait), now)
			if !ok2 || back < wait {
				t.Fatalf("ParseRetryAfter(FormatRetryAfter(%v)) = %v, %v", wait, back, ok2)
			}
		}
		ahead = ahead % (1 << 30)
		if ahead < 0 {
			ahead = -ahead
		}
		date := now.Add(time.Duration(ahead) * time.Second).Format(http.TimeFormat)
		if got, ok := ParseRetryAfter(date, now); !ok || got != time.Duration(ahead)*time.Second {
			t.Fatalf("ParseRetryAfter(%q) = %v, %v; want %ds", date, got, ok, ahead)
		}
	})
}
