package idem

import (
	"strconv"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestPerHost: a host's state is made once and kept; get without newT
// makes none; a full table forgets every host, and a forgotten host's
// state is made anew.
func TestPerHost(t *testing.T) {
	var p perHost[int]
	made := 0
	newInt := func() *int { made++; n := made; return &n }

	assert.Nil(t, p.get("a", nil))
	a := p.get("a", newInt)
	assert.Same(t, a, p.get("a", newInt))
	assert.Same(t, a, p.get("a", nil))
	for i := 1; i < maxHostStates; i++ {
		p.get(strconv.Itoa(i), newInt)
	}
	assert.Same(t, a, p.get("a", nil), "a full table still holds its hosts")
	p.get("one-more", newInt)
	assert.Nil(t, p.get("a", nil), "past the bound, every host is forgotten")
	assert.NotSame(t, a, p.get("a", newInt))
}
