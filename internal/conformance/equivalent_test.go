package conformance

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEquivalentJSON(t *testing.T) {
	in := `{"account_id":"acc-1","amount_cents":100.50,"nested":{"b":1,"a":[1,2]},"s":"<&>"}`
	out, ok := equivalentJSON([]byte(in))
	require.True(t, ok)
	assert.NotEqual(t, in, string(out))
	want := "{\n    \"s\" : \"<&>\",\n    \"nested\" : {\"b\":1,\"a\":[1,2]},\n" +
		"    \"amount_cents\" : 100.50,\n    \"account_id\" : \"acc-1\"\n}\n"
	assert.Equal(t, want, string(out), "members reversed, values (numbers too) as written")
	var a, b any
	require.NoError(t, json.Unmarshal([]byte(in), &a))
	require.NoError(t, json.Unmarshal(out, &b))
	assert.Equal(t, a, b, "the same JSON")
}

func TestEquivalentJSONNeedsAnObject(t *testing.T) {
	for _, in := range []string{"", "[1,2]", `"s"`, `{"a":1} {"b":2}`, `{"a":}`, "not json"} {
		_, ok := equivalentJSON([]byte(in))
		assert.False(t, ok, in)
	}
}
