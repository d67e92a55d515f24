package server

import "time"

// The test-only hooks of the conformance run (conformance_test.go, package
// server_test), which storetest drives from outside the package.

// NewMemoryStoreAt is a MemoryStore on the clock now that reports each
// wait for a running attempt to waiting (+1 as it starts, -1 as it ends).
func NewMemoryStoreAt(now func() time.Time, waiting func(delta int)) *MemoryStore {
	m := NewMemoryStore()
	m.now, m.waiting = now, waiting
	return m
}

// SetClockOffset makes s judge time by the database clock plus offset().
func SetClockOffset(s *PostgresStore, offset func() time.Duration) { s.clock = offset }

// SetSQLClockOffset makes s judge time by the database clock plus offset().
func SetSQLClockOffset(s *PostgresSQLStore, offset func() time.Duration) { s.pg.clock = offset }
