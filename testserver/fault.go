package testserver

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// FaultKind names what a [Fault] does. The string is the name used in rules
// files, fault flags, the fault header and the event log.
type FaultKind string

// The faults, in three groups: before the handler, after it, and races. The
// empty kind, FaultNone, lets the request through. Each kind has one row in
// the table of kinds.go, which says when it acts and what it does.
const (
	// FaultNone passes the request to the handler and its response back.
	FaultNone FaultKind = ""

	// Before the handler runs: the operation certainly did not happen.

	// FaultStatus answers [Fault.Status] (default 503) with an optional
	// Retry-After, without running the handler.
	FaultStatus FaultKind = "status"
	// FaultReset resets the connection (TCP RST) before the request body is
	// read or the handler runs.
	FaultReset FaultKind = "reset"
	// FaultClose closes the connection (TCP FIN) before the request body is
	// read or the handler runs.
	FaultClose FaultKind = "close"
	// FaultBlackhole never answers: the connection stays open, and what
	// the client sends is read and discarded, until the client gives up
	// or the server closes. The handler never runs.
	FaultBlackhole FaultKind = "blackhole"
	// FaultDelay waits [Fault.Delay] before running the handler. When the
	// client gives up during the wait, the handler does not run.
	FaultDelay FaultKind = "delay"
	// FaultSlowRead reads the request body [Fault.Bytes] at a time with
	// [Fault.Delay] between reads, then runs the handler. When the client
	// gives up during the read, the handler does not run.
	FaultSlowRead FaultKind = "slow-read"

	// After the handler ran: the client cannot tell whether it did.

	// FaultDropReset runs the handler, discards its response and resets
	// the connection (TCP RST).
	FaultDropReset FaultKind = "drop-reset"
	// FaultDropClose runs the handler, discards its response and closes
	// the connection (TCP FIN).
	FaultDropClose FaultKind = "drop-close"
	// FaultDropHang runs the handler, discards its response and keeps the
	// connection open, silent, until the client gives up or the server
	// closes.
	FaultDropHang FaultKind = "drop-hang"
	// FaultDelayResponse runs the handler and sends its response
	// [Fault.Delay] later (set it past the client's timeout).
	FaultDelayResponse FaultKind = "delay-response"
	// FaultPartialBody runs the handler, sends its status and headers with
	// the full Content-Length and then only [Fault.Bytes] bytes of the body
	// (default half; never the whole body) before closing the connection.
	FaultPartialBody FaultKind = "partial-body"
	// FaultSlowBody runs the handler and sends its body [Fault.Bytes] at a
	// time with [Fault.Delay] between writes.
	FaultSlowBody FaultKind = "slow-body"
	// FaultStatusAfter runs the handler, discards its committed response
	// and answers [Fault.Status] (default 503) with an optional Retry-After
	// instead.
	FaultStatusAfter FaultKind = "status-after"

	// Races.

	// FaultHold keeps the request back, before the handler, until a later
	// attempt of the same operation arrives (at most [Config.HoldTimeout]),
	// then lets both run concurrently, in a set order: by default the held
	// attempt enters the handler first (the realistic case: the first
	// attempt was slow, its client gave up and retried while it still
	// ran), and the retry enters [Fault.Delay] after it (zero: as soon as
	// the held handler has been called); with [Fault.RetryFirst] the other
	// way round. Give Delay a few milliseconds when the first must have
	// reached a shared resource (a row lock) before the second starts. The
	// held attempt's handler runs with a context that the client's
	// disconnect does not cancel (its client gave up: that is why it
	// retried) but Close does, so the server's concurrent-duplicate path
	// really runs.
	FaultHold FaultKind = "hold"
)

// Kinds returns every fault kind except [FaultNone], in documentation
// order.
func Kinds() []FaultKind {
	out := make([]FaultKind, len(kindTable))
	for i, row := range kindTable {
		out[i] = row.kind
	}
	return out
}

// AfterHandler reports whether k lets the handler run and then spoils the
// response, so that the client cannot know whether the operation happened.
func (k FaultKind) AfterHandler() bool {
	row, _ := rowOf(k)
	return row.after != nil
}

// valid reports whether k is [FaultNone] or one of the listed kinds.
func (k FaultKind) valid() bool {
	_, ok := rowOf(k)
	return ok || k == FaultNone
}

// Fault is what happens to one request. Fields that do not apply to Kind
// are ignored; zero values mean the defaults given per field.
type Fault struct {
	// Kind is what the fault does. [FaultNone] passes the request.
	Kind FaultKind
	// Status is the status of [FaultStatus] and [FaultStatusAfter]. Zero
	// means 503. It must be 400-599.
	Status int
	// RetryAfter, when positive, adds a Retry-After header to [FaultStatus]
	// and [FaultStatusAfter]: delta-seconds, rounded up, at least 1.
	RetryAfter time.Duration
	// RetryAfterDate sends RetryAfter as an HTTP-date (now + RetryAfter)
	// instead of delta-seconds.
	RetryAfterDate bool
	// Delay is the wait of [FaultDelay] and [FaultDelayResponse], the pause
	// before each chunk of [FaultSlowRead] and [FaultSlowBody], and the head
	// start of the first of [FaultHold]'s two requests. Zero means no wait.
	Delay time.Duration
	// Bytes is the chunk size of [FaultSlowRead] and [FaultSlowBody] (zero
	// means 1) and the number of body bytes [FaultPartialBody] sends before
	// the cut (zero means half the body, rounded down; as many as the body
	// has or more means all but the last byte, so the body is always cut;
	// on an empty body the cut comes inside the status line).
	Bytes int
	// RetryFirst makes [FaultHold] let the retry into the handler first and
	// the held attempt right after it.
	RetryFirst bool
}

// ErrBadFault is wrapped by the errors that report an invalid [Fault] or
// fault header value.
var ErrBadFault = errors.New("testserver: invalid fault")

// Validate reports an error wrapping [ErrBadFault] when f cannot be applied.
func (f Fault) Validate() error {
	switch {
	case !f.Kind.valid():
		return fmt.Errorf("%w: unknown kind %q (known: %s)", ErrBadFault, f.Kind, KindList())
	case f.Status != 0 && (f.Status < 400 || f.Status > 599):
		return fmt.Errorf("%w: %s: status %d is not 400-599", ErrBadFault, f.Kind, f.Status)
	case f.RetryAfter < 0 || f.Delay < 0:
		return fmt.Errorf("%w: %s: negative duration", ErrBadFault, f.Kind)
	case f.Bytes < 0:
		return fmt.Errorf("%w: %s: negative byte count %d", ErrBadFault, f.Kind, f.Bytes)
	}
	return nil
}

// KindList returns the names of [Kinds], comma-separated, for messages and
// usage texts.
func KindList() string {
	names := make([]string, len(kindTable))
	for i, row := range kindTable {
		names[i] = string(row.kind)
	}
	return strings.Join(names, ", ")
}

// status returns the status to send for [FaultStatus] and [FaultStatusAfter].
func (f Fault) status() int {
	if f.Status == 0 {
		return http.StatusServiceUnavailable
	}
	return f.Status
}

// chunk returns the chunk size of the slow faults.
func (f Fault) chunk() int {
	if f.Bytes <= 0 {
		return 1
	}
	return f.Bytes
}

// String renders f in the fault header syntax, for example
// "status;status=503;retry-after=1s".
func (f Fault) String() string {
	if f.Kind == FaultNone {
		return "none"
	}
	var b strings.Builder
	b.WriteString(string(f.Kind))
	if f.Status != 0 {
		fmt.Fprintf(&b, ";status=%d", f.Status)
	}
	if f.RetryAfter != 0 {
		fmt.Fprintf(&b, ";retry-after=%s", f.RetryAfter)
	}
	if f.RetryAfterDate {
		b.WriteString(";date")
	}
	if f.Delay != 0 {
		fmt.Fprintf(&b, ";delay=%s", f.Delay)
	}
	if f.Bytes != 0 {
		fmt.Fprintf(&b, ";bytes=%d", f.Bytes)
	}
	if f.RetryFirst {
		b.WriteString(";retry-first")
	}
	return b.String()
}

// MarshalText renders f as String does.
func (f Fault) MarshalText() ([]byte, error) {
	return []byte(f.String()), nil
}

// UnmarshalText parses text as [ParseFault] does.
func (f *Fault) UnmarshalText(text []byte) error {
	parsed, err := ParseFault(string(text))
	if err != nil {
		return err
	}
	*f = parsed
	return nil
}

// ParseFault parses the fault header syntax that [Fault.String] writes: a
// kind, then optional ";name=value" parameters status, retry-after,
// delay (Go durations, or whole seconds for retry-after), bytes, and the
// flags date and retry-first, which take no value ("date=false" is an
// error, not a way to turn the flag off). "none" and "" parse as
// [FaultNone].
func ParseFault(s string) (Fault, error) {
	parts := strings.Split(s, ";")
	f := Fault{Kind: FaultKind(strings.TrimSpace(parts[0]))}
	if f.Kind == "none" {
		f.Kind = FaultNone
	}
	for _, p := range parts[1:] {
		name, value, hasValue := strings.Cut(strings.TrimSpace(p), "=")
		if err := f.setParam(strings.TrimSpace(name), strings.TrimSpace(value), hasValue); err != nil {
			return Fault{}, fmt.Errorf("%w: %q: %v", ErrBadFault, s, err)
		}
	}
	if err := f.Validate(); err != nil {
		return Fault{}, err
	}
	return f, nil
}

// setParam sets the parameter name; hasValue says whether it came with
// "=value".
func (f *Fault) setParam(name, value string, hasValue bool) error {
	var err error
	switch name {
	case "status":
		f.Status, err = strconv.Atoi(value)
	case "retry-after":
		f.RetryAfter, err = parseSeconds(value)
	case "delay":
		f.Delay, err = time.ParseDuration(value)
	case "bytes":
		f.Bytes, err = strconv.Atoi(value)
	case "date":
		f.RetryAfterDate, err = true, noValue(hasValue)
	case "retry-first":
		f.RetryFirst, err = true, noValue(hasValue)
	default:
		return fmt.Errorf("unknown parameter %q", name)
	}
	if err != nil {
		return fmt.Errorf("parameter %s: %v", name, err)
	}
	return nil
}

// noValue is the check of a flag parameter, which takes no value.
func noValue(hasValue bool) error {
	if hasValue {
		return errors.New("a flag takes no value (leave it out to turn it off)")
	}
	return nil
}

// parseSeconds parses a Go duration, or a bare number of seconds.
func parseSeconds(s string) (time.Duration, error) {
	if n, err := strconv.Atoi(s); err == nil {
		return time.Duration(n) * time.Second, nil
	}
	return time.ParseDuration(s)
}
