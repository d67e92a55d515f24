package fingerprint

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"unicode/utf8"
)

// jsonWriter writes a jsonNode back as JSON, choosing at random among the
// ways of writing the same document: object members shuffled (members with
// one name keep their order, which is part of the value), insignificant
// whitespace anywhere it may go, and each character of a string either as
// it is or escaped (short escapes, \u in either case, surrogate pairs).
type jsonWriter struct {
	rng *rand.Rand
	out []byte
}

func (w *jsonWriter) doc(n *jsonNode) []byte {
	w.out = nil
	w.value(n)
	w.space()
	return w.out
}

func (w *jsonWriter) space() {
	for w.rng.IntN(3) == 0 {
		w.out = append(w.out, " \t\n\r"[w.rng.IntN(4)])
	}
}

func (w *jsonWriter) value(n *jsonNode) {
	w.space()
	switch n.kind {
	case 'n':
		w.out = append(w.out, n.lit...)
	case '"':
		w.str(n.str)
	case '[':
		w.out = append(w.out, '[')
		for i, e := range n.elems {
			if i > 0 {
				w.space()
				w.out = append(w.out, ',')
			}
			w.value(e)
		}
		w.space()
		w.out = append(w.out, ']')
	case '{':
		w.out = append(w.out, '{')
		for i, m := range w.shuffle(n.members) {
			if i > 0 {
				w.space()
				w.out = append(w.out, ',')
			}
			w.space()
			w.str(m.key)
			w.space()
			w.out = append(w.out, ':')
			w.value(m.val)
		}
		w.space()
		w.out = append(w.out, '}')
	}
}

// shuffle permutes members, keeping the relative order of members that
// share a name, and keeping all in order when two names differ but fold
// together (sha256-v3: the order is part of the value).
func (w *jsonWriter) shuffle(members []jsonMember) []jsonMember {
	if foldTogether(members) {
		return members
	}
	byName := map[string][]jsonMember{}
	for _, m := range members {
		name := fmt.Sprint(m.key) // exact: lone surrogates stay distinct
		byName[name] = append(byName[name], m)
	}
	out := make([]jsonMember, 0, len(members))
	for _, i := range w.rng.Perm(len(members)) {
		name := fmt.Sprint(members[i].key)
		out = append(out, byName[name][0])
		byName[name] = byName[name][1:]
	}
	return out
}

// foldTogether reports whether two members have names that encoding/json
// matches as one field (string of the code points turns a lone surrogate
// into U+FFFD) but that differ.
func foldTogether(members []jsonMember) bool {
	for i := range members {
		for j := range i {
			a, b := members[i].key, members[j].key
			if strings.EqualFold(string(a), string(b)) && !slices.Equal(a, b) {
				return true
			}
		}
	}
	return false
}

var shortEscapes = map[rune]string{'"': `\"`, '\\': `\\`, '/': `\/`, '\b': `\b`, '\f': `\f`, '\n': `\n`, '\r': `\r`, '\t': `\t`}

func (w *jsonWriter) str(units []rune) {
	w.out = append(w.out, '"')
	for _, r := range units {
		short, hasShort := shortEscapes[r]
		mustEscape := r == '"' || r == '\\' || r < 0x20 || (r >= 0xd800 && r <= 0xdfff)
		switch choice := w.rng.IntN(3); {
		case hasShort && choice == 0:
			w.out = append(w.out, short...)
		case mustEscape || choice == 1:
			w.escape(r)
		default:
			w.out = utf8.AppendRune(w.out, r)
		}
	}
	w.out = append(w.out, '"')
}

// escape writes r as \u escapes, a surrogate pair above the BMP, in a
// random letter case.
func (w *jsonWriter) escape(r rune) {
	units := []rune{r}
	if r > 0xffff {
		r -= 0x10000
		units = []rune{0xd800 + r>>10, 0xdc00 + r&0x3ff}
	}
	for _, u := range units {
		hex := fmt.Sprintf(`\u%04x`, u)
		if w.rng.IntN(2) == 0 {
			hex = `\u` + strings.ToUpper(hex[2:])
		}
		w.out = append(w.out, hex...)
	}
}
