package fingerprint

import (
	"bytes"
	"cmp"
	"slices"
	"unicode"
	"unicode/utf8"
)

// order puts the members of one object (in document order) in canonical
// order: sorted by key, members with one key in document order; or, under
// the sha256-v3 rule, all in document order when two keys differ but fold
// together (see canonicalJSON). A member's position in flat breaks ties,
// which makes the sort stable.
func (c *canon) order(ms []memberSpan) {
	if len(ms) < 2 || c.foldOrder && c.foldCollision(ms) {
		return
	}
	slices.SortFunc(ms, func(a, b memberSpan) int {
		return cmp.Or(bytes.Compare(c.keyOf(a), c.keyOf(b)), cmp.Compare(a.key, b.key))
	})
}

// keyOf is m's key as canonically encoded, quotes included: the keys sort
// by these bytes.
func (c *canon) keyOf(m memberSpan) []byte { return c.flat[m.key:m.colon] }

// foldedMember is a member of the object that foldCollision looks at: the
// hash of its folded name and its index.
type foldedMember struct {
	hash uint64
	i    int
}

// foldCollision reports whether two of ms have different keys with one
// folded name (see compareFolded). It sorts the members by the hash of
// their folded names, then by the names (only where the hashes are equal),
// so that each set of members with one folded name is together.
func (c *canon) foldCollision(ms []memberSpan) bool {
	c.folded = c.folded[:0]
	for i, m := range ms {
		c.folded = append(c.folded, foldedMember{hash: foldedHash(c.flat[m.key+1 : m.colon-1]), i: i})
	}
	slices.SortFunc(c.folded, func(a, b foldedMember) int {
		if a.hash != b.hash {
			return cmp.Compare(a.hash, b.hash)
		}
		return c.compareFolded(ms[a.i], ms[b.i])
	})
	for k := 1; k < len(c.folded); k++ {
		a, b := ms[c.folded[k-1].i], ms[c.folded[k].i]
		if c.folded[k-1].hash == c.folded[k].hash && c.compareFolded(a, b) == 0 && !bytes.Equal(c.keyOf(a), c.keyOf(b)) {
			return true
		}
	}
	return false
}

// foldedHash is the FNV-1a hash of the folded characters of a canonically
// encoded string without its quotes: names that compareFolded finds equal
// hash the same.
func foldedHash(s []byte) uint64 {
	const offset, prime = 14695981039346656037, 1099511628211
	h := uint64(offset)
	for len(s) > 0 {
		r, n := rune(upperASCII(s[0])), 1
		if s[0] >= utf8.RuneSelf || s[0] == '\\' {
			r, n = foldedRune(s)
		}
		h = (h ^ uint64(r)) * prime
		s = s[n:]
	}
	return h
}

// compareFolded orders members by the name that encoding/json matches
// struct fields with: the decoded key, each character folded to the
// smallest of its Unicode simple case folding orbit (ASCII letters to upper
// case), a lone surrogate decoded as U+FFFD. Two keys compare equal
// exactly when encoding/json would match them to one field
// (bytes.EqualFold of the decoded names).
func (c *canon) compareFolded(a, b memberSpan) int {
	x, y := c.flat[a.key+1:a.colon-1], c.flat[b.key+1:b.colon-1] // without the quotes
	for len(x) > 0 && len(y) > 0 {
		if bx, by := x[0], y[0]; bx < utf8.RuneSelf && by < utf8.RuneSelf && bx != '\\' && by != '\\' {
			if bx, by = upperASCII(bx), upperASCII(by); bx != by {
				return cmp.Compare(bx, by)
			}
			x, y = x[1:], y[1:]
			continue
		}
		rx, nx := foldedRune(x)
		ry, ny := foldedRune(y)
		if rx != ry {
			return cmp.Compare(rx, ry)
		}
		x, y = x[nx:], y[ny:]
	}
	return cmp.Compare(len(x), len(y))
}

// foldedRune decodes the first character of a canonically encoded string
// (without its quotes) and returns it folded, with its length in s.
func foldedRune(s []byte) (rune, int) {
	switch b := s[0]; {
	case b == '\\':
		switch s[1] {
		case 'u': // a control character, or a lone surrogate
			r := hex4(s[2:])
			if utf8.ValidRune(r) {
				return r, 6
			}
			return utf8.RuneError, 6
		default: // '"' or '\\'
			return rune(s[1]), 2
		}
	case b < utf8.RuneSelf:
		return rune(upperASCII(b)), 1
	}
	r, n := utf8.DecodeRune(s)
	return foldRune(r), n
}

func upperASCII(b byte) byte {
	if b >= 'a' && b <= 'z' {
		return b - 'a' + 'A'
	}
	return b
}

// foldRune is the smallest rune of r's Unicode simple case folding orbit,
// as encoding/json folds names.
func foldRune(r rune) rune {
	for {
		next := unicode.SimpleFold(r)
		if next <= r {
			return next
		}
		r = next
	}
}
