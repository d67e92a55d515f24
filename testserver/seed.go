package testserver

import (
	"os"
	"strconv"
	"testing"
	"time"
)

// SeedEnv is the environment variable that Seed reads.
const SeedEnv = "IDEM_SEED"

// Seed returns the seed for a seeded test: the value of $IDEM_SEED when
// set (so a failing run can be replayed), else a new one from the clock.
// It logs the seed and how to rerun with it, which testing prints when the
// test fails (or with -v). A malformed $IDEM_SEED fails the test.
func Seed(tb testing.TB) uint64 {
	tb.Helper()
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv(SeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			tb.Fatalf("testserver: %s=%q is not an unsigned integer: %v", SeedEnv, v, err)
		}
		seed = n
	}
	tb.Logf("testserver: seed %d (rerun with %s=%d)", seed, SeedEnv, seed)
	return seed
}
