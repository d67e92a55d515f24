package conformance

import (
	"context"
	"fmt"
	"net/http"
	"sort"
	"strings"
	"sync"
)

// concurrentRounds is how many keys the concurrent check storms, each
// with Config.Concurrency requests at once: a race that one round misses
// may show in another.
const concurrentRounds = 3

// waitStatuses are the answers a duplicate may get instead of a replay:
// "in flight, retry later" (409 in the idem contract), or throttling.
var waitStatuses = map[int]bool{
	http.StatusConflict: true, http.StatusTooEarly: true,
	http.StatusTooManyRequests: true, http.StatusServiceUnavailable: true,
}

// checkConcurrent: Concurrency requests with one key, sent at once, have
// one effect: one response, and the others replay it or are told to wait
// (409); none runs a second time. A wait must end: when duplicates were
// told to wait, the key sent again replays the response within
// Config.WaitTimeout. Identical responses show a replay only
// with a count (+1 per round) or the API's replay mark: a server that
// ignores the key and answers every request alike sends them too.
func checkConcurrent(ctx context.Context, r *runner) Result {
	var total storming
	for round := 1; round <= concurrentRounds; round++ {
		t, err := r.startTally(ctx)
		if err != nil {
			return failed(nil, "could not read the count: %v", err)
		}
		key, body := r.newKey(), r.intent()
		xs := r.storm(ctx, key, body)
		s := r.summarise(xs)
		problems := s.problems
		if len(problems) == 0 && s.waits > 0 {
			shown, p := r.awaitReplay(ctx, key, body, s.shown[0])
			if p != "" {
				problems = append(problems, p)
				s.shown = append(s.shown, shown[1:]...)
			}
		}
		if p := r.effectProblem(ctx, t, 1); p != "" {
			problems = append(problems, p)
		}
		if len(problems) > 0 {
			return failed(r.evidenceOf(s.shown...), "round %d, %d requests at once with one key: %s (statuses %s)",
				round, len(xs), strings.Join(problems, "; "), s.statuses())
		}
		total.add(s)
	}
	return r.concurrentVerdict(total)
}

// concurrentVerdict judges rounds that showed no problem: by the count,
// else by the replay marks of the identical responses.
func (r *runner) concurrentVerdict(s storming) Result {
	head := fmt.Sprintf("%d rounds of %d requests at once with one key: one response each", concurrentRounds, r.cfg.Concurrency)
	if r.cfg.Effects.CountURL != "" {
		return passed(r.basis(), "%s, %d replays of it, %d told to wait; the count grew by %d", head, s.identical, s.waits, concurrentRounds)
	}
	h := r.cfg.ReplayedHeader
	switch {
	case h != "" && s.unmarked == 0:
		return passed(r.basis(), "%s, %d identical responses, all marked with %s, %d told to wait", head, s.identical, h, s.waits)
	case h != "":
		head += fmt.Sprintf(", %d identical responses, %d of them marked with %s, %d told to wait", s.identical, s.identical-s.unmarked, h, s.waits)
	default:
		head += fmt.Sprintf(", %d identical responses (the API marks no replay), %d told to wait", s.identical, s.waits)
	}
	return notApplicable("%s: identical responses do not show that the operation ran once (a server that ignores the key and answers every request alike sends them too): give -count-url to decide", head)
}

// storm sends Concurrency requests with key and body, released together.
func (r *runner) storm(ctx context.Context, key string, body []byte) []exchange {
	xs := make([]exchange, r.cfg.Concurrency)
	start := make(chan struct{})
	var ready, done sync.WaitGroup
	for i := range xs {
		ready.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			ready.Done()
			<-start
			xs[i] = r.send(ctx, call{note: fmt.Sprintf("request %d of %d at once, one key", i+1, len(xs)), key: key, body: body})
		}()
	}
	ready.Wait()
	close(start)
	done.Wait()
	return xs
}

// storming is what a storm's responses show.
type storming struct {
	byStatus map[int]int
	// identical counts the 2xx responses that repeat the first one;
	// unmarked, the 2xx responses beyond one without the replay mark (the
	// response of the request that ran needs none); waits, the responses
	// that told a duplicate to wait.
	identical, unmarked, waits int
	problems                   []string
	shown                      []exchange // the exchanges that show the problems
}

// add adds the counts of s to t.
func (t *storming) add(s storming) {
	t.identical, t.unmarked, t.waits = t.identical+s.identical, t.unmarked+s.unmarked, t.waits+s.waits
}

// summarise classifies the responses of one storm: the distinct 2xx
// responses (by body, and by id when there is an IDField) must be one.
func (r *runner) summarise(xs []exchange) storming {
	s := storming{byStatus: map[int]int{}}
	distinct := map[string]exchange{}
	ids := map[string]bool{}
	unmarked := 0
	for _, x := range xs {
		s.byStatus[x.status]++
		switch {
		case x.ok2xx():
			if _, seen := distinct[string(x.body)]; !seen {
				distinct[string(x.body)] = x
				s.shown = append(s.shown, x)
			} else {
				s.identical++
			}
			if !r.marked(x) {
				unmarked++
			}
			if id, ok := r.id(x); ok {
				ids[id] = true
			}
		case x.err == nil && waitStatuses[x.status]:
			s.waits++
		default:
			s.problems = append(s.problems, fmt.Sprintf("a duplicate got %s", x.outcome()))
			s.shown = append(s.shown, x)
		}
	}
	s.unmarked = max(0, unmarked-1) // the response that ran needs no mark
	switch {
	case len(distinct) == 0:
		s.problems = append(s.problems, "no request succeeded")
	case len(ids) > 1:
		s.problems = append(s.problems, fmt.Sprintf("the responses name %d resources: the operation ran %d times", len(ids), len(ids)))
	case len(distinct) > 1:
		s.problems = append(s.problems, fmt.Sprintf("%d different 2xx responses: the operation ran more than once", len(distinct)))
	}
	if len(s.shown) > 4 {
		s.shown = s.shown[:4]
	}
	return s
}

// statuses renders the status counts: "201 x3, 409 x5".
func (s storming) statuses() string {
	codes := make([]int, 0, len(s.byStatus))
	for c := range s.byStatus {
		codes = append(codes, c)
	}
	sort.Ints(codes)
	parts := make([]string, len(codes))
	for i, c := range codes {
		name := fmt.Sprint(c)
		if c == 0 {
			name = "no response"
		}
		parts[i] = fmt.Sprintf("%s x%d", name, s.byStatus[c])
	}
	return strings.Join(parts, ", ")
}
