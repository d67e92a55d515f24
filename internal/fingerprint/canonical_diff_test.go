package fingerprint

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// FuzzCanonicalJSON holds the linear canonicaliser to the reference one
// (canonical_ref_test.go): for any body, canonicalJSONV2 answers what
// refCanonicalJSON answers and canonicalJSON what refCanonicalJSONV3
// answers, byte for byte.
//
//	go test -run '^$' -fuzz FuzzCanonicalJSON -fuzztime 5m -fuzzminimizetime 10s ./internal/fingerprint
func FuzzCanonicalJSON(f *testing.F) {
	for _, doc := range fingerprintSeeds {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) { checkAgainstReference(t, doc) })
}

// TestCanonicalJSONMatchesReference runs the differential check on the
// fuzz corpus of FuzzFingerprint and on generated documents, some of which
// must reach the sha256-v3 rule (the two forms differ).
func TestCanonicalJSONMatchesReference(t *testing.T) {
	docs := corpusBodies(t, "FuzzFingerprint")
	for _, s := range fingerprintSeeds {
		docs = append(docs, []byte(s))
	}
	rng := rand.New(rand.NewPCG(22, 2))
	for range 3000 {
		w := &jsonWriter{rng: rng}
		docs = append(docs, w.doc(randomTree(rng, 5)))
	}
	docs = append(docs, nested(1<<12, `{"b":0,"a":`, "}"), nested(1<<12, `{"K":0,"\u212a":`, "}"), manyObjects(1<<12))
	differ := 0
	for _, doc := range docs {
		if checkAgainstReference(t, doc) {
			differ++
		}
	}
	if differ < 100 {
		t.Errorf("the sha256-v3 rule changed %d of %d documents, want >= 100: the generator misses it", differ, len(docs))
	}
}

// checkAgainstReference compares both canonical forms of doc with the
// reference's, and reports whether the v3 form differs from the v2 one.
func checkAgainstReference(t *testing.T, doc []byte) bool {
	t.Helper()
	v2, ok2 := canonicalJSONV2(doc)
	ref2, refOK2 := refCanonicalJSON(doc)
	v3, ok3 := canonicalJSON(doc)
	ref3, refOK3 := refCanonicalJSONV3(doc)
	if ok2 != refOK2 || !bytes.Equal(v2, ref2) {
		t.Fatalf("canonicalJSONV2(%q) = %q, %v; the reference answers %q, %v", doc, v2, ok2, ref2, refOK2)
	}
	if ok3 != refOK3 || !bytes.Equal(v3, ref3) {
		t.Fatalf("canonicalJSON(%q) = %q, %v; the reference answers %q, %v", doc, v3, ok3, ref3, refOK3)
	}
	return !bytes.Equal(v2, v3)
}

// corpusBodies reads the body (the first value) of each input in
// testdata/fuzz/<target>.
func corpusBodies(t *testing.T, target string) [][]byte {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "fuzz", target, "*"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no corpus for %s: %v", target, err)
	}
	var bodies [][]byte
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		lines := strings.Split(string(data), "\n")
		lit, ok := strings.CutPrefix(lines[1], "[]byte(")
		if !ok || lines[0] != "go test fuzz v1" {
			t.Fatalf("%s: not a fuzz input of a []byte: %q", name, data)
		}
		body, err := strconv.Unquote(strings.TrimSuffix(lit, ")"))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		bodies = append(bodies, []byte(body))
	}
	return bodies
}

// foldingNames are the names randomTree picks from: some fold together
// (a A, K k and the Kelvin sign, s S and the long s, é É), a lone
// surrogate and U+FFFD decode alike, and some need escaping.
var foldingNames = [][]rune{
	{'a'}, {'A'}, {'b'}, {'K'}, {'k'}, {0x212a}, {'s'}, {'S'}, {0x17f}, {'é'}, {'É'},
	{0xd800}, {0xfffd}, {}, {'"', 'a'}, {'\\'}, {0x01}, {'a', 'b'}, {'A', 'B'}, {'a', 'B'},
}

// randomTree is a random JSON value at most depth deep, its object names
// drawn from foldingNames.
func randomTree(rng *rand.Rand, depth int) *jsonNode {
	switch k := rng.IntN(10); {
	case depth == 0 || k < 3:
		lits := []string{"0", "1", "-1.5e3", "true", "false", "null", "1.0"}
		return &jsonNode{kind: 'n', lit: lits[rng.IntN(len(lits))]}
	case k < 5:
		return &jsonNode{kind: '"', str: foldingNames[rng.IntN(len(foldingNames))]}
	case k < 7:
		n := &jsonNode{kind: '['}
		for range rng.IntN(4) {
			n.elems = append(n.elems, randomTree(rng, depth-1))
		}
		return n
	default:
		n := &jsonNode{kind: '{'}
		for range rng.IntN(6) {
			key := foldingNames[rng.IntN(len(foldingNames))]
			n.members = append(n.members, jsonMember{key: key, val: randomTree(rng, depth-1)})
		}
		return n
	}
}
