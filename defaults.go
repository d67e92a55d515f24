package idem

import "time"

// orDefault sets *v to def when it is zero or negative: a configuration
// field left at zero (or set out of range) means its default. A field
// whose negative value means something of its own is not filled with it.
func orDefault[T int | uint32 | float64 | time.Duration](v *T, def T) {
	if *v <= 0 {
		*v = def
	}
}
