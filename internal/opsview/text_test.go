package opsview

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// hostile are stored values that would drive a terminal printed raw: the
// window's title (OSC 0), a clear screen (CSI 2J), the clipboard (OSC
// 52), a C1 CSI, a bidirectional override, a bell and a carriage return.
var hostile = map[string]string{
	"title":     "a\x1b]0;pwned\x07b",
	"clear":     "\x1b[2J\x1b[H",
	"clipboard": "\x1b]52;c;Y3VybCBldmlsIHwgc2g=\x1b\\",
	"c1 csi":    "x\u009b31mred",
	"bidi":      "abc\u202edcba",
	"cr":        "ok\rforged",
	"not utf-8": "caf\xe9\x9b",
}

// drives reports a byte or character of s that a terminal may act on.
func drives(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool {
		return r < 0x20 && r != '\n' && r != '\t' || r == 0x7f || r >= 0x80 && r < 0xa0 || r == 0x202e || r == 0xfffd
	})
}

func TestTextEscapesWhatDrivesATerminal(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"POST /v1/charges", "POST /v1/charges"},
		{`back\slash and "quotes"`, `back\slash and "quotes"`},
		{"café ✓", "café ✓"},
		{"tab\there", `tab\there`},
		{"line\nnext", `line\nnext`},
		{hostile["title"], `a\x1b]0;pwned\ab`},
		{hostile["c1 csi"], `x\u009b31mred`},
		{hostile["bidi"], `abc\u202edcba`},
		{hostile["not utf-8"], `caf\xe9\x9b`},
		{"nbsp\u00a0", `nbsp\u00a0`},
		{"\uFFFD", "\uFFFD"},
	} {
		assert.Equal(t, tc.want, Text(tc.in), "Text(%q)", tc.in)
	}
	for name, s := range hostile {
		assert.False(t, drives(Text(s)), "%s: Text(%q) = %q", name, s, Text(s))
	}
}

func TestBodyKeepsLinesAndEscapesTheRest(t *testing.T) {
	assert.Equal(t, "{\n\t\"a\": 1\n}", Body([]byte("{\n\t\"a\": 1\n}")), "a text body keeps its newlines and tabs")
	assert.Equal(t, `{"note":"\x1b]52;c;eA==\a"}`+"\n", Body([]byte("{\"note\":\"\x1b]52;c;eA==\x07\"}\n")))
	for name, s := range hostile {
		if name == "not utf-8" {
			continue
		}
		assert.False(t, drives(Body([]byte(s))), "%s: Body(%q) = %q", name, s, Body([]byte(s)))
	}
}

func TestBodyShowsABinaryBodyAsSuch(t *testing.T) {
	png := append([]byte("\x89PNG\r\n\x1a\n"), make([]byte, 300)...)
	got := Body(png)
	assert.True(t, strings.HasPrefix(got, "(binary: 308 bytes; the first 256 in hex:)\n00000000  89 50 4e 47 0d 0a 1a 0a"), got)
	assert.Equal(t, 1+16, strings.Count(got, "\n")+1, "the note and 16 lines of 16 bytes: %s", got)
	assert.False(t, drives(got), got)

	withNUL := []byte("text\x00\x1b[2J")
	assert.True(t, strings.HasPrefix(Body(withNUL), "(binary: 9 bytes; the first 9 in hex:)"), "a NUL byte makes it binary")
	assert.False(t, drives(Body(withNUL)))
	assert.False(t, drives(Body([]byte(hostile["not utf-8"]))))
}

func TestBodyCutsALongText(t *testing.T) {
	long := strings.Repeat("é", MaxBody) // 2 bytes each
	got := Body([]byte(long))
	assert.True(t, strings.HasSuffix(got, "\n(cut at 65536 of 131072 bytes)"), got[len(got)-40:])
	assert.Equal(t, got, BodyJSON([]byte(long)), "the same cut for JSON")
}

func TestBodyJSONKeepsTheText(t *testing.T) {
	assert.Equal(t, "a\x1bb\x00", BodyJSON([]byte("a\x1bb\x00")), "JSON escapes control characters itself")
	assert.Equal(t, "(3 bytes, not UTF-8 text)", BodyJSON([]byte("\xff\xfe\x00")))
}
