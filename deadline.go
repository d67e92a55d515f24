package idem

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/idemkit/idem/internal/wire"
)

// deadlineHeaderName returns the canonical form of
// [Config.DeadlineHeader], "" when it is empty. It panics on a name that is
// not a header field name.
func deadlineHeaderName(name string) string {
	if name == "" {
		return ""
	}
	if !wire.ValidHeaderName(name) {
		panic(fmt.Sprintf("idem: Config.DeadlineHeader %q is not a valid header field name", name))
	}
	return http.CanonicalHeaderKey(name)
}

// setDeadline writes into r's DeadlineHeader the time left to ctx's
// deadline at now, in whole milliseconds rounded down (0 once it passed);
// nothing when there is no header or no deadline.
func setDeadline(r *http.Request, ctx context.Context, name string, now time.Time) {
	if name == "" {
		return
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		return
	}
	left := max(deadline.Sub(now)/time.Millisecond, 0)
	r.Header[name] = []string{strconv.FormatInt(int64(left), 10)}
}
