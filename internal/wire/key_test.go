package wire

import (
	"strings"
	"testing"
)

func TestParseKey(t *testing.T) {
	tests := []struct {
		name, field, want string
		wantErr           bool
	}{
		{"bare uuid", "8e03978e-40d5-43e8-bc93-6894a57f9324", "8e03978e-40d5-43e8-bc93-6894a57f9324", false},
		{"sf-string", `"8e03978e-40d5-43e8-bc93-6894a57f9324"`, "8e03978e-40d5-43e8-bc93-6894a57f9324", false},
		{"sf-string escapes", `"a\"b\\c"`, `a"b\c`, false},
		{"surrounding space", "  abc\t", "abc", false},
		{"one char", "x", "x", false},
		{"max length", strings.Repeat("k", MaxKeyLen), strings.Repeat("k", MaxKeyLen), false},
		{"empty", "", "", true},
		{"empty sf-string", `""`, "", true},
		{"too long", strings.Repeat("k", MaxKeyLen+1), "", true},
		{"too long quoted", `"` + strings.Repeat("k", MaxKeyLen+1) + `"`, "", true},
		{"inner space", "a b", "", true},
		{"sf-string inner space", `"a b"`, "", true},
		{"control char", "a\x01b", "", true},
		{"non-ascii", "clé", "", true},
		{"unterminated", `"abc`, "", true},
		{"text after quote", `"abc"d`, "", true},
		{"bad escape", `"a\nb"`, "", true},
		{"trailing backslash", `"a\`, "", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseKey(tt.field)
			if (err != nil) != tt.wantErr {
				t.Fatalf("ParseKey(%q) error = %v, wantErr %v", tt.field, err, tt.wantErr)
			}
			if err == nil && got != tt.want {
				t.Errorf("ParseKey(%q) = %q, want %q", tt.field, got, tt.want)
			}
		})
	}
}

func TestFormatKeyRoundTrip(t *testing.T) {
	for _, key := range []string{"abc", `a"b`, `a\b`, `"`, strings.Repeat("z", MaxKeyLen)} {
		for _, sf := range []bool{false, true} {
			got, err := ParseKey(FormatKey(key, sf))
			if err != nil || got != key {
				t.Errorf("ParseKey(FormatKey(%q, %v)) = %q, %v; want %q", key, sf, got, err, key)
			}
		}
	}
	if got := FormatKey("abc", true); got != `"abc"` {
		t.Errorf(`FormatKey("abc", true) = %s, want "abc"`, got)
	}
}
