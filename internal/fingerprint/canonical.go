package fingerprint

import (
	"encoding/json"
	"unicode/utf8"
)

// canonicalJSON returns the canonical form of body under sha256-v3 when
// body is exactly one JSON value (RFC 8259, surrounding whitespace
// allowed) in valid UTF-8, and false otherwise. The canonical form has no
// insignificant whitespace, numbers and literals exactly as written (1.0
// and 1 differ), strings re-encoded one way (only '"', '\' and control
// characters escaped, every other character as UTF-8, a lone surrogate
// escape kept as \uXXXX in lower case), and the members of each object
// sorted by key, with two exceptions that keep the order in which the
// document wrote them, because a decoder may read them differently in
// another order:
//   - members with one name keep their order (a stable sort): {"a":1,"a":2}
//     and {"a":2,"a":1} differ;
//   - an object with two member names that differ but that a
//     case-insensitive decoder matches as one field (Go's encoding/json:
//     equal under Unicode simple case folding, a lone surrogate read as
//     U+FFFD) keeps all its members in document order:
//     {"amount":100,"AMOUNT":5000} and {"AMOUNT":5000,"amount":100} differ
//     (encoding/json reads 5000 and 100), though {"a":1,"b":2} and
//     {"b":2,"a":1} do not.
//
// Two bodies give one canonical form exactly when they hold the same
// value, as far as a JSON parser that keeps numbers, duplicate names, and
// the order of names that fold together can tell. It never panics, and its
// time and memory are linear in len(body) (O(n log n) for the sorting),
// whatever the nesting.
func canonicalJSON(body []byte) ([]byte, bool) { return canonicalize(body, true) }

// canonicalJSONV2 is the canonical form of sha256-v1 and sha256-v2:
// canonicalJSON without the case-folding exception, so every object's
// members are sorted by key (stably). Its bytes must never change.
func canonicalJSONV2(body []byte) ([]byte, bool) { return canonicalize(body, false) }

func canonicalize(body []byte, foldOrder bool) ([]byte, bool) {
	if !utf8.Valid(body) || !json.Valid(body) {
		return nil, false
	}
	c := canon{in: body, foldOrder: foldOrder, flat: make([]byte, 0, len(body))}
	c.value()
	return c.emit(), true
}

// canon makes the canonical form in two passes, each linear in the input.
// The first (value) walks input that json.Valid accepted, so it checks
// nothing twice, and writes the canonical form with every object's members
// in document order into flat, recording where each object and member landed;
// each object's members are then put in canonical order as index ranges.
// The second (emit) copies flat to the output once, writing each object's
// members in that order. No byte is copied more than twice, however deep
// the nesting (building each value apart and copying it into its parent,
// as a recursive canonicaliser does, copies the innermost bytes once per
// level: quadratic).
type canon struct {
	in        []byte
	pos       int
	foldOrder bool // the sha256-v3 rule for names that fold together
	flat      []byte
	objs      []objSpan      // in the order of their '{' (preorder)
	members   []memberSpan   // each object's, together, in canonical order
	done      []memberSpan   // the parsed members of the objects still open, innermost last
	folded    []foldedMember // foldCollision's, kept for the next object
}

// objSpan is an object in flat: [start, end), braces included. Its
// members are members[first:first+n]; next is the index in objs of the
// first object after it (its descendants come between).
type objSpan struct{ start, end, first, n, next int }

// memberSpan is a member in flat: its key (quoted) at [key, colon), its
// value at [colon+1, end). obj is the index in objs of the first object
// that can lie in its value: the value holds objects obj, obj+1, ... as
// long as they start before end.
type memberSpan struct{ key, colon, end, obj int }

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

func (c *canon) value() {
	c.skipSpace()
	switch c.in[c.pos] {
	case '{':
		c.object()
	case '[':
		c.array()
	case '"':
		c.str()
	default:
		c.scalar()
	}
}

// object writes the object at c.pos into flat in document order, with
// its members, and records it with its members in canonical order.
func (c *canon) object() {
	i := len(c.objs)
	c.objs = append(grown(c.objs, 1), objSpan{start: len(c.flat)})
	c.flat = append(c.flat, '{')
	open := len(c.done)
	c.pos++ // '{'
	for {
		c.skipSpace()
		if c.in[c.pos] == '}' {
			c.pos++
			break
		}
		if c.in[c.pos] == ',' {
			c.pos++
			c.skipSpace()
			c.flat = append(c.flat, ',')
		}
		m := memberSpan{key: len(c.flat)}
		c.str()
		c.skipSpace()
		c.pos++ // ':'
		m.colon = len(c.flat)
		c.flat = append(c.flat, ':')
		m.obj = len(c.objs)
		c.value()
		m.end = len(c.flat)
		c.done = append(grown(c.done, 1), m)
	}
	c.flat = append(c.flat, '}')
	first := len(c.members)
	c.members = append(grown(c.members, len(c.done)-open), c.done[open:]...)
	o := &c.objs[i]
	o.end, o.first, o.n, o.next = len(c.flat), first, len(c.done)-open, len(c.objs)
	c.done = c.done[:open]
	c.order(c.members[first:])
}

func (c *canon) array() {
	c.pos++ // '['
	c.flat = append(c.flat, '[')
	for first := true; ; first = false {
		c.skipSpace()
		if c.in[c.pos] == ']' {
			c.pos++
			c.flat = append(c.flat, ']')
			return
		}
		if c.in[c.pos] == ',' {
			c.pos++
		}
		if !first {
			c.flat = append(c.flat, ',')
		}
		c.value()
	}
}

// scalar copies a number or a literal as written.
func (c *canon) scalar() {
	start := c.pos
	for c.pos < len(c.in) {
		switch c.in[c.pos] {
		case ',', '}', ']', ' ', '\t', '\n', '\r':
			c.flat = append(c.flat, c.in[start:c.pos]...)
			return
		}
		c.pos++
	}
	c.flat = append(c.flat, c.in[start:]...)
}

// grown returns s with room for n more elements, doubling its capacity
// when it must grow: append grows a large slice by a quarter, so that a
// slice appended to its final length allocates some five times that in
// all, where doubling allocates about twice.
func grown[T any](s []T, n int) []T {
	if cap(s)-len(s) >= n {
		return s
	}
	g := make([]T, len(s), max(2*len(s)+n, 4))
	copy(g, s)
	return g
}

// emit returns flat with the members of every object in canonical order.
func (c *canon) emit() []byte {
	return c.emitRange(make([]byte, 0, len(c.flat)), 0, len(c.flat), 0)
}

// emitRange appends flat[lo:hi], writing each object in it in canonical
// order; objs[i] is the first object that can start in it.
func (c *canon) emitRange(out []byte, lo, hi, i int) []byte {
	for i < len(c.objs) && c.objs[i].start < hi {
		o := &c.objs[i]
		out = append(out, c.flat[lo:o.start]...)
		out = append(out, '{')
		for k, m := range c.members[o.first : o.first+o.n] {
			if k > 0 {
				out = append(out, ',')
			}
			out = append(out, c.flat[m.key:m.colon+1]...)
			out = c.emitRange(out, m.colon+1, m.end, m.obj)
		}
		out = append(out, '}')
		lo, i = o.end, o.next
	}
	return append(out, c.flat[lo:hi]...)
}

// str decodes the string at c.pos and writes its canonical encoding.
func (c *canon) str() {
	c.pos++ // opening quote
	c.flat = append(c.flat, '"')
	for {
		b := c.in[c.pos]
		switch {
		case b == '"':
			c.pos++
			c.flat = append(c.flat, '"')
			return
		case b == '\\':
			c.flat = c.escape(c.flat)
		default:
			c.flat = append(c.flat, b) // valid UTF-8, >= 0x20: copied byte by byte
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
