package outbox

import (
	"context"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/wire"
)

// Defaults of [Config], as its fields' docs state them.
const (
	defaultTimeout     = 30 * time.Second
	defaultMaxAttempts = 25
	defaultMaxAge      = 12 * time.Hour
	defaultMinBackoff  = time.Second
	defaultMaxBackoff  = 5 * time.Minute
	defaultWorkers     = 20
)

// Config configures an [Outbox] (and a [Memory] outbox). Its zero value means
// the defaults: the idem client's defaults for each delivery, 30 s per
// delivery, parking after 25 deliveries or 12 hours (or the downstream's
// key retention of 24 hours since the first delivery), full-jitter backoff
// from 1 s to 5 min between deliveries, 20 deliveries at once per
// dispatcher. Zero or negative durations and counts mean the default.
type Config struct {
	// Client configures the idem client ([idem.NewTransport]) that sends each
	// delivery: its attempts, backoff, retry budget and circuit breaker apply
	// within a delivery. Zero: the idem client's defaults (6 requests on the
	// wire per delivery, [idem.Config.MaxAttempts]). Its [idem.Config.Base] is
	// the transport underneath (nil: a clone of http.DefaultTransport that
	// keeps Workers idle connections per host).
	Client idem.Config

	// Timeout bounds one delivery, every attempt and wait of the idem
	// client included. Zero: 30 s.
	Timeout time.Duration

	// MaxAttempts is how many deliveries a message gets before it is
	// parked, counted since it was enqueued or last re-driven (each
	// delivery is one call of the idem client, itself up to Client's
	// [idem.Config.MaxAttempts] requests). Zero: 25.
	MaxAttempts int

	// MaxAge is how long after its enqueue (or its last re-drive) a
	// message is retried before it is parked. Keep it well under
	// KeyRetention. Zero: 12 h.
	MaxAge time.Duration

	// KeyRetention is how long the downstreams keep an Idempotency-Key
	// after its first request: a request after that may run the operation
	// again. The outbox counts it from a message's first delivery that
	// may have taken effect ([ParkedMessage.FirstAttempt]), across
	// re-drives: it parks a message whose next delivery would come after
	// it ([ReasonRetention]), and [Outbox.Redrive] refuses such a message
	// ([ErrPastRetention]). Set it to the shortest retention of the
	// downstreams the outbox sends to. Zero: 24 h, an idem server's
	// default ([server.Config.Retention]) and a common one for payment APIs.
	KeyRetention time.Duration

	// MinBackoff and MaxBackoff bound the wait between two deliveries:
	// full jitter, random(0, min(MaxBackoff, MinBackoff * 2^(n-1))) after
	// the n-th, and at least the downstream's Retry-After (clamped to
	// MaxBackoff). Zero: 1 s and 5 min.
	MinBackoff, MaxBackoff time.Duration

	// Workers is how many messages one dispatcher delivers at once from
	// one queue: the Postgres outbox has Queues of them (and the queue of
	// earlier versions), so it delivers up to Workers x (Queues + 1) at
	// once in all, and a destination alone in its queue may use all of
	// that queue's Workers. A slow destination that shares its queue with
	// others gets at most three quarters of them (see the package doc,
	// "Sharing the workers"). [Memory] has one queue. Zero: 20.
	Workers int

	// Observer is told of every delivery outcome (see [Observer]). Zero:
	// nothing is told.
	Observer Observer

	// Logger receives the dispatcher's records: a warning per parked
	// message, a debug record per failed delivery (and River's records,
	// for the Postgres outbox). Nil: slog.Default().
	Logger *slog.Logger

	// The fields below apply to the Postgres outbox ([New]) only.

	// RescueAfter is how long a message may stay "being delivered" before
	// it is taken as abandoned (its dispatcher died) and delivered again,
	// with the same key. It must exceed Timeout by at least 2 s: a live
	// dispatcher's delivery is cancelled at Timeout, and a turn whose
	// delivery its client refused (breaker open) holds its worker at most
	// Timeout plus half of RescueAfter - Timeout - 2 s, and plus 5 s at
	// most (see the package doc, "A destination that is down"), so a
	// message is never delivered by two dispatchers at once. A killed dispatcher's
	// message is delivered again within RescueAfter plus about a minute
	// (River's rescuer runs every 30 s on the elected leader, a dead
	// leader is replaced within 20 s, and the rescued message becomes
	// available within 5 s). River compares the database's clock (when a
	// delivery started) with the leader's: keep their skew well under
	// RescueAfter - Timeout - 5 s. Zero: Timeout + 30 s.
	RescueAfter time.Duration

	// PollInterval is how often a dispatcher looks for due messages, and
	// its relay for committed ones, when no notification arrives: a
	// committed message is normally announced at once to the relays, and
	// a relayed one to the dispatchers, by LISTEN/NOTIFY (see the package
	// doc, "The queue"), and a retry whose backoff ended is found by this
	// poll. Zero: 1 s.
	PollInterval time.Duration

	// FetchCooldown is the least time between two fetches of a dispatcher:
	// it bounds both the database load under a stream of notifications and
	// the throughput (Workers messages per fetch). The dispatcher's relay
	// inserts a batch at most once per FetchCooldown too, since a batch
	// inserted sooner would not be fetched sooner. Zero: 2 ms.
	FetchCooldown time.Duration

	// Schema is the Postgres schema of the outbox's tables (River's).
	// Empty: the first schema of the search_path. Applications that run
	// River clients of their own should give the outbox a schema of its
	// own, since River's leader applies its maintenance settings to every
	// job of its schema.
	Schema string

	// Queues is how many River queues the destinations (the scheme, host
	// and port of [Message.URL]) are spread over, by a hash of each: each
	// queue has its own Workers and fetches on its own, so a destination
	// that hangs or fails holds up only the destinations of its queue (see
	// the package doc, "Sharing the workers"). Give every dispatcher of a
	// database the same Queues: a dispatcher's relay puts each message in
	// the queue of its destination among its own Queues. A dispatcher also
	// serves, within a minute, the outbox's queues that another dispatcher
	// serves or served in the last 24 h, so that changing Queues strands
	// no message. Zero: 16; at most 100.
	Queues int

	// StopTimeout bounds the graceful stop of [Outbox.Run]: deliveries still
	// running after it are cancelled (and delivered again later, with the
	// same key). Zero: Timeout.
	StopTimeout time.Duration
}

// Observer is told of delivery outcomes. Each hook may be nil; hooks run
// on the delivering goroutine and must be fast and safe for concurrent use.
type Observer struct {
	// Delivered is called when a delivery got a 2xx (or 500
	// result-unavailable: the downstream ran it).
	Delivered func(ctx context.Context, d Delivery)
	// Retried is called when a delivery failed and the message will be
	// delivered again after wait.
	Retried func(ctx context.Context, d Delivery, wait time.Duration)
	// Parked is called when a message is parked (its [Delivery.Reason]
	// says why).
	Parked func(ctx context.Context, d Delivery)
}

// Delivery describes one delivery of a message, for an [Observer].
type Delivery struct {
	// ID is the message's ID; Name and Key are the [Message]'s.
	ID        int64
	Name, Key string
	// Attempt counts the deliveries of the message, this one included,
	// since it was enqueued or last re-driven.
	Attempt int
	// Status is the last HTTP status received, 0 when none.
	Status int
	// Err is the delivery's error (an *[idem.Error], or a context error),
	// nil when a response was classified.
	Err error
	// Reason says why a message was parked (see [Reason]), "" otherwise.
	Reason Reason
}

// Reason says why a message was parked.
type Reason string

// The reasons of a parked message ([ParkedMessage.Reason],
// [Delivery.Reason]).
const (
	// ReasonRefused: the downstream refused it for sure (see
	// [ParkedMessage.Status]).
	ReasonRefused Reason = "refused"
	// ReasonAttempts: [Config.MaxAttempts] deliveries failed (a delivery
	// its client refused to send, breaker open or no budget, counts), or a
	// refused one came once the time they imply had passed (see the
	// package doc, "A destination that is down").
	ReasonAttempts Reason = "max-attempts"
	// ReasonAge: it was still failing [Config.MaxAge] after its enqueue.
	ReasonAge Reason = "max-age"
	// ReasonRetention: its next delivery would come after the downstream's
	// key retention ([Config.KeyRetention]) since its first delivery, when
	// a delivery could run the operation twice.
	ReasonRetention Reason = "key-retention"
	// ReasonKeyConflict: it was enqueued under the key of a message with
	// other contents that was already in the queue when the relay moved it
	// ([Outbox.Enqueue] returns [ErrKeyConflict] while the first one waits
	// to be relayed). It was not sent: [Outbox.Redrive] sends it, under
	// that key, if it should be.
	ReasonKeyConflict Reason = "key-conflict"
	// ReasonDiscarded: the queue gave up on it by itself (River discarded
	// the job); should not happen with the outbox's settings.
	ReasonDiscarded Reason = "discarded"
)

// settings is a Config with its defaults resolved.
type settings struct {
	Config
	keyHeader string // the idem client's key header (Client.KeyHeader), canonical
	rt        *idem.Transport
	now       func() time.Time
	random    func() float64 // in [0, 1)
	span      time.Duration  // the time MaxAttempts deliveries imply (see span)
	refusals  *refusals
	// hold is how long, over Timeout, a delivery that its client refused
	// may hold its worker while it waits for its pace (see refusals).
	hold time.Duration
	// where names the outbox in traces (internal/trace): its database
	// and schema, or its memory queue.
	where string
}

func newSettings(cfg Config) (*settings, error) {
	s := &settings{Config: cfg, now: time.Now, random: rand.Float64, keyHeader: wire.HeaderKey}
	if cfg.Client.KeyHeader != "" {
		s.keyHeader = http.CanonicalHeaderKey(cfg.Client.KeyHeader)
	}
	s.Timeout = orDefault(s.Timeout, defaultTimeout)
	s.MaxAttempts = orDefault(s.MaxAttempts, defaultMaxAttempts)
	s.MaxAge = orDefault(s.MaxAge, defaultMaxAge)
	s.KeyRetention = orDefault(s.KeyRetention, 24*time.Hour)
	s.MinBackoff = orDefault(s.MinBackoff, defaultMinBackoff)
	s.MaxBackoff = orDefault(s.MaxBackoff, defaultMaxBackoff)
	s.Workers = orDefault(s.Workers, defaultWorkers)
	s.RescueAfter = orDefault(s.RescueAfter, s.Timeout+30*time.Second)
	s.PollInterval = orDefault(s.PollInterval, time.Second)
	s.FetchCooldown = orDefault(s.FetchCooldown, 2*time.Millisecond)
	s.StopTimeout = orDefault(s.StopTimeout, s.Timeout)
	s.Queues = min(orDefault(s.Queues, 16), maxQueues)
	if s.Logger == nil {
		s.Logger = slog.Default()
	}
	if s.RescueAfter < s.Timeout+2*time.Second {
		return nil, fmt.Errorf("outbox: RescueAfter (%s) must exceed Timeout (%s) by at least 2s, "+
			"so that a live dispatcher's delivery ends before its message can be rescued", s.RescueAfter, s.Timeout)
	}
	if s.Client.Base == nil {
		// A connection per worker kept alive to a downstream: net/http's
		// default keeps 2 per host and would close the others after each
		// delivery.
		t := http.DefaultTransport.(*http.Transport).Clone()
		t.MaxIdleConnsPerHost = s.Workers
		s.Client.Base = t
	}
	s.rt = idem.NewTransport(s.Client)
	s.span = span(s.MaxAttempts, s.MinBackoff, s.MaxBackoff)
	s.hold = max(min(5*time.Second, (s.RescueAfter-s.Timeout-2*time.Second)/2), 0)
	now, random := func() time.Time { return s.now() }, func() float64 { return s.random() } // tests replace them
	s.refusals = newRefusals(now, random)
	return s, nil
}

// jobTimeout is River's bound on a job: the delivery's own timeout and
// the hold of a refused one end first, and the second after them leaves
// time to return (and for a wait in share.take), before RescueAfter.
func (s *settings) jobTimeout() time.Duration { return s.hold + s.Timeout + time.Second }

func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// backoff returns the wait after the n-th failed delivery (n >= 1): the
// idem client's full jitter, r * min(max, min * 2^(n-1)) for r in [0, 1),
// raised to retryAfter, and never over max.
func backoff(n int, minB, maxB, retryAfter time.Duration, r float64) time.Duration {
	wait := idem.Backoff{Base: minB, Cap: maxB}.Delay(n-1, 0, r)
	return min(max(wait, retryAfter), maxB)
}

// observe reports a classified delivery to the Observer and the Logger
// (a retry at debug level, a parked message as a warning).
func (s *settings) observe(ctx context.Context, d Delivery, v verdict, wait time.Duration) {
	attrs := []any{"id", d.ID, "name", d.Name, "key", d.Key, "attempt", d.Attempt, "status", d.Status}
	if d.Err != nil {
		attrs = append(attrs, "error", d.Err)
	}
	switch {
	case d.Reason != "":
		s.Logger.WarnContext(ctx, "outbox: message parked", append(attrs, "reason", string(d.Reason))...)
	case v != delivered:
		s.Logger.DebugContext(ctx, "outbox: delivery failed, will retry", append(attrs, "wait", wait)...)
	}
	o := s.Observer
	switch {
	case v == delivered && o.Delivered != nil:
		o.Delivered(ctx, d)
	case d.Reason != "" && o.Parked != nil:
		o.Parked(ctx, d)
	case (v == retry || v == localRefusal) && d.Reason == "" && o.Retried != nil:
		o.Retried(ctx, d, wait)
	}
}

// discardLogger is a logger that drops every record.
func discardLogger() *slog.Logger { return slog.New(slog.DiscardHandler) }
