//go:build unix

package idem

import (
	"syscall"
	"time"
)

// cpuTime returns the CPU time (user and system) this process used so far:
// the client and the loopback server together, a steadier measure of work
// than wall time on a shared machine.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
