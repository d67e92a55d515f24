package opsview

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
	"unicode/utf8"
)

// MaxBody is the most of a body that Body shows.
const MaxBody = 64 << 10

// binaryPreview is how many of a binary body's first bytes Body shows.
const binaryPreview = 256

// Body returns b for people, on a terminal or a page: text (UTF-8 without
// a NUL byte) is cut to MaxBody bytes and keeps its newlines and tabs, with
// every other character that is not printable escaped as [Text] does, so
// that a stored body cannot move the cursor, set a window's title or write
// a terminal's clipboard; a binary body is shown as such, its size and a
// hex dump of its first 256 bytes.
func Body(b []byte) string {
	if binary(b) {
		n := min(len(b), binaryPreview)
		return "(binary: " + strconv.Itoa(len(b)) + " bytes; the first " + strconv.Itoa(n) + " in hex:)\n" +
			strings.TrimSuffix(hex.Dump(b[:n]), "\n")
	}
	cut, note := cutText(b)
	return escape(string(cut), "\n\t") + note
}

// BodyJSON returns b as a JSON string field shows it (JSON escapes the
// control characters itself): UTF-8 text cut to MaxBody bytes, or a note
// of the size of a body that is not UTF-8.
func BodyJSON(b []byte) string {
	if !utf8.Valid(b) {
		return "(" + strconv.Itoa(len(b)) + " bytes, not UTF-8 text)"
	}
	cut, note := cutText(b)
	return string(cut) + note
}

// binary reports a body that is not text: not UTF-8, or with a NUL byte.
func binary(b []byte) bool {
	return !utf8.Valid(b) || bytes.IndexByte(b, 0) >= 0
}

// cutText cuts UTF-8 text b to at most MaxBody bytes, at a character's
// start, and returns the note that says so ("" when b is whole).
func cutText(b []byte) ([]byte, string) {
	if len(b) <= MaxBody {
		return b, ""
	}
	cut := MaxBody
	for cut > 0 && !utf8.RuneStart(b[cut]) {
		cut--
	}
	return b[:cut], "\n(cut at " + strconv.Itoa(cut) + " of " + strconv.Itoa(len(b)) + " bytes)"
}

// Text returns s fit for one line of a terminal or a page: every character
// that Go does not call printable ([strconv.IsPrint]: control characters
// such as ESC, tab and newline, C1 controls, format characters such as
// the bidirectional overrides, spaces other than ' ') is escaped as in a Go
// string literal (\x1b, \t, \u202e), and every byte that is not UTF-8 as
// \xNN. Printable text, backslashes included, is kept as it is: a stored
// value can then neither drive the operator's terminal nor hide in it.
func Text(s string) string { return escape(s, "") }

// escape is Text that keeps the characters of keep as they are.
func escape(s, keep string) string {
	if !strings.ContainsFunc(s, func(r rune) bool { return notPrintable(r) && !strings.ContainsRune(keep, r) }) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case strconv.IsPrint(r), strings.ContainsRune(keep, r):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRuneToASCII(r) // '\x1b'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

// notPrintable reports a character Text escapes (utf8.RuneError stands
// for a byte that is not UTF-8, and for U+FFFD, which is printable: Text
// tells them apart).
func notPrintable(r rune) bool { return r == utf8.RuneError || !strconv.IsPrint(r) }
