package server

import (
	"encoding/binary"
	"errors"
	"net/http"
)

// Response is a handler's response as a store keeps and replays it. Every
// store keeps it in one stored form, the bytes of [Response.MarshalBinary],
// and gives it back with [Response.UnmarshalBinary]: a new field of the
// stored response changes this file, and storetest checks that every store
// gives it back.
type Response struct {
	// Unavailable marks an operation whose effects happened but whose
	// response was not stored (it streamed, or outgrew
	// [Config.MaxResponseBytes], or a reconciler parked it): a later claim
	// gets [VerdictUnavailable]. Header and Body are then empty, and Status
	// is the one the handler chose (0 for a parked operation).
	Unavailable bool
	Status      int
	// Header holds the response headers the route replays, byte for byte
	// (a value may hold bytes that are not UTF-8). A replay hands its
	// slices to a ResponseWriter: a store must give each claim a header of
	// its own, as UnmarshalBinary does.
	Header http.Header
	Body   []byte
}

// responseFormat is the version byte that starts the stored form of a
// [Response]. Version 1 was the header block alone (headerFormat), which
// PostgresStore kept beside status and body columns: the first byte tells
// the two apart.
const responseFormat = 2

// responseUnavailable is the flag of [Response.Unavailable]; the flags
// byte has no other.
const responseUnavailable = 1

// maxStatus is the largest status a stored response may hold: three digits.
const maxStatus = 999

// errStoredResponse is returned for a stored response this version cannot
// read.
var errStoredResponse = errors.New("server: stored response is corrupt or of an unknown format")

// MarshalBinary returns r's stored form, the form in which every store
// keeps a response (docs/CONTRACT.md §4): the version byte 2, a flags byte
// (1: Unavailable), Status as a uvarint, then the header block and the
// body, each prefixed by its length as a uvarint. The header block is a
// format byte 1, then for each name in sorted order the name, the number of
// its values and each value, every string prefixed by its length as a
// uvarint. The form is deterministic: equal responses give equal bytes. It
// never fails; the error is that of [encoding.BinaryMarshaler].
func (r *Response) MarshalBinary() ([]byte, error) {
	hlen := headerLen(r.Header)
	size := 2 + uvarintLen(uint64(r.Status)) + uvarintLen(uint64(hlen)) + hlen + uvarintLen(uint64(len(r.Body))) + len(r.Body)
	b := make([]byte, 0, size)
	flags := byte(0)
	if r.Unavailable {
		flags = responseUnavailable
	}
	b = append(b, responseFormat, flags)
	b = binary.AppendUvarint(b, uint64(r.Status))
	b = binary.AppendUvarint(b, uint64(hlen))
	b = appendHeader(b, r.Header)
	b = binary.AppendUvarint(b, uint64(len(r.Body)))
	return append(b, r.Body...), nil
}

// UnmarshalBinary sets r to the response that [Response.MarshalBinary]
// stored as b. It copies what it keeps of b; Header is never nil, and Body
// is nil when empty. It must refuse, with an error and leaving r
// unchanged, a form this version cannot read whole: an unknown version or
// flag, a status over 999, a length past the end of b, a header block of
// another format, and bytes after the body. A store that meets such an
// error must not replay anything in its place.
func (r *Response) UnmarshalBinary(b []byte) error {
	if len(b) < 2 || b[0] != responseFormat || b[1]&^responseUnavailable != 0 {
		return errStoredResponse
	}
	d := headerDecoder{b: b[2:], ok: true}
	status := d.uvarint()
	block := d.bytes()
	body := d.bytes()
	if !d.ok || len(d.b) != 0 || status > maxStatus {
		return errStoredResponse
	}
	h, err := decodeHeaderBlock(block)
	if err != nil {
		return errStoredResponse
	}
	var own []byte
	if len(body) > 0 {
		own = append(own, body...)
	}
	*r = Response{Unavailable: b[1] == responseUnavailable, Status: int(status), Header: h, Body: own}
	return nil
}

// state is the record state r completes.
func (r *Response) state() recordState {
	if r.Unavailable {
		return stateUnavailable
	}
	return stateDone
}
