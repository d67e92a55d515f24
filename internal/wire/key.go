package wire

import (
	"errors"
	"fmt"
	"strings"
)

// MaxKeyLen is the longest valid key, in bytes, after sf-string quotes are
// removed.
const MaxKeyLen = 255

// ValidateKey reports whether key is a valid bare key: 1 to MaxKeyLen
// printable ASCII characters (0x21-0x7E). The error says what is wrong and
// never echoes more than a short prefix of the key.
func ValidateKey(key string) error {
	if key == "" {
		return errors.New("key is empty")
	}
	if len(key) > MaxKeyLen {
		return fmt.Errorf("key is %d bytes long, the maximum is %d", len(key), MaxKeyLen)
	}
	for i := 0; i < len(key); i++ {
		if c := key[i]; c < 0x21 || c > 0x7e {
			return fmt.Errorf("key has byte 0x%02x at offset %d; only printable ASCII 0x21-0x7E is allowed", c, i)
		}
	}
	return nil
}

// ParseKey returns the key carried by an Idempotency-Key field value, in
// either form: a bare token (8e03978e-...) or an RFC 8941 sf-string
// ("8e03978e-..."). Both forms of one key give the same result.
func ParseKey(field string) (string, error) {
	field = strings.Trim(field, " \t")
	if !strings.HasPrefix(field, `"`) {
		return field, ValidateKey(field)
	}
	key, err := unquote(field)
	if err != nil {
		return "", err
	}
	return key, ValidateKey(key)
}

// unquote decodes an RFC 8941 sf-string: DQUOTE *(unescaped / "\" DQUOTE /
// "\" "\") DQUOTE, where unescaped is printable ASCII 0x20-0x7E.
func unquote(s string) (string, error) {
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '"':
			if i != len(s)-1 {
				return "", fmt.Errorf("sf-string key has text after its closing quote at offset %d", i)
			}
			return b.String(), nil
		case c == '\\':
			i++
			if i >= len(s) || (s[i] != '"' && s[i] != '\\') {
				return "", fmt.Errorf("sf-string key has a bad escape at offset %d", i-1)
			}
			b.WriteByte(s[i])
		case c < 0x20 || c > 0x7e:
			return "", fmt.Errorf("sf-string key has byte 0x%02x at offset %d", c, i)
		default:
			b.WriteByte(c)
		}
	}
	return "", errors.New("sf-string key has no closing quote")
}

// FormatKey returns the field value that carries key: the key itself, or
// with sfString the RFC 8941 sf-string form with quotes and escapes. A key
// that starts with a double quote is always sent as an sf-string, since its
// bare form would be read as a (broken) sf-string.
func FormatKey(key string, sfString bool) string {
	if !sfString && !strings.HasPrefix(key, `"`) {
		return key
	}
	var b strings.Builder
	b.Grow(len(key) + 2)
	b.WriteByte('"')
	for i := 0; i < len(key); i++ {
		if key[i] == '"' || key[i] == '\\' {
			b.WriteByte('\\')
		}
		b.WriteByte(key[i])
	}
	b.WriteByte('"')
	return b.String()
}
