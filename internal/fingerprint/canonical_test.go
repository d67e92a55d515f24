package fingerprint

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
			v2, _ := canonicalJSONV2([]byte(tt.in))
			assert.Equal(t, tt.want, string(v2), "canonicalJSONV2(%q): no names fold together", tt.in)
		})
	}
}

// Under sha256-v3 an object with two names that differ but that
// encoding/json matches as one field keeps its members in document order;
// sha256-v2 sorted them (issue 22, D2).
func TestCanonicalJSONKeepsTheOrderOfNamesThatFoldTogether(t *testing.T) {
	tests := []struct {
		name, in, v3, v2 string
	}{
		{"ASCII case", `{"b":0,"amount_cents":100,"AMOUNT_CENTS":5000}`,
			`{"b":0,"amount_cents":100,"AMOUNT_CENTS":5000}`, `{"AMOUNT_CENTS":5000,"amount_cents":100,"b":0}`},
		{"ASCII case reversed", `{"AMOUNT_CENTS":5000,"amount_cents":100}`,
			`{"AMOUNT_CENTS":5000,"amount_cents":100}`, `{"AMOUNT_CENTS":5000,"amount_cents":100}`},
		{"Kelvin sign", `{"k":1,"\u212a":2}`, `{"k":1,"K":2}`, `{"k":1,"K":2}`},
		{"Kelvin sign reversed", `{"\u212a":2,"k":1}`, `{"K":2,"k":1}`, `{"k":1,"K":2}`},
		{"long s", `{"ſ":1,"S":2}`, `{"ſ":1,"S":2}`, `{"S":2,"ſ":1}`},
		{"non-ASCII case", `{"é":1,"É":2}`, `{"é":1,"É":2}`, `{"É":2,"é":1}`},
		{"lone surrogates read as U+FFFD", `{"\udc00":1,"\ud800":2}`, `{"\udc00":1,"\ud800":2}`, `{"\ud800":2,"\udc00":1}`},
		{"lone surrogate and U+FFFD", `{"\ufffd":1,"\ud800":2}`, `{"�":1,"\ud800":2}`, `{"\ud800":2,"�":1}`},
		{"escaped and plain", `{"\u0061":1,"A":2}`, `{"a":1,"A":2}`, `{"A":2,"a":1}`},
		{"only the object that has them", `{"x":{"b":1,"B":2},"a":{"d":1,"c":2}}`,
			`{"a":{"c":2,"d":1},"x":{"b":1,"B":2}}`, `{"a":{"c":2,"d":1},"x":{"B":2,"b":1}}`},
		{"one name twice is sorted", `{"b":1,"a":2,"a":1}`, `{"a":2,"a":1,"b":1}`, `{"a":2,"a":1,"b":1}`},
		{"no folding across names", `{"ab":1,"Ac":2,"aB2":3}`, `{"Ac":2,"aB2":3,"ab":1}`, `{"Ac":2,"aB2":3,"ab":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v3, ok := canonicalJSON([]byte(tt.in))
			assert.True(t, ok)
			assert.Equal(t, tt.v3, string(v3), "canonicalJSON(%q)", tt.in)
			again, _ := canonicalJSON(v3)
			assert.Equal(t, string(v3), string(again), "canonical form is a fixed point")
			v2, _ := canonicalJSONV2([]byte(tt.in))
			assert.Equal(t, tt.v2, string(v2), "canonicalJSONV2(%q)", tt.in)
		})
	}
}

// The documents that sha256-v3 tells apart are ones that encoding/json
// reads differently: the last of the names that match a field wins.
func TestNamesThatFoldTogetherAreReadByOrder(t *testing.T) {
	pairs := [][2]string{
		{`{"amount_cents":100,"AMOUNT_CENTS":5000}`, `{"AMOUNT_CENTS":5000,"amount_cents":100}`},
		{`{"amount_cents":100,"amount_cent\u017f":5000}`, `{"amount_cent\u017f":5000,"amount_cents":100}`},
	}
	for _, p := range pairs {
		var a, b struct {
			AmountCents int `json:"amount_cents"`
		}
		assert.NoError(t, json.Unmarshal([]byte(p[0]), &a))
		assert.NoError(t, json.Unmarshal([]byte(p[1]), &b))
		assert.NotEqual(t, a.AmountCents, b.AmountCents, "encoding/json reads %s and %s alike", p[0], p[1])
		v3a, _ := canonicalJSON([]byte(p[0]))
		v3b, _ := canonicalJSON([]byte(p[1]))
		assert.NotEqual(t, string(v3a), string(v3b), "sha256-v3 canonicalises %s and %s alike", p[0], p[1])
		v2a, _ := canonicalJSONV2([]byte(p[0]))
		v2b, _ := canonicalJSONV2([]byte(p[1]))
		assert.Equal(t, string(v2a), string(v2b), "sha256-v2, kept for its records, sorted them alike")
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
