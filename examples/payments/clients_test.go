package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/testserver"
)

// The verdict rules, the same as the e2e suite's (e2e/client_test.go).
func TestVerdicts(t *testing.T) {
	const created = `{"payment_id":"pay_1"}`
	responses := []struct {
		status int
		body   io.Reader
		want   testserver.OutcomeKind
	}{
		{201, strings.NewReader(created), testserver.OutcomeOK},
		{200, strings.NewReader(created), testserver.OutcomeOK},
		{201, strings.NewReader(`{}`), testserver.OutcomeUnknown},
		{201, io.MultiReader(strings.NewReader(created[:5]), iotest.ErrReader(io.ErrUnexpectedEOF)), testserver.OutcomeUnknown},
		{302, strings.NewReader(""), testserver.OutcomeUnknown},
		{304, strings.NewReader(""), testserver.OutcomeUnknown},
		{400, strings.NewReader(""), testserver.OutcomeFailed},
		{402, strings.NewReader(""), testserver.OutcomeFailed},
		{409, strings.NewReader(""), testserver.OutcomeFailed},
		{500, strings.NewReader(""), testserver.OutcomeUnknown},
		{502, strings.NewReader(created), testserver.OutcomeUnknown},
	}
	for _, c := range responses {
		t.Run(fmt.Sprint(c.status), func(t *testing.T) {
			resp := &http.Response{StatusCode: c.status, Status: fmt.Sprint(c.status), Body: io.NopCloser(c.body)}
			v := readVerdict(resp)
			assert.Equal(t, c.want, v.kind, "readVerdict(%d) = %s (%v), want %s", c.status, v.kind, v.err, c.want)
		})
	}
	callErrors := []struct {
		name string
		err  error
		want testserver.OutcomeKind
	}{
		{"may have taken effect", &url.Error{Op: "Post", Err: &idem.Error{MayHaveTakenEffect: true}}, testserver.OutcomeUnknown},
		{"certainly did not", &url.Error{Op: "Post", Err: &idem.Error{}}, testserver.OutcomeFailed},
		{"another error", errors.New("boom"), testserver.OutcomeUnknown},
	}
	for _, c := range callErrors {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, errorVerdict(c.err).kind)
		})
	}
}
