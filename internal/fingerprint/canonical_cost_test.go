package fingerprint

import (
	"bytes"
	"fmt"
	"runtime"
	"strings"
	"testing"
)

// maxNesting is the deepest nesting encoding/json (and so json.Valid, and
// canonicalJSON) accepts: deeper documents are not JSON to it.
const maxNesting = 10000

// costDocs are documents of about size bytes in the shapes whose cost
// tells a linear canonicaliser from a quadratic one (issue 22, D1): the
// deepest nesting json.Valid accepts around one long string, of objects
// and of arrays; a flat object; and many small objects that need sorting.
func costDocs(size int) map[string][]byte {
	return map[string][]byte{
		"deep objects": nested(size, `{"":`, "}"),
		"deep arrays":  nested(size, "[", "]"),
		"flat object":  flatObject(size),
		"many objects": manyObjects(size),
	}
}

// nested is one string nested maxNesting-1 deep (or as deep as size allows)
// in open and close, padded to size bytes.
func nested(size int, open, close string) []byte {
	depth := min(maxNesting-1, size/(2*(len(open)+len(close))))
	pad := size - depth*(len(open)+len(close)) - 2
	return []byte(strings.Repeat(open, depth) + `"` + strings.Repeat("x", pad) + `"` + strings.Repeat(close, depth))
}

func flatObject(size int) []byte {
	var b bytes.Buffer
	b.WriteByte('{')
	for i := 0; b.Len() < size-32; i++ {
		fmt.Fprintf(&b, `"k%07d":"value %d",`, (i*7919)%1000003, i) // keys out of order
	}
	b.WriteString(`"z":0}`)
	return b.Bytes()
}

func manyObjects(size int) []byte {
	var b bytes.Buffer
	b.WriteByte('[')
	for b.Len() < size-64 {
		b.WriteString(`{"b":[1,{"d":2,"c":3}],"a":{"f":"x","e":null}},`)
	}
	b.WriteString("{}]")
	return b.Bytes()
}

// allocatedBytes is the least that one call of f allocated, in bytes, over
// two calls (the least: a goroutine of another test may allocate meanwhile).
func allocatedBytes(f func()) uint64 {
	least := ^uint64(0)
	var before, after runtime.MemStats
	for range 2 {
		runtime.ReadMemStats(&before)
		f()
		runtime.ReadMemStats(&after)
		least = min(least, after.TotalAlloc-before.TotalAlloc)
	}
	return least
}

// maxAllocPerByte bounds what canonicalising costs per input byte, in
// bytes allocated, for every shape and size: the flat canonical form and
// the output (a byte each per input byte), and per object and member a few
// words (the smallest object, {"":, takes 5 input bytes), in slices that
// double as they grow. The documents of the test take 2 to 25.
const maxAllocPerByte = 32

// TestCanonicalJSONCostIsLinear fails when canonicalisation is not linear
// in the input (issue 22, D1): the bytes it allocates per input byte stay
// under a constant for deep objects, deep arrays and flat documents of
// 64 KiB and 1 MiB, where the quadratic canonicaliser allocated some 5,300
// (64 KiB) and 9,800 (1 MiB) per byte of nested objects. It measures
// allocation, not time. canonicalJSONV2 runs the same code without the
// sha256-v3 check of names that fold together.
func TestCanonicalJSONCostIsLinear(t *testing.T) {
	for _, size := range []int{64 << 10, 1 << 20} {
		for name, doc := range costDocs(size) {
			t.Run(fmt.Sprintf("%s %d KiB", name, size>>10), func(t *testing.T) {
				var ok bool
				n := allocatedBytes(func() { _, ok = canonicalJSON(doc) })
				if !ok {
					t.Fatal("the document is not JSON")
				}
				perByte := float64(n) / float64(len(doc))
				t.Logf("%d bytes: %d allocated, %.1f per input byte", len(doc), n, perByte)
				if perByte > maxAllocPerByte {
					t.Errorf("canonicalising %d bytes allocated %d bytes, %.1f per input byte, want <= %d",
						len(doc), n, perByte, maxAllocPerByte)
				}
			})
		}
	}
}

// BenchmarkCanonicalJSON measures the canonicaliser on the cost test's
// documents:
//
//	go test -run '^$' -bench 'BenchmarkCanonicalJSON$' -benchmem ./internal/fingerprint/
func BenchmarkCanonicalJSON(b *testing.B) { benchmarkCanonical(b, canonicalJSON) }

// BenchmarkCanonicalJSONReference measures the quadratic reference
// canonicaliser (canonical_ref_test.go) on the same documents, for
// comparison; its deep objects take seconds per document:
//
//	go test -run '^$' -bench 'BenchmarkCanonicalJSONReference' -benchmem ./internal/fingerprint/
func BenchmarkCanonicalJSONReference(b *testing.B) { benchmarkCanonical(b, refCanonicalJSON) }

func benchmarkCanonical(b *testing.B, canonical func([]byte) ([]byte, bool)) {
	for _, size := range []int{64 << 10, 1 << 20} {
		for _, name := range []string{"deep objects", "deep arrays", "flat object", "many objects"} {
			doc := costDocs(size)[name]
			b.Run(fmt.Sprintf("%s/%dKiB", strings.ReplaceAll(name, " ", "_"), size>>10), func(b *testing.B) {
				b.SetBytes(int64(len(doc)))
				b.ReportAllocs()
				for b.Loop() {
					_, _ = canonical(doc)
				}
			})
		}
	}
}
