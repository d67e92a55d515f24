package server

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"net/http"
	"slices"
)

// headerFormat is the first byte of a stored header block (the headers
// column): then, for each name in sorted order, the name, the number of
// its values and each value, every string prefixed by its length as a
// uvarint. Bytes rather than jsonb: a field value may hold bytes that are
// not UTF-8 (obs-text), which JSON cannot carry, and the replay must give
// back every value as the handler set it.
const headerFormat = 1

// legacyHeaderFormat is the first byte of the headers of a record stored
// by a version that kept them as jsonb (converted to bytes by [Migrate]): a
// JSON object of arrays of strings.
const legacyHeaderFormat = '{'

// errStoredHeader is returned for a header block this version cannot read.
var errStoredHeader = errors.New("server: stored headers are corrupt or of an unknown format")

// encodeHeader gives the stored form of h.
func encodeHeader(h http.Header) []byte {
	return appendHeader(make([]byte, 0, headerLen(h)), h)
}

// headerLen is the length of h's stored form.
func headerLen(h http.Header) int {
	n := 1
	for name, values := range h {
		n += stringLen(name) + uvarintLen(uint64(len(values)))
		for _, v := range values {
			n += stringLen(v)
		}
	}
	return n
}

// appendHeader appends h's stored form to b.
func appendHeader(b []byte, h http.Header) []byte {
	b = append(b, headerFormat)
	var buf [16]string // most responses' names fit: no allocation
	names := buf[:0]
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		b = appendString(b, name)
		b = binary.AppendUvarint(b, uint64(len(h[name])))
		for _, v := range h[name] {
			b = appendString(b, v)
		}
	}
	return b
}

// stringLen is the length of s as appendString stores it.
func stringLen(s string) int { return uvarintLen(uint64(len(s))) + len(s) }

// uvarintLen is the length of v as a uvarint.
func uvarintLen(v uint64) int {
	n := 1
	for ; v >= 0x80; v >>= 7 {
		n++
	}
	return n
}

func appendString(b []byte, s string) []byte {
	return append(binary.AppendUvarint(b, uint64(len(s))), s...)
}

// decodeHeader reads a block that encodeHeader made; nil or empty is no
// header.
func decodeHeader(b []byte) (http.Header, error) {
	h := http.Header{}
	if len(b) == 0 {
		return h, nil
	}
	if b[0] == legacyHeaderFormat {
		if err := json.Unmarshal(b, &h); err != nil {
			return nil, errStoredHeader
		}
		return h, nil
	}
	return decodeHeaderBlock(b)
}

// decodeHeaderBlock reads a block that encodeHeader made, and nothing
// else: the header part of a stored [Response].
func decodeHeaderBlock(b []byte) (http.Header, error) {
	h := http.Header{}
	if len(b) == 0 || b[0] != headerFormat {
		return nil, errStoredHeader
	}
	d := headerDecoder{b: b[1:], ok: true}
	for len(d.b) > 0 && d.ok {
		name := d.string()
		n := d.uvarint()
		if n > uint64(len(d.b)) { // each value takes at least a byte
			return nil, errStoredHeader
		}
		values := make([]string, n)
		for i := range values {
			values[i] = d.string()
		}
		h[name] = values
	}
	if !d.ok {
		return nil, errStoredHeader
	}
	return h, nil
}

// headerDecoder reads a header block; ok turns false at the first error.
type headerDecoder struct {
	b  []byte
	ok bool
}

func (d *headerDecoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.ok, d.b = false, nil
		return 0
	}
	d.b = d.b[n:]
	return v
}

func (d *headerDecoder) string() string {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.ok, d.b = false, nil
		return ""
	}
	s := string(d.b[:n])
	d.b = d.b[n:]
	return s
}

// bytes reads a length-prefixed field without copying it.
func (d *headerDecoder) bytes() []byte {
	n := d.uvarint()
	if n > uint64(len(d.b)) {
		d.ok, d.b = false, nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
