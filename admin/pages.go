package admin

import (
	"errors"
	"fmt"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/idemkit/idem/internal/opsview"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// funcs are the templates' functions.
var funcs = template.FuncMap{
	"dur":        opsview.Duration,
	"time":       opsview.Time,
	"text":       opsview.Text,
	"body":       func(b []byte) string { return opsview.Body(b) },
	"msgHeader":  func(h http.Header) http.Header { shown, _ := opsview.Header(h); return shown },
	"withheld":   func(h http.Header) []string { _, names := opsview.Header(h); return names },
	"scope":      func(op server.Operation) template.URL { return template.URL(scopeQuery(op)) },
	"scopeField": scopeQuery,
	"ref": func(op server.Operation) string {
		return server.OperationRef(op.Tenant, op.Principal, op.Route, op.Key)
	},
	"ago":   func(d time.Duration) string { return opsview.Duration(-d) },
	"count": func(c server.RecordCounts) string { return opsview.Count(c.Records, string(c.RecordsAre)) },
	"redrive": func(st outbox.MessageStatus) string {
		return opsview.RedriveNote(st.RedriveBy, st.Attempts, st.Status)
	},
}

// scopeQuery is the query string that names op's record (escaped: the
// templates insert it as a template.URL, not to escape it twice). The
// evict form carries it as one field, "scope": a browser would change a
// tenant's line breaks in a form field of its own, and html/template a
// NUL, where the query's escapes keep every byte.
func scopeQuery(op server.Operation) string {
	return url.Values{"tenant": {op.Tenant}, "principal": {op.Principal}, "route": {op.Route}, "key": {op.Key}}.Encode()
}

// overviewData is the front page: the counts and the lookup form.
type overviewData struct {
	Counts      server.RecordCounts
	Outbox      *outbox.Stats
	CountsErr   string
	OutboxErr   string
	InFlightURL string
}

func (h *handler) overview(w http.ResponseWriter, r *http.Request) {
	var d overviewData
	var err error
	if d.Counts, err = h.cfg.Records.Counts(r.Context()); err != nil {
		d.CountsErr = err.Error()
	}
	if h.cfg.Outbox != nil {
		st, err := h.cfg.Outbox.Stats(r.Context())
		if err != nil {
			d.OutboxErr = err.Error()
		} else {
			d.Outbox = &st
		}
	}
	h.render(w, r, http.StatusOK, "overview.html", "idem", d)
}

// scopeOf reads the record's scope from a query or a form.
func scopeOf(v url.Values) server.Operation {
	return server.Operation{Tenant: v.Get("tenant"), Principal: v.Get("principal"), Route: v.Get("route"), Key: v.Get("key")}
}

// keyData is the page of one record.
type keyData struct {
	Op      server.Operation
	Record  server.Record
	Found   bool
	Payload bool
}

func (h *handler) key(w http.ResponseWriter, r *http.Request) {
	op := scopeOf(r.URL.Query())
	if op.Tenant == "" && op.Principal == "" && op.Route == "" {
		h.keyScopes(w, r, op.Key)
		return
	}
	payload := r.URL.Query().Get("payload") == "1"
	rec, err := h.lookup(r, op, payload)
	h.renderRecord(w, r, op, rec, err, payload, "")
}

// ref shows the record whose operation reference (an answer's
// Idempotency-Operation-Ref) the query names: an operator who holds only
// what a client or a log showed finds the record with it.
func (h *handler) ref(w http.ResponseWriter, r *http.Request) {
	ref := strings.TrimSpace(r.URL.Query().Get("ref"))
	payload := r.URL.Query().Get("payload") == "1"
	rec, err := h.cfg.Records.LookupRef(r.Context(), ref, payload)
	switch {
	case errors.Is(err, server.ErrBadScope):
		h.fail(w, r, http.StatusBadRequest, err.Error())
	case errors.Is(err, errors.ErrUnsupported):
		h.fail(w, r, http.StatusNotImplemented, err.Error())
	case errors.Is(err, server.ErrUnknownKey):
		h.fail(w, r, http.StatusNotFound, "No record has operation reference "+ref+
			": it was never made, or was swept after its retention, or evicted.")
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
	default:
		h.renderRecord(w, r, rec.Operation, rec, nil, payload, "")
	}
}

// lookup is the Operator's Lookup, after refusing a route typed without
// its method: no record has one, and "no record" would mislead.
func (h *handler) lookup(r *http.Request, op server.Operation, payload bool) (server.Record, error) {
	if err := checkRoute(op); err != nil {
		return server.Record{}, err
	}
	return h.cfg.Records.Lookup(r.Context(), op, payload)
}

// checkRoute refuses, as a bad scope, a route typed without its method.
func checkRoute(op server.Operation) error {
	if msg := opsview.RouteProblem(op.Route); msg != "" {
		return fmt.Errorf("%w: %s", server.ErrBadScope, msg)
	}
	return nil
}

// keysData is the page of a key's records in every scope.
type keysData struct {
	Key     string
	Records []server.Record
}

// keyScopes lists the records of key in every scope that holds one: an
// operator who knows the key alone learns where it was used.
func (h *handler) keyScopes(w http.ResponseWriter, r *http.Request, key string) {
	recs, err := h.cfg.Records.LookupKey(r.Context(), key)
	switch {
	case errors.Is(err, server.ErrBadScope):
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	status := http.StatusOK
	if len(recs) == 0 {
		status = http.StatusNotFound
	}
	h.render(w, r, status, "keys.html", "Key "+key, keysData{Key: key, Records: recs})
}

// renderRecord renders the page of op's record, or why there is none.
func (h *handler) renderRecord(w http.ResponseWriter, r *http.Request, op server.Operation, rec server.Record, err error, payload bool, refusal string) {
	d := keyData{Op: op, Record: rec, Found: err == nil, Payload: payload}
	status := http.StatusOK
	switch {
	case errors.Is(err, server.ErrBadScope):
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	case errors.Is(err, server.ErrUnknownKey):
		status = http.StatusNotFound
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	if refusal != "" {
		status = http.StatusConflict
	}
	h.renderErr(w, r, status, "key.html", "Key "+op.Key, d, refusal)
}

// confirmEvict asks before an eviction, saying what it means.
func (h *handler) confirmEvict(w http.ResponseWriter, r *http.Request) {
	op := scopeOf(r.URL.Query())
	rec, err := h.lookup(r, op, false)
	if err != nil || !h.cfg.AllowWrites {
		h.renderRecord(w, r, op, rec, err, false, "")
		return
	}
	h.render(w, r, http.StatusOK, "evict.html", "Evict "+op.Key, keyData{Op: op, Record: rec, Found: true})
}

func (h *handler) evict(w http.ResponseWriter, r *http.Request) {
	scope, err := url.ParseQuery(r.PostForm.Get("scope"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "The form's scope field is not a query string: reload the record's page and try again.")
		return
	}
	op := scopeOf(scope)
	force := r.PostForm.Get("force") == "1"
	if err := checkRoute(op); err != nil {
		h.renderRecord(w, r, op, server.Record{}, err, false, "")
		return
	}
	rec, err := h.cfg.Records.Evict(r.Context(), op, force)
	if errors.Is(err, server.ErrLeaseLive) {
		h.renderRecord(w, r, op, rec, nil, false, err.Error())
		return
	}
	if err != nil {
		h.renderRecord(w, r, op, rec, err, false, "")
		return
	}
	h.cfg.Logger.WarnContext(r.Context(), "admin: record evicted through the admin page", "tenant", op.Tenant,
		"principal", op.Principal, "route", op.Route, "key", op.Key, "forced", force, "remote", r.RemoteAddr)
	http.Redirect(w, r, h.cfg.Prefix+"/key?"+scopeQuery(op)+"&notice=evicted", http.StatusSeeOther)
}

// inflightData is a page of the operations in flight.
type inflightData struct {
	Page  server.InFlightPage
	Stuck bool
	Route string
	Next  template.URL // the next page's query, escaped
}

func (h *handler) inflight(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	after, err := server.ParsePosition(q.Get("after"))
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, err.Error())
		return
	}
	limit, _ := strconv.Atoi(q.Get("limit"))
	query := server.InFlightQuery{Stuck: q.Get("stuck") == "1", Route: q.Get("route"), After: after, Limit: limit}
	page, err := h.cfg.Records.InFlight(r.Context(), query)
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := inflightData{Page: page, Stuck: query.Stuck, Route: query.Route}
	if page.More {
		next := url.Values{"after": {page.Next.String()}, "route": {query.Route}}
		if query.Stuck {
			next.Set("stuck", "1")
		}
		d.Next = template.URL(next.Encode())
	}
	title := "In flight"
	if query.Stuck {
		title = "Stuck"
	}
	h.render(w, r, http.StatusOK, "inflight.html", title, d)
}

// parkedData is a page of parked messages.
type parkedData struct {
	Messages []outbox.ParkedMessage
	Next     int64
}

func (h *handler) parked(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Outbox == nil {
		h.fail(w, r, http.StatusNotFound, "This page shows no outbox (admin.Config.Outbox is nil).")
		return
	}
	after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
	const limit = 50
	msgs, err := h.cfg.Outbox.Parked(r.Context(), after, limit+1)
	if err != nil {
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := parkedData{Messages: msgs}
	if len(msgs) > limit {
		d.Messages = msgs[:limit]
		d.Next = d.Messages[limit-1].ID
	}
	h.render(w, r, http.StatusOK, "parked.html", "Parked messages", d)
}

// messageData is the page of one message.
type messageData struct {
	Status outbox.MessageStatus
	// PastRetention: Redrive would refuse it (ErrPastRetention).
	PastRetention bool
}

func (h *handler) message(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	id, _ := strconv.ParseInt(q.Get("id"), 10, 64)
	h.renderMessage(w, r, id, q.Get("key"), "")
}

func (h *handler) renderMessage(w http.ResponseWriter, r *http.Request, id int64, key, refusal string) {
	if h.cfg.Outbox == nil {
		h.fail(w, r, http.StatusNotFound, "This page shows no outbox (admin.Config.Outbox is nil).")
		return
	}
	var st outbox.MessageStatus
	var err error
	if key != "" {
		st, err = h.cfg.Outbox.LookupKey(r.Context(), key)
	} else {
		st, err = h.cfg.Outbox.Lookup(r.Context(), id)
	}
	switch {
	case errors.Is(err, outbox.ErrUnknownMessage):
		h.fail(w, r, http.StatusNotFound, err.Error())
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	d := messageData{Status: st, PastRetention: !st.RedriveBy.IsZero() && !h.now().Before(st.RedriveBy)}
	status := http.StatusOK
	if refusal != "" {
		status = http.StatusConflict
	}
	h.renderErr(w, r, status, "message.html", "Message "+strconv.FormatInt(st.ID, 10), d, refusal)
}

func (h *handler) redrive(w http.ResponseWriter, r *http.Request) {
	if h.cfg.Outbox == nil {
		h.fail(w, r, http.StatusNotFound, "This page shows no outbox (admin.Config.Outbox is nil).")
		return
	}
	id, err := strconv.ParseInt(r.PostForm.Get("id"), 10, 64)
	if err != nil {
		h.fail(w, r, http.StatusBadRequest, "The message ID is not a number.")
		return
	}
	past := r.PostForm.Get("past_retention") == "1"
	if past {
		err = h.cfg.Outbox.RedrivePastRetention(r.Context(), id)
	} else {
		err = h.cfg.Outbox.Redrive(r.Context(), id)
	}
	switch {
	case errors.Is(err, outbox.ErrNotParked), errors.Is(err, outbox.ErrPastRetention):
		h.renderMessage(w, r, id, "", err.Error())
		return
	case err != nil:
		h.fail(w, r, http.StatusInternalServerError, err.Error())
		return
	}
	h.cfg.Logger.WarnContext(r.Context(), "admin: message re-driven through the admin page", "id", id,
		"past_retention", past, "remote", r.RemoteAddr)
	http.Redirect(w, r, h.cfg.Prefix+"/message?id="+strconv.FormatInt(id, 10)+"&notice=redriven", http.StatusSeeOther)
}
