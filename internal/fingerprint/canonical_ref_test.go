package fingerprint

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"unicode/utf8"
)

// The reference canonicaliser: canonical.go as it was before it was made
// linear (issue 22, D1), kept as the specification that the differential
// tests hold the linear one to. It builds each member's value in a buffer
// of its own and copies it into its parent, so an object nested d deep
// copies its innermost data d times: use it on test inputs only. With
// caseOrder it applies the sha256-v3 rule (D2) the plain way: an object
// with two member names that encoding/json decodes to strings equal under
// strings.EqualFold but that are written differently keeps its document
// order.

// refCanonicalJSON is canonicalJSONV2 (sha256-v1 and -v2), the quadratic way.
func refCanonicalJSON(body []byte) ([]byte, bool) { return refCanonicalize(body, false) }

// refCanonicalJSONV3 is canonicalJSON (sha256-v3), the quadratic way.
func refCanonicalJSONV3(body []byte) ([]byte, bool) { return refCanonicalize(body, true) }

func refCanonicalize(body []byte, caseOrder bool) ([]byte, bool) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, false
	}
	c := refCanon{in: body, caseOrder: caseOrder}
	return c.value(make([]byte, 0, len(body))), true
}

// canon walks input that json.Valid accepted, so it checks nothing twice.
type refCanon struct {
	in        []byte
	pos       int
	caseOrder bool
}

func (c *refCanon) skipSpace() {
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ' ', '\t', '\n', '\r':
			c.pos++
		default:
			return
		}
	}
}

func (c *refCanon) value(out []byte) []byte {
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

type refMember struct{ key, val []byte }

func (c *refCanon) object(out []byte) []byte {
	c.pos++ // '{'
	var members []refMember
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
		members = append(members, refMember{key: key, val: c.value(nil)})
	}
	if !c.caseOrder || !refFoldCollision(members) {
		slices.SortStableFunc(members, func(a, b refMember) int { return bytes.Compare(a.key, b.key) })
	}
	out = append(out, '{')
	for i, m := range members {
		if i > 0 {
			out = append(out, ',')
		}
		out = append(append(append(out, m.key...), ':'), m.val...)
	}
	return append(out, '}')
}

func (c *refCanon) array(out []byte) []byte {
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
func (c *refCanon) scalar(out []byte) []byte {
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
func (c *refCanon) str(out []byte) []byte {
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
func (c *refCanon) escape(out []byte) []byte {
	e := c.in[c.pos+1]
	c.pos += 2
	switch e {
	case 'b':
		return refAppendRune(out, '\b')
	case 'f':
		return refAppendRune(out, '\f')
	case 'n':
		return refAppendRune(out, '\n')
	case 'r':
		return refAppendRune(out, '\r')
	case 't':
		return refAppendRune(out, '\t')
	case 'u':
		return c.unicode(out)
	default: // '"', '\\', '/'
		return refAppendRune(out, rune(e))
	}
}

// unicode decodes the \uXXXX escape whose hex digits start at c.pos,
// joining a surrogate pair.
func (c *refCanon) unicode(out []byte) []byte {
	r := refHex4(c.in[c.pos:])
	c.pos += 4
	if r < 0xd800 || r > 0xdfff {
		return refAppendRune(out, r)
	}
	if r <= 0xdbff && c.pos+6 <= len(c.in) && c.in[c.pos] == '\\' && c.in[c.pos+1] == 'u' {
		if lo := refHex4(c.in[c.pos+2:]); lo >= 0xdc00 && lo <= 0xdfff {
			c.pos += 6
			return refAppendRune(out, 0x10000+(r-0xd800)<<10+(lo-0xdc00))
		}
	}
	return refAppendEscape(out, r) // a lone surrogate: no UTF-8 form
}

func refHex4(b []byte) rune {
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
func refAppendRune(out []byte, r rune) []byte {
	switch {
	case r == '"':
		return append(out, '\\', '"')
	case r == '\\':
		return append(out, '\\', '\\')
	case r < 0x20:
		return refAppendEscape(out, r)
	default:
		return utf8.AppendRune(out, r)
	}
}

func refAppendEscape(out []byte, r rune) []byte {
	const digits = "0123456789abcdef"
	return append(out, '\\', 'u', digits[r>>12&0xf], digits[r>>8&0xf], digits[r>>4&0xf], digits[r&0xf])
}

// refFoldCollision reports whether two of members have names that
// encoding/json reads as one field (strings.EqualFold of the decoded
// strings, where a lone surrogate decodes to U+FFFD) but that are written
// differently.
func refFoldCollision(members []refMember) bool {
	names := make([]string, len(members))
	for i, m := range members {
		if err := json.Unmarshal(m.key, &names[i]); err != nil {
			panic(err) // a canonical string is valid JSON
		}
	}
	for i := range members {
		for j := range i {
			if strings.EqualFold(names[i], names[j]) && !bytes.Equal(members[i].key, members[j].key) {
				return true
			}
		}
	}
	return false
}
