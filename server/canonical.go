package server

import (
	"bytes"
	"encoding/json"
	"slices"
	"unicode/utf8"
)

// canonicalJSON returns the canonical form of body when body is exactly one
// JSON value (RFC 8259, surrounding whitespace allowed) in valid UTF-8, and
// false otherwise. The canonical form has no insignificant whitespace,
// object members sorted by key (a stable sort, so duplicate keys keep their
// order), numbers and literals exactly as written (1.0 and 1 differ), and
// strings re-encoded one way: only '"', '\' and control characters escaped,
// every other character as UTF-8, a lone surrogate escape kept as \uXXXX
// in lower case. Two bodies give one canonical form exactly when they hold
// the same value, as far as a JSON parser that keeps numbers and duplicate
// keys can tell. It never panics.
func canonicalJSON(body []byte) ([]byte, bool) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, false
	}
	c := canon{in: body}
	return c.value(make([]byte, 0, len(body))), true
}

// canon walks input that json.Valid accepted, so it checks nothing twice.
type canon struct {
	in  []byte
	pos int
}

func (c *canon) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *canon) value(out []byte) []byte {
	c.skipSpace()
	switch c.in[c.pos] {
	case '{':
		return c.object(out)
	case '[':
		return c.array(out)
	case '"':
		return c.str(out)
	default:
		return c.scalar(out)
	}
}

type member struct{ key, val []byte }

func (c *canon) object(out []byte) []byte {
	c.pos++ // '{'
	var members []member
	for {
		c.skipSpace()
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] == ',' {
			c.pos++
			c.skipSpace()
		}
		key := c.str(nil)
		c.skipSpace()
		c.pos++ // ':'
		members = append(members, member{key: key, val: c.value(nil)})
	}
	slices.SortStableFunc(members, func(a, b member) int { return bytes.Compare(a.key, b.key) })
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, m.key...), ':'), m.val...)
	}
	return append(out, '}')
}

func (c *canon) array(out []byte) []byte {
	c.pos++ // '['
	out = append(out, '[')
	for first := true; ; first = false {
		c.skipSpace()
		if c.in[c.pos] == ']' {
			c.pos++
			return append(out, ']')
		}
		if c.in[c.pos] == ',' {
			c.pos++
		}
		if !first {
			out = append(out, ',')
		}
		out = c.value(out)
	}
}

// scalar copies a number or a literal as written.
func (c *canon) scalar(out []byte) []byte {
	start := c.pos
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			return append(out, c.in[start:c.pos]...)
		}
		c.pos++
	}
	return append(out, c.in[start:]...)
}

// str decodes the string at c.pos and appends its canonical encoding.
func (c *canon) str(out []byte) []byte {
	c.pos++ // opening quote
	out = append(out, '"')
	for {
		b := c.in[c.pos]
		switch {
		case b == '"':
			c.pos++
			return append(out, '"')
		case b == '\\':
			out = c.escape(out)
		default:
			out = append(out, b) // valid UTF-8, >= 0x20: copied byte by byte
			c.pos++
		}
	}
}

// escape decodes the escape sequence at c.pos.
func (c *canon) escape(out []byte) []byte {
	e := c.in[c.pos+1]
	c.pos += 2
	switch e {
	case 'b':
		return appendRune(out, '\b')
	case 'f':
		return appendRune(out, '\f')
	case 'n':
		return appendRune(out, '\n')
	case 'r':
		return appendRune(out, '\r')
	case 't':
		return appendRune(out, '\t')
	case 'u':
		return c.unicode(out)
	default: // '"', '\\', '/'
		return appendRune(out, rune(e))
	}
}

// unicode decodes the \uXXXX escape whose hex digits start at c.pos,
// joining a surrogate pair.
func (c *canon) unicode(out []byte) []byte {
	r := hex4(c.in[c.pos:])
	c.pos += 4
	if r < 0xd800 || r > 0xdfff {
		return appendRune(out, r)
	}
	if r <= 0xdbff && c.pos+6 <= len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
		if lo := hex4(c.in[c.pos+2:]); lo >= 0xdc00 && lo <= 0xdfff {
			c.pos += 6
			return appendRune(out, 0x10000+(r-0xd800)<<10+(lo-0xdc00))
		}
	}
	return appendEscape(out, r) // a lone surrogate: no UTF-8 form
}

func hex4(b []byte) rune {
	var r rune
	for _, d := range b[:4] {
		r <<= 4
		switch {
		case d >= '0' && d <= '9':
			r |= rune(d - '0')
		case d >= 'a' && d <= 'f':
			r |= rune(d - 'a' + 10)
		default: // 'A'-'F'; json.Valid allows nothing else
			r |= rune(d - 'A' + 10)
		}
	}
	return r
}

// appendRune appends r in the canonical string encoding.
func appendRune(out []byte, r rune) []byte {
	switch {
	case r == '"':
		return append(out, '\\', '"')
	case r == '\\':
		return append(out, '\\', '\\')
	case r < 0x20:
		return appendEscape(out, r)
	default:
		return utf8.AppendRune(out, r)
	}
}

func appendEscape(out []byte, r rune) []byte {
	const digits = "0123456789abcdef"
	return append(out, '\\', 'u', digits[r>>12&0xf], digits[r>>8&0xf], digits[r>>4&0xf], digits[r&0xf])
}
