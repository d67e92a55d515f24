package main

import (
	"encoding/json"
	"net/http"
	"time"

	"github.com/idemkit/idem/internal/opsview"
	"github.com/idemkit/idem/outbox"
	"github.com/idemkit/idem/server"
)

// The -json forms of what the commands print share one style: field
// names in snake_case, instants in RFC 3339, durations in seconds (a
// name that ends in _seconds), bodies as text in "body" when they are
// text and base64 in "body_base64" only when they are not (opsview.JSONBody).

// requestView is a record's stored request as -json prints it.
type requestView struct {
	Method     string      `json:"method"`
	URI        string      `json:"uri"`
	Pattern    string      `json:"pattern,omitempty"`
	Header     http.Header `json:"header,omitempty"`
	Body       *string     `json:"body,omitempty"`
	BodyBase64 *string     `json:"body_base64,omitempty"`
}

func requestJSON(r *server.StoredRequest) *requestView {
	if r == nil {
		return nil
	}
	v := &requestView{Method: r.Method, URI: r.URI, Pattern: r.Pattern, Header: r.Header}
	v.Body, v.BodyBase64 = opsview.JSONBody(r.Body)
	return v
}

// recoveryView is a recovery point as -json prints it: its data as the
// JSON it is, or as text when it is not JSON.
type recoveryView struct {
	Point string `json:"point"`
	Data  any    `json:"data,omitempty"`
}

func recoveryJSON(r *server.Recovery) *recoveryView {
	if r == nil {
		return nil
	}
	v := &recoveryView{Point: r.Point}
	switch {
	case len(r.Data) == 0:
	case json.Valid(r.Data):
		v.Data = r.Data
	default:
		v.Data = string(r.Data)
	}
	return v
}

// messageView is an outbox message, parked or not, as -json prints it,
// without the credentials of its headers and its last response's
// (opsview.Header), whose names Withheld lists.
type messageView struct {
	ID                 int64       `json:"id"`
	State              string      `json:"state,omitempty"`
	Name               string      `json:"name"`
	Method             string      `json:"method"`
	URL                string      `json:"url"`
	Key                string      `json:"key"`
	Header             http.Header `json:"header,omitempty"`
	Body               *string     `json:"body,omitempty"`
	BodyBase64         *string     `json:"body_base64,omitempty"`
	Reason             string      `json:"reason,omitempty"`
	Attempts           int         `json:"attempts"`
	Status             int         `json:"status,omitempty"`
	ResponseHeader     http.Header `json:"response_header,omitempty"`
	ResponseBody       *string     `json:"response_body,omitempty"`
	ResponseBodyBase64 *string     `json:"response_body_base64,omitempty"`
	Error              string      `json:"error,omitempty"`
	EnqueuedAt         *time.Time  `json:"enqueued_at,omitempty"`
	ParkedAt           *time.Time  `json:"parked_at,omitempty"`
	NextAttemptAt      *time.Time  `json:"next_attempt_at,omitempty"`
	DeliveredAt        *time.Time  `json:"delivered_at,omitempty"`
	FirstAttemptAt     *time.Time  `json:"first_attempt_at,omitempty"`
	// RedriveBy is null when a re-drive is safe at any time; RedriveNote
	// says why, in the words of the table.
	RedriveBy   *time.Time `json:"redrive_by"`
	RedriveNote string     `json:"redrive_note"`
	Withheld    []string   `json:"withheld,omitempty"`
}

func messageJSON(p outbox.ParkedMessage) messageView {
	shown := shownParked(p)
	p = shown.ParkedMessage
	v := messageView{ID: p.ID, Name: p.Message.Name, Method: p.Message.Method, URL: p.Message.URL, Key: p.Message.Key,
		Header: p.Message.Header, Reason: string(p.Reason), Attempts: p.Attempts, Status: p.Status,
		ResponseHeader: p.Header, Error: p.Err, EnqueuedAt: instant(p.EnqueuedAt), ParkedAt: instant(p.ParkedAt),
		FirstAttemptAt: instant(p.FirstAttempt), RedriveBy: instant(p.RedriveBy),
		RedriveNote: opsview.RedriveNote(p.RedriveBy, p.Attempts, p.Status), Withheld: shown.Withheld}
	v.Body, v.BodyBase64 = opsview.JSONBody(p.Message.Body)
	if p.Status != 0 {
		v.ResponseBody, v.ResponseBodyBase64 = opsview.JSONBody(p.Body)
	}
	return v
}

func statusJSON(st outbox.MessageStatus) messageView {
	v := messageJSON(st.ParkedMessage)
	v.State, v.NextAttemptAt, v.DeliveredAt = string(st.State), instant(st.NextAttempt), instant(st.DeliveredAt)
	return v
}

// instant is &t, nil for the zero time.
func instant(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// countsView is a store's record counts as -json prints them.
type countsView struct {
	Records              int64   `json:"records"`
	RecordsAre           string  `json:"records_are"`
	Running              int     `json:"running"`
	Stuck                int     `json:"stuck"`
	OldestRunningSeconds float64 `json:"oldest_running_seconds"`
	OldestStuckSeconds   float64 `json:"oldest_stuck_seconds"`
}

// outboxStatsView is the outbox's counts as -json prints them.
type outboxStatsView struct {
	Pending              int     `json:"pending"`
	OldestPendingSeconds float64 `json:"oldest_pending_seconds"`
	Parked               int     `json:"parked"`
}

// statsView is what stats prints with -json: NoOutbox is the database's
// word for the outbox table it lacks, when Outbox is nil.
type statsView struct {
	Records  countsView       `json:"records"`
	Outbox   *outboxStatsView `json:"outbox,omitempty"`
	NoOutbox string           `json:"no_outbox,omitempty"`
}

func statsJSON(s stats) statsView {
	c := s.Records
	v := statsView{NoOutbox: s.NoOutbox, Records: countsView{Records: c.Records, RecordsAre: string(countKind(c)),
		Running: c.Running, Stuck: c.Stuck, OldestRunningSeconds: c.OldestRunning.Seconds(), OldestStuckSeconds: c.OldestStuck.Seconds()}}
	if o := s.Outbox; o != nil {
		v.Outbox = &outboxStatsView{Pending: o.Pending, OldestPendingSeconds: o.OldestPending.Seconds(), Parked: o.Parked}
	}
	return v
}

// countKind is what c.Records is; "" means exact.
func countKind(c server.RecordCounts) server.CountKind {
	if c.RecordsAre == "" {
		return server.CountExact
	}
	return c.RecordsAre
}
