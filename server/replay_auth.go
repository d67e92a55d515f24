package server

import (
	"net/http"
	"time"
)

// replayAuthorized replays res to a retry whose caller [Config.AuthorizeReplay]
// lets have it, and answers 403 replay-forbidden to any other.
func (h *handler) replayAuthorized(w http.ResponseWriter, r *http.Request, ex Exchange, ev Event, res ClaimResult) {
	if auth := h.s.AuthorizeReplay; auth != nil {
		op := Operation{Tenant: ev.Tenant, Principal: ev.Principal, Route: ev.Route, Key: ev.Key}
		if err := auth(r, op); err != nil {
			ev.Err = err // refuse logs it
			h.refuse(w, r, ex, ev, replayForbidden())
			return
		}
	}
	h.replay(w, r, ex, ev, res.Response, res.Expires)
}

// expiresOf is when the record of a claimed key expires: what the store
// said, else the claim's start plus the retention, which the store's own
// clock reached no earlier (up to the skew between the two clocks).
func expiresOf(res ClaimResult, start time.Time, c *Claim) time.Time {
	if !res.Expires.IsZero() {
		return res.Expires
	}
	return start.Add(c.Retention)
}
