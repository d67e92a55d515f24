//go:build !unix

package idem

import "time"

// cpuTime is 0 where getrusage is missing: the benchmarks' CPU figures are
// then 0, their other figures stand.
func cpuTime() time.Duration { return 0 }
