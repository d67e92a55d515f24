package rpcidem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem"
)

func TestLocalCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{context.DeadlineExceeded, codeDeadlineExceeded},
		{fmt.Errorf("wait: %w", idem.ErrDeadline), codeDeadlineExceeded},
		{context.Canceled, codeCanceled},
		{errors.New("idem: circuit open"), codeUnavailable},
	} {
		assert.Equal(t, tt.want, LocalCode(tt.err), "LocalCode(%v)", tt.err)
	}
}

func TestNewTransportPanicsOnBase(t *testing.T) {
	assert.PanicsWithValue(t, "base set", func() {
		NewTransport(idem.Config{Base: http.DefaultTransport}, http.DefaultTransport, "base set")
	})
	assert.NotNil(t, NewTransport(idem.Config{}, http.DefaultTransport, "base set"))
}

func TestCallAndAnswers(t *testing.T) {
	type call struct{ name string }
	c := &call{name: "pay"}
	got, ok := CallFrom[*call](WithCall(context.Background(), c))
	assert.True(t, ok)
	assert.Same(t, c, got)
	_, ok = CallFrom[*call](context.Background())
	assert.False(t, ok)

	var a Answers[string]
	r1, r2 := &http.Response{}, &http.Response{}
	a.Put(r1, "first")
	v, ok := a.Get(r1)
	assert.True(t, ok)
	assert.Equal(t, "first", v)
	_, ok = a.Get(r2)
	assert.False(t, ok)
}
