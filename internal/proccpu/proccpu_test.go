//go:build unix

package proccpu

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestUsedGrowsWithWork(t *testing.T) {
	before := Used()
	x := 0
	for i := range 50_000_000 {
		x += i % 7
	}
	assert.NotZero(t, x)
	assert.Greater(t, Used(), before)
}
