package server

import (
	"encoding/json"
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestCanonicalJSON(t *testing.T) {
	tests := []struct {
		name, in, want string
	}{
		{"whitespace", " {\n\t\"a\" : 1 ,\r\n \"b\":[ 1 , 2 ] } ", `{"a":1,"b":[1,2]}`},
		{"keys sorted", `{"b":1,"a":{"d":1,"c":2}}`, `{"a":{"c":2,"d":1},"b":1}`},
		{"numbers as written", `[1.0, 1, 1e2, 1E2, -0, 0.10]`, `[1.0,1,1e2,1E2,-0,0.10]`},
		{"literals", `[true,false,null]`, `[true,false,null]`},
		{"empty containers", `{"a":{},"b":[]}`, `{"a":{},"b":[]}`},
		{"scalar", ` "x" `, `"x"`},
		{"escapes decoded", `"\u0041\/\u00e9\t"`, "\"A/é\\u0009\""},
		{"quote and backslash kept escaped", `"\"\\\u0022"`, `"\"\\\""`},
		{"surrogate pair joined", `"\ud83d\ude00"`, `"😀"`},
		{"lone surrogate kept", `"\uD800x"`, `"\ud800x"`},
		{"high then non-low", `"\ud800\u0041"`, `"\ud800A"`},
		{"escaped key sorts as decoded", `{"\u0062":1,"a":2}`, `{"a":2,"b":1}`},
		{"duplicate keys keep order", `{"a":2,"a":1}`, `{"a":2,"a":1}`},
		{"unicode as is", `{"é":"ü"}`, `{"é":"ü"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := canonicalJSON([]byte(tt.in))
			assert.True(t, ok)
			assert.Equal(t, tt.want, string(got), "canonicalJSON(%q)", tt.in)
			again, _ := canonicalJSON(got)
			assert.Equal(t, string(got), string(again), "canonical form is a fixed point")
			assert.True(t, json.Valid(got), "canonical form is valid JSON")
		})
	}
}

func TestCanonicalJSONRejectsNonJSON(t *testing.T) {
	for _, in := range []string{"", "   ", "a=1&b=2", `{"a":1} {"b":2}`, `{"a":}`, "\"\xff\"", `[1,]`, "{\"a\":\"\x01\"}"} {
		_, ok := canonicalJSON([]byte(in))
		assert.False(t, ok, "canonicalJSON(%q) accepted", in)
	}
}

func TestCanonicalJSONEquivalence(t *testing.T) {
	same := [][2]string{
		{`{"amount":10,"currency":"EUR"}`, "{\n  \"currency\": \"EUR\",\n  \"amount\": 10\n}"},
		{`["A"]`, `["\u0041"]`},
		{`{"a":[{"y":1,"x":2}]}`, `{"a":[{"x":2,"y":1}]}`},
	}
	for _, p := range same {
		a, _ := canonicalJSON([]byte(p[0]))
		b, _ := canonicalJSON([]byte(p[1]))
		assert.Equal(t, string(a), string(b), "%s vs %s", p[0], p[1])
	}
	different := [][2]string{
		{`{"amount":1}`, `{"amount":1.0}`},
		{`{"amount":1}`, `{"amount":"1"}`},
		{`[1,2]`, `[2,1]`},
		{`{"a":null}`, `{}`},
		{`{"a":1,"a":2}`, `{"a":2,"a":1}`},
		{`"\ud800"`, `"\ufffd"`},
		{`{"a":"b"}`, `{"a":"b "}`},
	}
	for _, p := range different {
		a, _ := canonicalJSON([]byte(p[0]))
		b, _ := canonicalJSON([]byte(p[1]))
		assert.NotEqual(t, string(a), string(b), "%s vs %s", p[0], p[1])
	}
}
