package wire

import (
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

func TestProblemName(t *testing.T) {
	tests := map[string]string{
		"urn:idem:problem:key-reused":                  "key-reused",
		"https://api.example.com/problems/key-missing": "key-missing",
		"key-invalid": "key-invalid",
		"":            "",
	}
	for typ, want := range tests {
		if got := ProblemName(typ); got != want {
			t.Errorf("ProblemName(%q) = %q, want %q", typ, got, want)
		}
	}
}

func TestWriteReadProblem(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteProblem(rec, Problem{Type: DefaultProblemPrefix + ProblemKeyInFlight, Title: "in flight", Status: 409, RetryAfter: 3})
	if rec.Code != 409 {
		t.Fatalf("status = %d, want 409", rec.Code)
	}
	ct := rec.Header().Get("Content-Type")
	p, ok := ReadProblem(ct, rec.Body, 1<<16)
	if !ok {
		t.Fatalf("ReadProblem(%q) failed", ct)
	}
	if p.Name() != ProblemKeyInFlight || p.RetryAfter != 3 || p.Status != 409 {
		t.Errorf("round trip = %+v", p)
	}
	if _, ok := ReadProblem("application/json", strings.NewReader(`{"type":"x"}`), 100); ok {
		t.Error("ReadProblem accepted application/json")
	}
	if !IsProblem("Application/Problem+JSON; charset=utf-8") {
		t.Error("IsProblem is not case-insensitive or rejects parameters")
	}
}

func TestWriteProblemDoesNotEscapeHTML(t *testing.T) {
	rec := httptest.NewRecorder()
	WriteProblem(rec, Problem{Type: "urn:x:bad", Title: "Bad", Status: 400, Detail: `expected "Bearer <tenant>:<principal>" & more`})
	want := `{"type":"urn:x:bad","title":"Bad","status":400,"detail":"expected \"Bearer <tenant>:<principal>\" & more"}`
	if got := rec.Body.String(); got != want {
		t.Errorf("body = %s, want %s", got, want)
	}
	if got := rec.Header().Get("Content-Length"); got != strconv.Itoa(len(want)) {
		t.Errorf("Content-Length = %s, want %d", got, len(want))
	}
}
