package main

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/idemkit/idem/internal/conformance"
	"github.com/idemkit/idem/internal/gobuild"
)

// BenchmarkHostileResponses runs idemcheck, as a process of its own, at
// -concurrency 64 against a server that answers the first request of each
// key with a plain 201 and every later one (the duplicates of the
// concurrent check) with hostile response headers, and reports the
// process's peak resident memory (peak-RSS-MB, the largest of b.N runs):
//
//	go test -run '^$' -bench HostileResponses -benchtime 3x ./cmd/idemcheck
//
// The shapes: one 9.5 MB header (over the checker's 64 KiB cap,
// conformance.MaxHeaderBytes: the duplicates fail), one header just under
// the cap, the same bytes as 12-byte headers (the most entries net/http's
// parser builds from them), and those with a body that never ends (cut at
// conformance.MaxBodyBytes).
func BenchmarkHostileResponses(b *testing.B) {
	bin := filepath.Join(b.TempDir(), "idemcheck")
	if err := gobuild.Build("github.com/idemkit/idem/cmd/idemcheck", bin); err != nil {
		b.Fatal(err)
	}
	underCap := conformance.MaxHeaderBytes - 4<<10
	shapes := []struct {
		name    string
		set     func(h http.Header)
		endless bool // and a body that never ends
	}{
		{"one-9.5MB-header", oneHeader(9_500_000), false},
		{"one-header-under-the-cap", oneHeader(underCap), false},
		{"small-headers-under-the-cap", smallHeaders(underCap), false},
		{"small-headers-and-an-endless-body", smallHeaders(underCap), true},
	}
	for _, sh := range shapes {
		b.Run(sh.name, func(b *testing.B) {
			srv := httptest.NewServer(hostileAfterFirst(sh.set, sh.endless))
			defer srv.Close()
			peak := int64(0)
			for b.Loop() {
				cmd := exec.Command(bin, "-url", srv.URL+"/v1/payments", "-body", `{"n": {{n}}}`,
					"-concurrency", "64", "-timeout", "60s", "-seed", "1")
				cmd.Stdout, cmd.Stderr = io.Discard, io.Discard
				if err := cmd.Run(); err != nil && cmd.ProcessState == nil {
					b.Fatal(err)
				}
				ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
				peak = max(peak, int64(ru.Maxrss)) // KiB on Linux
			}
			b.ReportMetric(float64(peak)/1024, "peak-RSS-MB")
		})
	}
}

// hostileAfterFirst answers the first request of a key with a 201 and
// every later one with the headers set writes, and, when endless, a body
// that ends only when the client hangs up.
func hostileAfterFirst(set func(http.Header), endless bool) http.Handler {
	var mu sync.Mutex
	seen := map[string]bool{}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		key := r.Header.Get("Idempotency-Key")
		mu.Lock()
		again := seen[key]
		seen[key] = true
		mu.Unlock()
		if again {
			set(w.Header())
		}
		w.WriteHeader(http.StatusCreated)
		_, _ = fmt.Fprintf(w, `{"payment_id":%q}`, key)
		for chunk := make([]byte, 64<<10); again && endless; {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
}

// oneHeader sets one header of n bytes.
func oneHeader(n int) func(http.Header) {
	v := strings.Repeat("x", n)
	return func(h http.Header) { h["X-Hostile"] = []string{v} }
}

// smallHeaders sets distinct headers "X-Hnnnnnn: y", about n bytes in all.
func smallHeaders(n int) func(http.Header) {
	var names []string
	for size := 0; size < n; {
		name := fmt.Sprintf("X-H%06d", len(names))
		names = append(names, name)
		size += len(name) + len(": y\r\n")
	}
	return func(h http.Header) {
		for _, name := range names {
			h[name] = []string{"y"}
		}
	}
}
