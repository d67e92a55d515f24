package main

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// host is the loopback payments host: a keyed POST runs once per key and
// is replayed after, unless the scenario's schedule answers it 503.
type host struct {
	url      string
	srv      *http.Server
	start    time.Time
	fault    func(op, attempt int, offset time.Duration) (bool, string)
	capacity *capacity
	slots    chan struct{} // of capacity: a request in service holds one
	admitted atomic.Int64  // of capacity: requests in service or queued
	served   atomic.Int64  // of capacity: requests that ended their service
	quota    quotaState    // of the scenario's quota, when it has one
	hasQuota bool
	requests atomic.Int64
	refused  atomic.Int64 // answered 503 for capacity or 429 for the quota

	mu       sync.Mutex
	attempts map[int]int // per operation
	paid     map[int]bool
}

func startHost() (*host, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	h := &host{url: "http://" + l.Addr().String() + "/v1/payments"}
	h.srv = &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go h.srv.Serve(l)
	return h, nil
}

func (h *host) close() { h.srv.Close() }

// reset starts a run of sc at start.
func (h *host) reset(sc scenario, start time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.start, h.fault, h.capacity, h.hasQuota = start, sc.fault, sc.capacity, sc.quota != nil
	if sc.quota != nil {
		h.quota.reset(sc.quota, start)
	}
	if sc.capacity != nil {
		h.slots = make(chan struct{}, sc.capacity.slots)
	}
	h.attempts, h.paid = map[int]int{}, map[int]bool{}
	h.requests.Store(0)
	h.refused.Store(0)
	h.served.Store(0)
}

func (h *host) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.requests.Add(1)
	io.Copy(io.Discard, r.Body)
	op, err := strconv.Atoi(strings.TrimPrefix(r.Header.Get("Idempotency-Key"), keyPrefix))
	if err != nil {
		http.Error(w, "a key "+keyPrefix+"<n> is required", http.StatusBadRequest)
		return
	}
	if h.hasQuota && !h.quota.admit(w.Header(), time.Now()) {
		h.refused.Add(1)
		w.WriteHeader(http.StatusTooManyRequests)
		return
	}
	if h.capacity != nil && !h.serve(r) {
		h.refused.Add(1)
		w.Header().Set("Retry-After", "1")
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	h.mu.Lock()
	h.attempts[op]++
	attempt := h.attempts[op]
	fail, retryAfter := h.fault(op, attempt, time.Since(h.start))
	replayed := h.paid[op]
	if !fail {
		h.paid[op] = true
	}
	h.mu.Unlock()
	if fail {
		if retryAfter != "" {
			w.Header().Set("Retry-After", retryAfter)
		}
		w.WriteHeader(http.StatusServiceUnavailable)
		return
	}
	if replayed {
		w.Header().Set("Idempotent-Replayed", "true")
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusCreated)
	fmt.Fprintf(w, `{"payment":%d}`, op)
}

// keyPrefix starts every operation's Idempotency-Key; the operation's
// number follows it.
const keyPrefix = "op-"

// serve holds r for its service time when the host has a capacity: it
// waits for a slot in the queue, and is refused (false) when the queue is
// full. A request whose client left while queued is dropped, as refused.
func (h *host) serve(r *http.Request) bool {
	c := h.capacity
	defer h.admitted.Add(-1)
	if h.admitted.Add(1) > int64(c.slots+c.queue) {
		return false
	}
	select {
	case h.slots <- struct{}{}:
	case <-r.Context().Done():
		return false
	}
	time.Sleep(c.service)
	<-h.slots
	h.served.Add(1)
	return true
}
