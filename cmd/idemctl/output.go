package main

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/idemkit/idem/internal/opsview"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// recordView is a record as -json prints it: times in RFC 3339, durations
// in seconds.
type recordView struct {
	Tenant         string          `json:"tenant"`
	Principal      string          `json:"principal"`
	Route          string          `json:"route"`
	Key            string          `json:"key"`
	Ref            string          `json:"ref"`
	State          string          `json:"state"`
	Stuck          bool            `json:"stuck"`
	Expired        bool            `json:"expired"`
	Mode           string          `json:"mode"`
	Attempt        int             `json:"attempt"`
	Status         int             `json:"status,omitempty"`
	LeaseLeftSecs  *float64        `json:"lease_left_seconds,omitempty"`
	AgeSecs        float64         `json:"age_seconds"`
	CreatedAt      time.Time       `json:"created_at"`
	ExpiresAt      time.Time       `json:"expires_at"`
	ReconcileAt    *time.Time      `json:"reconcile_at,omitempty"`
	Recovery       *recoveryView   `json:"recovery,omitempty"`
	FingerprintAlg string          `json:"fingerprint_alg"`
	Request        *requestView    `json:"request,omitempty"`
	Header         http.Header     `json:"header,omitempty"`
	Body           *string         `json:"body,omitempty"`
	BodyBase64     *string         `json:"body_base64,omitempty"`
	Withheld       []string        `json:"withheld,omitempty"`
	Resolution     *resolutionView `json:"resolution,omitempty"`
}

// resolutionView is who resolved an uncertain operation, when and why, as
// -json prints it.
type resolutionView struct {
	By      string    `json:"by"`
	At      time.Time `json:"at"`
	Reason  string    `json:"reason"`
	Applied bool      `json:"applied"`
}

func recordJSON(r server.Record) recordView {
	v := recordView{Tenant: r.Tenant, Principal: r.Principal, Route: r.Route, Key: r.Key, State: r.State,
		Stuck: r.Stuck(), Expired: r.Expired(), Mode: modeName(r.Mode), Attempt: r.Attempt, Status: r.Status,
		AgeSecs: r.Age().Seconds(), CreatedAt: r.CreatedAt, ExpiresAt: r.ExpiresAt, Recovery: recoveryJSON(r.Recovery),
		FingerprintAlg: r.FingerprintAlg, Request: requestJSON(r.Request), Header: r.Header, Withheld: r.Withheld}
	v.Ref = server.OperationRef(r.Tenant, r.Principal, r.Route, r.Key)
	if res := r.Resolved; res != nil {
		v.Resolution = &resolutionView{By: res.By, At: res.At, Reason: res.Reason, Applied: res.Applied}
	}
	if !r.LeaseEnds.IsZero() {
		left := r.LeaseLeft().Seconds()
		v.LeaseLeftSecs = &left
	}
	if !r.ReconcileAt.IsZero() {
		v.ReconcileAt = &r.ReconcileAt
	}
	if r.Header != nil {
		v.Body, v.BodyBase64 = opsview.JSONBody(r.Body)
	}
	return v
}

func modeName(m server.Mode) string {
	if m == server.Leased {
		return "leased"
	}
	return "transactional"
}

// printJSON prints v as indented JSON. JSON escapes the control
// characters of ASCII but not the others (C1 controls, bidirectional
// overrides): jsonSafe escapes those too, so that no stored string drives
// the terminal.
func (t *tool) printJSON(v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	_, err = t.e.stdout.Write(append(jsonSafe(b), '\n'))
	return err
}

// jsonSafe escapes as \uXXXX every character of JSON text b beyond ASCII
// that is not printable ([strconv.IsPrint]); such characters can only be
// in strings, where the escape means the same character.
func jsonSafe(b []byte) []byte {
	out := make([]byte, 0, len(b))
	for i := 0; i < len(b); {
		r, size := utf8.DecodeRune(b[i:])
		if r < utf8.RuneSelf || strconv.IsPrint(r) || (r == utf8.RuneError && size == 1) {
			out = append(out, b[i:i+size]...)
		} else if r1, r2 := utf16.EncodeRune(r); r1 != utf8.RuneError {
			out = fmt.Appendf(out, `\u%04x\u%04x`, r1, r2)
		} else {
			out = fmt.Appendf(out, `\u%04x`, r)
		}
		i += size
	}
	return out
}

// fields prints name/value lines, the values escaped ([opsview.Text]).
func (t *tool) fields(pairs ...string) {
	w := tabwriter.NewWriter(t.e.stdout, 0, 4, 2, ' ', 0)
	for i := 0; i+1 < len(pairs); i += 2 {
		fmt.Fprintf(w, "%s\t%s\n", pairs[i], opsview.Text(pairs[i+1]))
	}
	_ = w.Flush()
}

func (t *tool) printRecord(r server.Record) error {
	if t.g.json {
		return t.printJSON(recordJSON(r))
	}
	state := r.State
	if r.Stuck() {
		state += " (stuck: lease ended, not yet settled)"
	}
	if r.Expired() {
		state += " (expired: a retry runs the handler again)"
	}
	if r.State == "uncertain" {
		state += " (retries get 409 outcome-uncertain until an operator resolves it: idemctl resolve)"
	}
	if v := r.Resolved; v != nil {
		state += fmt.Sprintf(" (resolved by %s at %s: %s)", v.By, opsview.Time(v.At), v.Reason)
	}
	lease, recovery, status := "-", "none", "none stored"
	if !r.LeaseEnds.IsZero() {
		lease = opsview.Duration(r.LeaseLeft()) + " left"
		if r.LeaseLeft() <= 0 {
			lease = "ended " + opsview.Duration(-r.LeaseLeft()) + " ago"
		}
	}
	if r.Recovery != nil {
		recovery = r.Recovery.Point + " " + string(r.Recovery.Data)
	}
	if r.Status != 0 {
		status = fmt.Sprint(r.Status)
	}
	t.fields("tenant", r.Tenant, "principal", r.Principal, "route", r.Route, "key", r.Key,
		"reference", server.OperationRef(r.Tenant, r.Principal, r.Route, r.Key), "state", state, "mode", modeName(r.Mode), "attempt", fmt.Sprint(r.Attempt), "status", status,
		"lease", lease, "recovery point", recovery,
		"created", opsview.Time(r.CreatedAt)+" ("+opsview.Duration(r.Age())+" ago)", "expires", opsview.Time(r.ExpiresAt),
		"fingerprint", r.FingerprintAlg)
	if req := r.Request; req != nil {
		fmt.Fprintf(t.e.stdout, "\nstored request: %s %s\n", opsview.Text(req.Method), opsview.Text(req.URI))
		t.printHeader(req.Header)
		fmt.Fprintln(t.e.stdout, opsview.Body(req.Body))
	}
	if r.Header != nil {
		fmt.Fprintln(t.e.stdout, "\nstored response:")
		t.printHeader(r.Header)
		fmt.Fprintln(t.e.stdout, opsview.Body(r.Body))
	}
	if len(r.Withheld) > 0 {
		fmt.Fprintf(t.e.stdout, "withheld (never shown): %s\n", strings.Join(r.Withheld, ", "))
	}
	return nil
}

func (t *tool) printHeader(h http.Header) {
	for _, name := range slices.Sorted(maps.Keys(h)) {
		for _, v := range h[name] {
			fmt.Fprintf(t.e.stdout, "  %s: %s\n", opsview.Text(name), opsview.Text(v))
		}
	}
}

func (t *tool) printInFlight(page server.InFlightPage) error {
	if t.g.json {
		views := make([]recordView, 0, len(page.Records))
		for _, r := range page.Records {
			views = append(views, recordJSON(r))
		}
		out := map[string]any{"records": views}
		if page.More {
			out["next"] = page.Next.String()
		}
		return t.printJSON(out)
	}
	w := tabwriter.NewWriter(t.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "CREATED\tAGE\tTENANT\tPRINCIPAL\tROUTE\tKEY\tATTEMPT\tLEASE\tRECOVERY")
	for _, r := range page.Records {
		lease := opsview.Duration(r.LeaseLeft()) + " left"
		switch {
		case r.State == "uncertain":
			lease = "UNCERTAIN: idemctl resolve"
		case r.Stuck():
			lease = "STUCK " + opsview.Duration(-r.LeaseLeft()) + " ago"
		case r.LeaseEnds.IsZero():
			lease = "transaction"
		}
		point := "-"
		if r.Recovery != nil {
			point = r.Recovery.Point
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", opsview.Time(r.CreatedAt), opsview.Duration(r.Age()),
			opsview.Text(r.Tenant), opsview.Text(r.Principal), opsview.Text(r.Route), opsview.Text(r.Key), r.Attempt, lease,
			opsview.Text(point))
	}
	_ = w.Flush()
	if page.More {
		fmt.Fprintf(t.e.stdout, "more: idemctl inflight -after %s\n", page.Next.String())
	}
	return nil
}

// parkedView is a parked message without the credentials of its headers
// and its last response's (opsview.Header), whose names Withheld lists.
type parkedView struct {
	outbox.ParkedMessage
	Withheld []string
}

// shownParked is p with only the headers an operator may see.
func shownParked(p outbox.ParkedMessage) parkedView {
	var sent, got []string
	p.Message.Header, sent = opsview.Header(p.Message.Header)
	p.Header, got = opsview.Header(p.Header)
	withheld := append(sent, got...)
	slices.Sort(withheld)
	return parkedView{ParkedMessage: p, Withheld: slices.Compact(withheld)}
}

func (t *tool) printParked(msgs []outbox.ParkedMessage, limit int) error {
	if t.g.json {
		views := make([]messageView, 0, len(msgs))
		for _, p := range msgs {
			views = append(views, messageJSON(p))
		}
		return t.printJSON(map[string]any{"parked": views})
	}
	w := tabwriter.NewWriter(t.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "ID\tNAME\tURL\tREASON\tSTATUS\tATTEMPTS\tPARKED\tREDRIVE BY")
	for _, p := range msgs {
		by := "any time"
		if !p.RedriveBy.IsZero() {
			by = opsview.Time(p.RedriveBy)
		}
		fmt.Fprintf(w, "%d\t%s\t%s %s\t%s\t%d\t%d\t%s\t%s\n", p.ID, opsview.Text(p.Message.Name), opsview.Text(p.Message.Method),
			opsview.Text(p.Message.URL), p.Reason, p.Status, p.Attempts, opsview.Time(p.ParkedAt), by)
	}
	_ = w.Flush()
	if len(msgs) == limit {
		fmt.Fprintf(t.e.stdout, "more: idemctl parked -after %d\n", msgs[len(msgs)-1].ID)
	}
	return nil
}

func (t *tool) printMessage(st outbox.MessageStatus) error {
	if t.g.json {
		return t.printJSON(map[string]any{"message": statusJSON(st)})
	}
	view := shownParked(st.ParkedMessage)
	st.ParkedMessage = view.ParkedMessage
	withheld := view.Withheld
	state := string(st.State)
	if st.Reason != "" {
		state += " (" + string(st.Reason) + ")"
	}
	by := opsview.RedriveNote(st.RedriveBy, st.Attempts, st.Status)
	t.fields("id", fmt.Sprint(st.ID), "state", state, "name", st.Message.Name,
		"request", st.Message.Method+" "+st.Message.URL, "key", st.Message.Key, "attempts", fmt.Sprint(st.Attempts),
		"enqueued", opsview.Time(st.EnqueuedAt), "next delivery", opsview.Time(st.NextAttempt),
		"delivered", opsview.Time(st.DeliveredAt), "parked", opsview.Time(st.ParkedAt),
		"first delivery that may have acted", opsview.Time(st.FirstAttempt), "redrive by", by,
		"last status", fmt.Sprint(st.Status), "last error", st.Err)
	if st.Status != 0 {
		fmt.Fprintln(t.e.stdout, "\nlast response:")
		t.printHeader(st.Header)
		fmt.Fprintln(t.e.stdout, opsview.Body(st.Body))
	}
	if len(withheld) > 0 {
		fmt.Fprintf(t.e.stdout, "withheld (never shown): %s\n", strings.Join(withheld, ", "))
	}
	return nil
}

// stats is what the stats command prints.
type stats struct {
	Records server.RecordCounts
	Outbox  *outbox.Stats
	// NoOutbox is the database's word for the outbox table it lacks, when
	// Outbox is nil.
	NoOutbox string
}

func (t *tool) printStats(s stats) error {
	if t.g.json {
		return t.printJSON(statsJSON(s))
	}
	c := s.Records
	t.fields("records", opsview.Count(c.Records, string(countKind(c))),
		"in flight", fmt.Sprintf("%d (oldest %s)", c.Running, opsview.Duration(c.OldestRunning)),
		"stuck", fmt.Sprintf("%d (oldest %s)", c.Stuck, opsview.Duration(c.OldestStuck)))
	if o := s.Outbox; o != nil {
		t.fields("outbox pending", fmt.Sprintf("%d (oldest %s)", o.Pending, opsview.Duration(o.OldestPending)),
			"outbox parked", fmt.Sprint(o.Parked))
	} else {
		t.fields("outbox", "none ("+s.NoOutbox+")")
	}
	return nil
}

// printKeyRecords prints the records of a key in every scope that holds
// one (idemctl key without -route).
func (t *tool) printKeyRecords(key string, recs []server.Record) error {
	if t.g.json {
		views := make([]recordView, 0, len(recs))
		for _, r := range recs {
			views = append(views, recordJSON(r))
		}
		return t.printJSON(map[string]any{"records": views})
	}
	fmt.Fprintf(t.e.stdout, "key %s: %d record(s); idemctl key -tenant T -principal P -route R %s shows one\n",
		opsview.Text(key), len(recs), opsview.Text(key))
	w := tabwriter.NewWriter(t.e.stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "TENANT\tPRINCIPAL\tROUTE\tSTATE\tSTATUS\tATTEMPT\tCREATED")
	for _, r := range recs {
		state := r.State
		if r.Stuck() {
			state += " (stuck)"
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\t%d\t%s\n", opsview.Text(r.Tenant), opsview.Text(r.Principal),
			opsview.Text(r.Route), state, r.Status, r.Attempt, opsview.Time(r.CreatedAt))
	}
	return w.Flush()
}

// printNoOutbox says that a service without an outbox has no parked
// message: no failure. missing is the database's word for the table.
func (t *tool) printNoOutbox(missing string) error {
	if t.g.json {
		return t.printJSON(map[string]any{"parked": []messageView{}, "no_outbox": missing})
	}
	fmt.Fprintf(t.e.stdout, "no outbox here, so no parked message (%s; outbox.Migrate creates its tables; see -outbox-schema)\n", opsview.Text(missing))
	return nil
}
