package rpcidem

import (
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

// TestCallHeader: the key comes from keyOf when it is set (even when the
// metadata has one), else from the metadata; the fingerprinted entries
// are taken by their HTTP names, and the absent ones are left out.
func TestCallHeader(t *testing.T) {
	md := map[string][]string{"idempotency-key": {"from-md"}, "x-tenant-region": {"eu"}}
	lookup := func(name string) []string { return md[strings.ToLower(name)] }
	fp := []string{"X-Tenant-Region", "x-absent"}

	h := CallHeader(nil, lookup, fp)
	assert.Equal(t, http.Header{"Idempotency-Key": {"from-md"}, "X-Tenant-Region": {"eu"}}, h)

	h = CallHeader(func() string { return "from-field" }, lookup, fp)
	assert.Equal(t, []string{"from-field"}, h.Values("Idempotency-Key"))

	h = CallHeader(func() string { return "" }, lookup, nil)
	assert.Empty(t, h, "a field without a key leaves the call unkeyed, whatever the metadata says")
}
