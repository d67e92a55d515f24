package conformance

import (
	"fmt"
	"net/http"
	"slices"
	"strings"
)

// hiddenHeaders are response headers an exchange does not keep: a
// session's cookie, and fields of the connection rather than the response.
var hiddenHeaders = []string{"Set-Cookie", "Date", "Connection", "Keep-Alive", "Transfer-Encoding"}

// shownHeader is h less hiddenHeaders, nil when nothing is left.
func shownHeader(h http.Header) http.Header {
	out := h.Clone()
	for _, name := range hiddenHeaders {
		out.Del(name)
	}
	if len(out) == 0 {
		return nil
	}
	return out
}

// headerText renders h on one line, fields sorted by name:
// "Content-Type: application/json, X-Replay: true"; "none" when empty.
func headerText(h http.Header) string {
	names := make([]string, 0, len(h))
	for name := range h {
		names = append(names, name)
	}
	slices.Sort(names)
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = name + ": " + strings.Join(h[name], ", ")
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// unmarkedAdvice says, for a repeat that lacks Config.ReplayedHeader, what
// headers it had and which flag to set: -replayed-header with a field
// whose name speaks of a replay, or ” when the API has none.
func (r *runner) unmarkedAdvice(x exchange) string {
	var candidates []string
	for name := range x.header {
		if strings.Contains(strings.ToLower(name), "replay") {
			candidates = append(candidates, name)
		}
	}
	slices.Sort(candidates)
	advice := "if the API marks no replay, run with -replayed-header ''"
	if len(candidates) > 0 {
		advice = fmt.Sprintf("if the API marks replays with %s, run with -replayed-header %s", candidates[0], candidates[0])
	}
	return fmt.Sprintf("the repeat's headers: %s; %s", headerText(x.header), advice)
}
