package testserver

import (
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"
)

// seedEnv is the environment variable that [Seed] reads, as its doc states.
const seedEnv = "IDEM_SEED"

// Seed returns the seed for a seeded test: the value of $IDEM_SEED when
// set (so a failing run can be replayed), else a new one from the clock.
// It logs the seed and how to rerun with it, which testing prints when the
// test fails (or with -v). A malformed $IDEM_SEED fails the test.
func Seed(tb testing.TB) uint64 {
	tb.Helper()
	seed, err := ParseSeed(os.Getenv(seedEnv))
	if err != nil {
		tb.Fatalf("%s: %v", seedEnv, err)
	}
	tb.Logf("testserver: seed %d (rerun with %s=%d)", seed, seedEnv, seed)
	return seed
}

// ParseSeed returns the seed written in s, an unsigned decimal integer, or
// a new one from the clock when s is empty: the rule of [Seed] and of the
// faultproxy -seed flag. The error wraps strconv's.
func ParseSeed(s string) (uint64, error) {
	if s == "" {
		return uint64(time.Now().UnixNano()), nil
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("testserver: seed %q is not an unsigned integer: %w", s, err)
	}
	return n, nil
}
