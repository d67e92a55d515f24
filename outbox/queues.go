package outbox

import (
	"context"
	"fmt"
	"hash/fnv"
	"regexp"
	"sync"
	"time"

	"github.com/riverqueue/river"
)

// The Postgres outbox spreads destinations over Config.Queues River queues
// (see the package doc, "Sharing the workers"): the relay puts a message
// into the queue its destination hashes to, and each queue has its own
// River producer, which fetches at most Workers of its messages at once.
// A destination's messages therefore wait only behind those of the
// destinations that hash to the same queue.
//
// The queues are named queuePrefix plus a two-digit number. The queue of
// the outbox before them, queueName, keeps a producer in every dispatcher,
// so that the messages an earlier version put there are delivered (and
// re-driven) as before.
const (
	queuePrefix = "idem_outbox_"
	maxQueues   = 100
)

// queuePattern matches the names of the outbox's queues (queueFor's), so
// that a dispatcher finds those of another Config.Queues (see discover).
var queuePattern = regexp.MustCompile(`^idem_outbox_[0-9]{2}$`)

// queueFor returns the queue of destination dest among n queues: FNV-1a of
// the destination, modulo n. The hash is part of the outbox's storage
// format: changing it would move a destination's next messages to another
// queue (nothing is lost; see discover).
func queueFor(dest string, n int) string {
	h := fnv.New32a()
	_, _ = h.Write([]byte(dest))
	return fmt.Sprintf("%s%02d", queuePrefix, h.Sum32()%uint32(n))
}

// queueNames are the queues a dispatcher with settings s serves from its
// start: its Config.Queues and the queue of the earlier version.
func (s *settings) queueNames() []string {
	names := []string{queueName}
	for i := range s.Queues {
		names = append(names, fmt.Sprintf("%s%02d", queuePrefix, i))
	}
	return names
}

// lanes are the queues a dispatcher serves, each with the share of its
// workers among its destinations (see share). It is safe for concurrent
// use.
type lanes struct {
	s  *settings
	mu sync.Mutex
	by map[string]*share // queue name -> its share
}

func newLanes(s *settings, names []string) *lanes {
	l := &lanes{s: s, by: map[string]*share{}}
	for _, name := range names {
		l.by[name] = l.s.newShare()
	}
	return l
}

// newShare divides the Workers of one queue among its destinations.
func (s *settings) newShare() *share {
	now, random := func() time.Time { return s.now() }, func() float64 { return s.random() } // tests replace them
	return newShare(s.Workers, s.MaxBackoff, now, random)
}

// of returns the share of queue name, made on first use (a queue that
// discover added).
func (l *lanes) of(name string) *share {
	l.mu.Lock()
	defer l.mu.Unlock()
	sh := l.by[name]
	if sh == nil {
		sh = l.s.newShare()
		l.by[name] = sh
	}
	return sh
}

// discoverEvery is how often a dispatcher looks for outbox queues it does
// not serve.
const discoverEvery = time.Minute

// discover serves, until ctx is done, every outbox queue that River lists
// (a queue is listed while a producer of some client reports it, and 24 h
// after: River's QueueList) and that the dispatcher does not serve yet: a
// queue of a dispatcher with more Config.Queues, or of one that ran before
// Config.Queues was lowered. Its messages are delivered whatever the
// Config.Queues of the dispatchers running now.
func (o *Outbox) discover(ctx context.Context) {
	for {
		if err := o.discoverOnce(ctx); err != nil && ctx.Err() == nil {
			o.s.Logger.WarnContext(ctx, "outbox: cannot list River's queues", "error", err)
		}
		if _, live := sleep(ctx, nil, discoverEvery); !live {
			return
		}
	}
}

func (o *Outbox) discoverOnce(ctx context.Context) error {
	res, err := o.client.QueueList(ctx, river.NewQueueListParams().First(10000))
	if err != nil {
		return err
	}
	for _, q := range res.Queues {
		if !queuePattern.MatchString(q.Name) || o.served[q.Name] {
			continue
		}
		if err := o.client.Queues().Add(q.Name, river.QueueConfig{MaxWorkers: o.s.Workers}); err != nil {
			return err
		}
		o.served[q.Name] = true
		o.s.Logger.InfoContext(ctx, "outbox: serving a queue of another Config.Queues", "queue", q.Name)
	}
	return nil
}
