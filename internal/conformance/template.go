package conformance

import (
	"fmt"
	"strconv"
	"strings"
)

// Template is a request body with placeholders, so that each operation of
// a run is a distinct intent where the API needs it:
//
//	{{n}}     the operation's number in the run: 1, 2, 3, ...
//	{{uuid}}  a random UUIDv4, fresh per operation
//
// Every request of one operation (its retries, its duplicates) sends the
// same rendering. Any other "{{" is an error, so that a misspelt
// placeholder is not sent as text. The zero Template is an empty body.
type Template struct {
	parts []part
}

// part is literal text, or a placeholder when name is set.
type part struct {
	text, name string
}

// The placeholders of a Template.
const (
	placeholderN    = "n"
	placeholderUUID = "uuid"
)

// ParseTemplate parses s.
func ParseTemplate(s string) (Template, error) {
	var t Template
	for s != "" {
		i := strings.Index(s, "{{")
		if i < 0 {
			t.parts = append(t.parts, part{text: s})
			break
		}
		if i > 0 {
			t.parts = append(t.parts, part{text: s[:i]})
		}
		end := strings.Index(s[i:], "}}")
		if end < 0 {
			return Template{}, fmt.Errorf("%w: body template: %q at offset %d has no closing }}", ErrConfig, "{{", i)
		}
		name := strings.TrimSpace(s[i+2 : i+end])
		if name != placeholderN && name != placeholderUUID {
			return Template{}, fmt.Errorf("%w: body template: unknown placeholder {{%s}} (known: {{n}}, {{uuid}})", ErrConfig, name)
		}
		t.parts = append(t.parts, part{name: name})
		s = s[i+end+2:]
	}
	return t, nil
}

// Varies reports whether t has a placeholder, so that two operations send
// different bodies.
func (t Template) Varies() bool {
	for _, p := range t.parts {
		if p.name != "" {
			return true
		}
	}
	return false
}

// Render returns the body of operation n, whose UUID is id.
func (t Template) Render(n int, id string) []byte {
	var b strings.Builder
	for _, p := range t.parts {
		switch p.name {
		case placeholderN:
			b.WriteString(strconv.Itoa(n))
		case placeholderUUID:
			b.WriteString(id)
		default:
			b.WriteString(p.text)
		}
	}
	return []byte(b.String())
}
