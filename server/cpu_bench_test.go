package server

import (
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/internal/proccpu"
)

// cpuMeter measures the CPU a benchmark spends: this process (server and
// client) through getrusage, and the Postgres backends of the benchmark's
// pool through /proc, where the database runs on this machine. On a
// machine shared with other work, CPU per request is a steadier figure
// than wall-clock throughput.
type cpuMeter struct {
	pool *pgxpool.Pool
	app  string
}

type cpuSample struct {
	self     time.Duration
	backends map[int]time.Duration
}

func (m cpuMeter) read(b *testing.B) cpuSample {
	b.Helper()
	s := cpuSample{self: proccpu.Used(), backends: map[int]time.Duration{}}
	rows, err := m.pool.Query(context.Background(), `SELECT pid FROM pg_stat_activity WHERE application_name = $1`, m.app)
	if err != nil {
		b.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var pid int
		if rows.Scan(&pid) == nil {
			if cpu, ok := procCPU(pid); ok {
				s.backends[pid] = cpu
			}
		}
	}
	return s
}

// used is the CPU this process and the backends spent since before.
func (m cpuMeter) used(b *testing.B, before cpuSample) (self, pg time.Duration) {
	b.Helper()
	after := m.read(b)
	for pid, cpu := range after.backends {
		pg += cpu - before.backends[pid]
	}
	return after.self - before.self, pg
}

// report adds go-cpu-us/req and, when /proc shows the backends,
// pg-cpu-us/req.
func (m cpuMeter) report(b *testing.B, before cpuSample, requests int) {
	b.Helper()
	if requests == 0 {
		return
	}
	after := m.read(b)
	perReq := func(d time.Duration) float64 { return float64(d.Microseconds()) / float64(requests) }
	b.ReportMetric(perReq(after.self-before.self), "go-cpu-us/req")
	var pg time.Duration
	for pid, cpu := range after.backends {
		pg += cpu - before.backends[pid]
	}
	if len(after.backends) > 0 {
		b.ReportMetric(perReq(pg), "pg-cpu-us/req")
	}
}

// procCPU is the user plus system time of a process, from /proc/pid/stat.
func procCPU(pid int) (time.Duration, bool) {
	raw, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	fields := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+1:]))
	if len(fields) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticksPerSecond = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / ticksPerSecond, true
}
