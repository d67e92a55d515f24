package rpcidem

import (
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"

	"github.com/idemkit/idem/internal/wire"
	"github.com/idemkit/idem/server"
)

// TestOutcomeEntriesAreTheHeaders: the metadata entries are the HTTP
// headers of docs/CONTRACT.md §4 lower-cased, with the same values.
func TestOutcomeEntriesAreTheHeaders(t *testing.T) {
	for name, header := range map[string]string{MetadataOperationState: wire.HeaderOperationState, MetadataOperationRef: wire.HeaderOperationRef,
		MetadataSafeNewKey: wire.HeaderSafeNewKey, MetadataKeyExpires: wire.HeaderKeyExpires} {
		assert.Equal(t, strings.ToLower(header), name)
	}
	exp := time.Date(2026, 12, 7, 1, 2, 3, 0, time.UTC)
	got := OutcomeEntries(server.Outcome{State: "completed", Ref: "ab12", Expires: exp})
	assert.Equal(t, map[string]string{MetadataOperationState: "completed", MetadataOperationRef: "ab12",
		MetadataSafeNewKey: "false", MetadataKeyExpires: exp.Format(http.TimeFormat)}, got)
	assert.Equal(t, map[string]string{MetadataOperationState: "none", MetadataSafeNewKey: "true"},
		OutcomeEntries(server.Outcome{State: "none", SafeNewKey: true}), "no reference, no expiry")
	assert.Nil(t, OutcomeEntries(server.Outcome{}), "a call that passed through says nothing")
}

// TestErrorInfoOfARefusal: the problem, and where the operation stands.
func TestErrorInfoOfARefusal(t *testing.T) {
	info := ErrorInfo(server.Refusal{Problem: "key-in-flight", Outcome: server.Outcome{State: "in-flight", Ref: "ab12"}})
	assert.Equal(t, "KEY_IN_FLIGHT", info.GetReason())
	assert.Equal(t, wire.ErrorDomain, info.GetDomain())
	assert.Equal(t, map[string]string{"problem": "key-in-flight", wire.InfoOperationState: "in-flight", wire.InfoOperationRef: "ab12", wire.InfoSafeNewKey: "false"},
		info.GetMetadata())
}

// TestCopyOutcome: the outcome entries, and only them, reach the header.
func TestCopyOutcome(t *testing.T) {
	h := http.Header{}
	CopyOutcome(h, map[string][]string{MetadataOperationState: {"in-flight"}, MetadataSafeNewKey: {"false"}, "x-other": {"1"}})
	assert.Equal(t, http.Header{wire.HeaderOperationState: {"in-flight"}, wire.HeaderSafeNewKey: {"false"}}, h)
}
