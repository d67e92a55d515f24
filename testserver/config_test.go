package testserver

import (
	"testing"
	"time"
)

// The zero Config's fields resolve, once, to the defaults their docs
// state; fields that are set are kept.
func TestConfigWithDefaults(t *testing.T) {
	got := Config{}.withDefaults()
	want := Config{Addr: "127.0.0.1:0", KeyHeader: "Idempotency-Key", HoldTimeout: 10 * time.Second}
	if got.Addr != want.Addr || got.KeyHeader != want.KeyHeader || got.HoldTimeout != want.HoldTimeout {
		t.Errorf("Config{}.withDefaults() = {Addr: %q, KeyHeader: %q, HoldTimeout: %s}, want {%q, %q, %s}",
			got.Addr, got.KeyHeader, got.HoldTimeout, want.Addr, want.KeyHeader, want.HoldTimeout)
	}
	set := Config{Addr: "[::1]:0", KeyHeader: "X-Idempotency-Key", HoldTimeout: time.Second}
	if got := set.withDefaults(); got.Addr != set.Addr || got.KeyHeader != set.KeyHeader || got.HoldTimeout != set.HoldTimeout {
		t.Errorf("withDefaults changed fields that were set: %+v, want %+v", got, set)
	}
}
