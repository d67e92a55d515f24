package fingerprint

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzFingerprint checks the fingerprint of request bodies. For any body it
// never panics. For a JSON body: the canonical form is a fixed point, valid
// JSON, and decodes to what the body decodes to; the same document written
// again with shuffled object members (where the order does not count: see
// jsonWriter.shuffle), random insignificant whitespace and
// random string escapes (built from a parse that keeps numbers as written,
// never through float64) has the same digest; and the document with one
// scalar or member name changed has another digest. seed drives the
// rewriting, pick chooses the value to change. -fuzzminimizetime keeps the
// fuzzer from spending a short run minimising one input (the default
// allows a minute per input):
//
//	go test -run '^$' -fuzz FuzzFingerprint -fuzztime 5m -fuzzminimizetime 10s ./internal/fingerprint
func FuzzFingerprint(f *testing.F) {
	for _, doc := range fingerprintSeeds {
		f.Add([]byte(doc), uint64(1), uint16(0))
	}
	f.Fuzz(func(t *testing.T, doc []byte, seed uint64, pick uint16) {
		digest := bodyDigest(doc)
		canon, ok := canonicalJSON(doc)
		if !ok {
			return
		}
		checkCanonicalForm(t, doc, canon)
		tree, err := parseJSONTree(doc)
		if err != nil {
			t.Fatalf("canonicalJSON accepted %q, which encoding/json rejects: %v", doc, err)
		}
		rng := rand.New(rand.NewPCG(seed, seed>>32^0x9e3779b97f4a7c15))
		same := (&jsonWriter{rng: rng}).doc(tree)
		if got := bodyDigest(same); !bytes.Equal(got, digest) {
			again, _ := canonicalJSON(same)
			t.Fatalf("equivalent documents, different digests:\n%q\n%q\ncanonical:\n%q\n%q", doc, same, canon, again)
		}
		if !mutateScalar(tree, int(pick)) {
			return // no scalar and no member name to change
		}
		other := (&jsonWriter{rng: rng}).doc(tree)
		if bytes.Equal(bodyDigest(other), digest) {
			t.Fatalf("different documents, one digest:\n%q\n%q", doc, other)
		}
	})
}

// fingerprintSeeds are the seed bodies of the fuzz targets on bodies.
var fingerprintSeeds = []string{
	`{"amount":1000,"currency":"EUR","customer":{"id":"c_1","tags":["a","b"]}}`,
	`[1.0, 1, 1e2, 1E+2, -0, 0.10, -1.5e-3]`,
	`{"a":2,"a":1,"b":{"a":[]},"":null}`,
	`"\ud83d\ude00 \ud800 \uDC00x \u00e9\/\"\\\b\f\n\r\t\u0001"`,
	`{"\u0062":true,"a":false,"é":"ü","😀":[{},[]]}`,
	" \n\t{ } ", `0`, `null`, `""`, `[[[[]]]]`, `{"a":{"a":{"a":"a"}}}`,
	`{"amount_cents":100,"AMOUNT_CENTS":5000}`, `{"b":1,"\u212a":2,"k":3,"a":{"s":1,"\u017f":2}}`,
	`{"\ud800":1,"\udc00":2,"\ufffd":3}`, `{"x":{"A":1,"a":2},"y":[{"B":1,"b":2,"c":3}]}`,
	"a=1&b=2", "{", `{"a":1}{}`, "\"\xff\"", "",
}

// bodyDigest is the fingerprint of a POST to one route with body.
func bodyDigest(body []byte) []byte {
	return Sum(&Input{Method: "POST", Route: "POST /v1/payments", Body: body})
}

// checkCanonicalForm: the canonical form is valid JSON, its own canonical
// form, and means to encoding/json what the document means.
func checkCanonicalForm(t *testing.T, doc, canon []byte) {
	t.Helper()
	if !json.Valid(canon) {
		t.Fatalf("canonicalJSON(%q) = %q, not valid JSON", doc, canon)
	}
	if again, ok := canonicalJSON(canon); !ok || !bytes.Equal(again, canon) {
		t.Fatalf("canonicalJSON(%q) = %q, whose canonical form is %q", doc, canon, again)
	}
	if want, got := decodeAny(t, doc), decodeAny(t, canon); !reflect.DeepEqual(want, got) {
		t.Fatalf("canonicalJSON(%q) = %q, which decodes to %#v, want %#v", doc, canon, got, want)
	}
}

func decodeAny(t *testing.T, doc []byte) any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(doc))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		t.Fatalf("decode %q: %v", doc, err)
	}
	return v
}

// jsonNode is a parsed JSON value that keeps what the canonical form keeps:
// numbers and literals as written, strings as code points with lone
// surrogates kept, object members in order with their duplicates.
type jsonNode struct {
	kind    byte   // '{', '[', '"', or 'n' for a number or literal
	lit     string // 'n': as written
	str     []rune // '"': the code points; a lone surrogate is its own value
	members []jsonMember
	elems   []*jsonNode
}

type jsonMember struct {
	key []rune
	val *jsonNode
}

// parseJSONTree parses doc with encoding/json's tokenizer; string tokens
// are decoded again from their raw text, where encoding/json would turn
// lone surrogates into U+FFFD.
func parseJSONTree(doc []byte) (*jsonNode, error) {
	p := &treeParser{doc: doc, dec: json.NewDecoder(bytes.NewReader(doc))}
	p.dec.UseNumber()
	n, err := p.value()
	if err != nil {
		return nil, err
	}
	if _, err := p.dec.Token(); err != io.EOF {
		return nil, errors.New("trailing data")
	}
	return n, nil
}

type treeParser struct {
	doc []byte
	dec *json.Decoder
}

// token returns the next token and the raw text it was read from.
func (p *treeParser) token() (json.Token, []byte, error) {
	start := p.dec.InputOffset()
	tok, err := p.dec.Token()
	raw := p.doc[start:p.dec.InputOffset()]
	if i := bytes.IndexByte(raw, '"'); i >= 0 {
		raw = raw[i:] // skip the separators and spaces before a string
	}
	return tok, raw, err
}

func (p *treeParser) value() (*jsonNode, error) {
	tok, raw, err := p.token()
	if err != nil {
		return nil, err
	}
	switch v := tok.(type) {
	case json.Delim:
		if v == '{' {
			return p.object()
		}
		return p.array()
	case string:
		return &jsonNode{kind: '"', str: decodeUnits(raw)}, nil
	case json.Number:
		return &jsonNode{kind: 'n', lit: string(v)}, nil
	case bool:
		return &jsonNode{kind: 'n', lit: strconv.FormatBool(v)}, nil
	default:
		return &jsonNode{kind: 'n', lit: "null"}, nil
	}
}

func (p *treeParser) object() (*jsonNode, error) {
	n := &jsonNode{kind: '{'}
	for p.dec.More() {
		_, raw, err := p.token()
		if err != nil {
			return nil, err
		}
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		n.members = append(n.members, jsonMember{key: decodeUnits(raw), val: val})
	}
	_, _, err := p.token() // '}'
	return n, err
}

func (p *treeParser) array() (*jsonNode, error) {
	n := &jsonNode{kind: '['}
	for p.dec.More() {
		val, err := p.value()
		if err != nil {
			return nil, err
		}
		n.elems = append(n.elems, val)
	}
	_, _, err := p.token() // ']'
	return n, err
}

// decodeUnits decodes a JSON string literal that json.Valid accepted into
// code points, joining escaped surrogate pairs and keeping lone ones.
func decodeUnits(lit []byte) []rune {
	s := lit[1 : len(lit)-1]
	var units []rune
	for i := 0; i < len(s); {
		if s[i] != '\\' {
			r, size := utf8.DecodeRune(s[i:])
			units, i = append(units, r), i+size
			continue
		}
		switch e := s[i+1]; e {
		case 'u':
			v, _ := strconv.ParseUint(string(s[i+2:i+6]), 16, 32)
			units, i = append(units, rune(v)), i+6
		default:
			short := map[byte]rune{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t'}
			r, ok := short[e]
			if !ok {
				r = rune(e) // '"', '\\', '/'
			}
			units, i = append(units, r), i+2
		}
	}
	joined := units[:0]
	for i := 0; i < len(units); i++ {
		if hi, lo := units[i], rune(0); i+1 < len(units) {
			if lo = units[i+1]; hi >= 0xd800 && hi <= 0xdbff && lo >= 0xdc00 && lo <= 0xdfff {
				joined, i = append(joined, 0x10000+(hi-0xd800)<<10+(lo-0xdc00)), i+1
				continue
			}
		}
		joined = append(joined, units[i])
	}
	return joined
}

// mutateScalar changes the pick-th scalar or member name (counting in
// document order, modulo their number) to a different value; false when
// the tree has none.
func mutateScalar(root *jsonNode, pick int) bool {
	var targets []func()
	var walk func(n *jsonNode)
	walk = func(n *jsonNode) {
		switch n.kind {
		case '"':
			targets = append(targets, func() { n.str = append(n.str, 'z') })
		case 'n':
			targets = append(targets, func() { n.lit = otherLiteral(n.lit) })
		case '[':
			for _, e := range n.elems {
				walk(e)
			}
		case '{':
			for i := range n.members {
				m := &n.members[i]
				targets = append(targets, func() { m.key = append(m.key, 'z') })
				walk(m.val)
			}
		}
	}
	walk(root)
	if len(targets) == 0 {
		return false
	}
	targets[pick%len(targets)]()
	return true
}

// otherLiteral is a literal or number of another value: the other boolean,
// 0 for null, 1 for any zero, and the negation of any other number.
func otherLiteral(lit string) string {
	switch lit {
	case "true":
		return "false"
	case "false":
		return "true"
	case "null":
		return "0"
	}
	mantissa, _, _ := strings.Cut(strings.ToLower(lit), "e")
	switch {
	case strings.Trim(mantissa, "-0.") == "":
		return "1"
	case lit[0] == '-':
		return lit[1:]
	default:
		return "-" + lit
	}
}
