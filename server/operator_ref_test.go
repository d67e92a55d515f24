package server

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// recordsOnly is a RecordStore that is not a RefReader, as a third-party
// store written before RefReader is.
type recordsOnly struct{ RecordStore }

func TestLookupRefOnAStoreWithoutRefReaderIsUnsupported(t *testing.T) {
	op := NewOperator(recordsOnly{NewMemoryStore()}, OperatorConfig{})
	_, err := op.LookupRef(context.Background(), OperationRef("", "", "POST /x", "k"), false)
	require.Error(t, err)
	assert.True(t, errors.Is(err, errors.ErrUnsupported), "err = %v, want errors.ErrUnsupported", err)
}

func TestParseOperationRef(t *testing.T) {
	ref := OperationRef("t", "p", "POST /x", "k")
	for _, bad := range []string{"", "k", ref[:63], ref + "0", "zz" + ref[2:]} {
		_, err := ParseOperationRef(bad)
		assert.ErrorIs(t, err, ErrBadScope, "ParseOperationRef(%q)", bad)
	}
	scope, err := ParseOperationRef(" " + ref + "\n")
	require.NoError(t, err)
	assert.Equal(t, ref, refOf(scope))
}
