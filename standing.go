package idem

import (
	"net/http"

	"github.com/idemkit/idem/internal/wire"
)

// setStanding copies into e where the operation stands as resp's headers
// say it (docs/CONTRACT.md §4): its state and reference, and, when the
// server says a new key is not safe, that the operation may have taken
// effect, so that no caller is led to re-send it under a new key. A nil
// resp, or one without the headers, changes nothing.
func (e *Error) setStanding(resp *http.Response) {
	if resp == nil {
		return
	}
	e.OperationState = resp.Header.Get(wire.HeaderOperationState)
	e.OperationRef = resp.Header.Get(wire.HeaderOperationRef)
	if resp.Header.Get(wire.HeaderSafeNewKey) == "false" {
		e.MayHaveTakenEffect = true
	}
}
