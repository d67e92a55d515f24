package conformance

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTemplateRender(t *testing.T) {
	tests := []struct {
		in, want string
		varies   bool
	}{
		{"", "", false},
		{`{"a": 1}`, `{"a": 1}`, false},
		{`{"n": {{n}}, "ref": "op-{{ uuid }}-{{n}}"}`, `{"n": 7, "ref": "op-U-7"}`, true},
		{"{{uuid}}", "U", true},
		{"{ {n} }", "{ {n} }", false},
	}
	for _, tt := range tests {
		tpl, err := ParseTemplate(tt.in)
		require.NoError(t, err, tt.in)
		assert.Equal(t, tt.want, string(tpl.Render(7, "U")), tt.in)
		assert.Equal(t, tt.varies, tpl.Varies(), tt.in)
	}
}

func TestTemplateErrors(t *testing.T) {
	for _, in := range []string{`{"n": {{num}}}`, `{"n": {{n}`, "{{}}"} {
		_, err := ParseTemplate(in)
		assert.True(t, errors.Is(err, ErrConfig), "ParseTemplate(%q) = %v, want ErrConfig", in, err)
	}
}
