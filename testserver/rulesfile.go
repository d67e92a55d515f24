package testserver

import (
	"bytes"
	"encoding/json"
	"fmt"
	"time"
)

// ParseRules parses a rules file, the JSON form of []Rule that the
// faultproxy program reads:
//
//	{"rules": [
//	  {"name": "first-attempt-dropped",
//	   "match": {"method": "POST", "path": "/payments*", "attempt": {"min": 1, "max": 1}},
//	   "script": ["drop-reset"]},
//	  {"name": "retry-storm",
//	   "script": [{"kind": "drop-close"}, {"kind": "status", "status": 503, "retry_after": "1s"}]},
//	  {"name": "outage", "match": {"from": "10s", "until": "15s"},
//	   "mix": [{"p": 1, "fault": "status;status=503;retry-after=2"}]},
//	  {"name": "chaos", "mix": [{"p": 0.05, "fault": "drop-reset"}, {"p": 0.05, "fault": "partial-body"}]}
//	]}
//
// Field names are the snake_case forms of the Go names (retry_after,
// retry_after_date, retry_first); every duration (from, until, delay,
// retry_after) is a Go duration string ("250ms") or a number of seconds,
// fractional ones included (1.5); a fault is an object or a string in the
// [ParseFault] syntax. Unknown fields and invalid rules are errors.
func ParseRules(data []byte) ([]Rule, error) {
	var file struct {
		Rules []jsonRule `json:"rules"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&file); err != nil {
		return nil, fmt.Errorf("%w: rules file: %v", ErrBadRule, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: rules file: data after the top-level object", ErrBadRule)
	}
	rules := make([]Rule, len(file.Rules))
	for i, jr := range file.Rules {
		rules[i] = jr.rule()
	}
	if err := ValidateRules(rules); err != nil {
		return nil, err
	}
	return rules, nil
}

type jsonRule struct {
	Name   string       `json:"name"`
	Match  jsonMatch    `json:"match"`
	Script []jsonFault  `json:"script"`
	Mix    []jsonChance `json:"mix"`
}

type jsonMatch struct {
	Method  string            `json:"method"`
	Path    string            `json:"path"`
	Header  map[string]string `json:"header"`
	Key     string            `json:"key"`
	Attempt jsonRange         `json:"attempt"`
	Index   jsonRange         `json:"index"`
	From    jsonDuration      `json:"from"`
	Until   jsonDuration      `json:"until"`
}

type jsonChance struct {
	P     float64   `json:"p"`
	Fault jsonFault `json:"fault"`
}

func (jr jsonRule) rule() Rule {
	m := jr.Match
	r := Rule{Name: jr.Name, Match: Match{
		Method: m.Method, Path: m.Path, Header: m.Header, Key: m.Key,
		Attempt: Range(m.Attempt), Index: Range(m.Index),
		From: time.Duration(m.From), Until: time.Duration(m.Until),
	}}
	for _, f := range jr.Script {
		r.Script = append(r.Script, Fault(f))
	}
	for _, c := range jr.Mix {
		r.Mix = append(r.Mix, Chance{P: c.P, Fault: Fault(c.Fault)})
	}
	return r
}

// jsonRange is a [Range] in a rules file: {"min": 1, "max": 2}.
type jsonRange struct {
	Min int `json:"min"`
	Max int `json:"max"`
}

// jsonFault is a [Fault] read from an object or a [ParseFault] string.
type jsonFault Fault

func (f *jsonFault) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		parsed, err := ParseFault(s)
		*f = jsonFault(parsed)
		return err
	}
	var v struct {
		Kind           FaultKind    `json:"kind"`
		Status         int          `json:"status"`
		RetryAfter     jsonDuration `json:"retry_after"`
		RetryAfterDate bool         `json:"retry_after_date"`
		Delay          jsonDuration `json:"delay"`
		Bytes          int          `json:"bytes"`
		RetryFirst     bool         `json:"retry_first"`
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return err
	}
	*f = jsonFault{
		Kind: v.Kind, Status: v.Status, RetryAfter: time.Duration(v.RetryAfter),
		RetryAfterDate: v.RetryAfterDate, Delay: time.Duration(v.Delay),
		Bytes: v.Bytes, RetryFirst: v.RetryFirst,
	}
	return nil
}

// jsonDuration is a Go duration string, or a number of seconds.
type jsonDuration time.Duration

func (d *jsonDuration) UnmarshalJSON(data []byte) error {
	var secs float64
	if json.Unmarshal(data, &secs) == nil {
		*d = jsonDuration(secs * float64(time.Second))
		return nil
	}
	var s string
	if err := json.Unmarshal(data, &s); err != nil {
		return fmt.Errorf("duration must be a string like \"1.5s\" or a number of seconds, got %s", data)
	}
	v, err := time.ParseDuration(s)
	if err != nil {
		return err
	}
	*d = jsonDuration(v)
	return nil
}
