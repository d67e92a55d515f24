package localclaim

import "testing"

func TestSetCountsEachAttempt(t *testing.T) {
	var s Set
	a, b := [32]byte{1}, [32]byte{2}
	if s.Has(a) {
		t.Fatal("Has(a) on an empty Set = true, want false")
	}
	s.Add(a)
	s.Add(a) // a duplicate won the lock before the first attempt removed its own
	s.Remove(a)
	if !s.Has(a) {
		t.Error("Has(a) after two adds and one remove = false, want true")
	}
	if s.Has(b) {
		t.Error("Has(b) = true, want false")
	}
	s.Remove(a)
	if s.Has(a) {
		t.Error("Has(a) after as many removes as adds = true, want false")
	}
}
