package idem

import (
	"math/rand/v2"
	"testing"
	"time"
)

func TestFullJitterDistribution(t *testing.T) {
	b := Backoff{}
	rng := rand.New(rand.NewPCG(1, 2))
	for n := 0; n < 10; n++ {
		bound := min(defaultBackoffCap, defaultBackoffBase<<n)
		const draws = 10000
		var sum time.Duration
		for i := 0; i < draws; i++ {
			d := b.Delay(n, 0, rng.Float64())
			if d < 0 || d > bound {
				t.Fatalf("Delay(%d) = %v, want in [0, %v]", n, d, bound)
			}
			sum += d
		}
		mean, want := float64(sum)/draws, float64(bound)/2
		if mean < 0.95*want || mean > 1.05*want {
			t.Errorf("mean Delay(%d) over %d draws = %v, want within 5%% of %v",
				n, draws, time.Duration(mean), time.Duration(want))
		}
	}
}

func TestBackoffDelay(t *testing.T) {
	base, cap := 100*time.Millisecond, time.Second
	tests := []struct {
		name string
		b    Backoff
		n    int
		prev time.Duration
		u    float64
		want time.Duration
	}{
		{"full low", Backoff{Base: base, Cap: cap}, 2, 0, 0, 0},
		{"full mid", Backoff{Base: base, Cap: cap}, 2, 0, 0.5, 200 * time.Millisecond},
		{"full capped", Backoff{Base: base, Cap: cap}, 10, 0, 0.5, 500 * time.Millisecond},
		{"full huge n", Backoff{Base: base, Cap: cap}, 1000, 0, 0.5, 500 * time.Millisecond},
		{"full u=1 stays below bound", Backoff{Base: base, Cap: cap}, 0, 0, 1, base - 1},
		{"full NaN", Backoff{Base: base, Cap: cap}, 0, 0, -1, 0},
		{"equal low", Backoff{Base: base, Cap: cap, Jitter: EqualJitter}, 1, 0, 0, 100 * time.Millisecond},
		{"equal high", Backoff{Base: base, Cap: cap, Jitter: EqualJitter}, 1, 0, 0.5, 150 * time.Millisecond},
		{"decorrelated first", Backoff{Base: base, Cap: cap, Jitter: DecorrelatedJitter}, 0, 0, 0.5, 200 * time.Millisecond},
		{"decorrelated grows", Backoff{Base: base, Cap: cap, Jitter: DecorrelatedJitter}, 3, 300 * time.Millisecond, 0.5, 500 * time.Millisecond},
		{"decorrelated capped", Backoff{Base: base, Cap: cap, Jitter: DecorrelatedJitter}, 3, 10 * time.Second, 0.99, base + time.Duration(0.99*float64(cap-base))},
		{"none", Backoff{Base: base, Cap: cap, Jitter: NoJitter}, 3, 0, 0.7, 800 * time.Millisecond},
		{"zero value defaults", Backoff{}, 0, 0, 0.5, 50 * time.Millisecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.u
			if u < 0 {
				u = nan()
			}
			if got := tt.b.Delay(tt.n, tt.prev, u); got != tt.want {
				t.Errorf("Delay(%d, %v, %v) = %v, want %v", tt.n, tt.prev, tt.u, got, tt.want)
			}
		})
	}
}

func TestDecorrelatedJitterStaysInBounds(t *testing.T) {
	b := Backoff{Jitter: DecorrelatedJitter}
	rng := rand.New(rand.NewPCG(3, 4))
	var prev time.Duration
	for i := 0; i < 10000; i++ {
		d := b.Delay(i, prev, rng.Float64())
		if d < defaultBackoffBase || d > defaultBackoffCap {
			t.Fatalf("Delay after %v = %v, want in [%v, %v]", prev, d, defaultBackoffBase, defaultBackoffCap)
		}
		prev = d
	}
}

func nan() float64 {
	zero := 0.0
	return zero / zero
}
