package conformance

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"
)

// The bases of a Result: how effects were observed.
const (
	basisCount  = "count"
	basisIDs    = "ids"
	basisBodies = "bodies"
)

// basis returns the strongest evidence the configuration gives.
func (r *runner) basis() string {
	switch {
	case r.cfg.Effects.CountURL != "":
		return basisCount
	case r.cfg.Effects.IDField != "":
		return basisIDs
	}
	return basisBodies
}

// describeEffects says, for the report, how effects are observed and what
// that can prove.
func (c Config) describeEffects() string {
	e := c.Effects
	var parts []string
	if e.CountURL != "" {
		parts = append(parts, fmt.Sprintf("count: GET %s, field %s (sees every effect, also those whose response was lost)", e.CountURL, e.CountField))
	}
	if e.IDField != "" {
		parts = append(parts, fmt.Sprintf("ids: field %s of 2xx bodies (sees the effects a response names)", e.IDField))
	}
	if e.VerifyURL != "" {
		parts = append(parts, fmt.Sprintf("verify: GET %s (each id named exists)", e.VerifyURL))
	}
	if len(parts) == 0 {
		return "bodies only: status and body compared; an extra effect with an identical response, or one whose response was lost, is not seen (the faults check needs -count-url)"
	}
	if e.CountURL == "" {
		parts = append(parts, "no count: an effect whose response was lost is not seen (the faults check needs -count-url)")
	}
	return strings.Join(parts, "; ")
}

// tally measures the effects of a check through the counter: the count at
// its start. The zero tally counts nothing.
type tally struct {
	on    bool
	start int64
}

// startTally reads the counter, when there is one.
func (r *runner) startTally(ctx context.Context) (tally, error) {
	if r.cfg.Effects.CountURL == "" {
		return tally{}, nil
	}
	n, err := r.count(ctx)
	return tally{on: true, start: n}, err
}

// effects returns how much the counter grew since t started.
func (r *runner) effects(ctx context.Context, t tally) (int64, error) {
	n, err := r.count(ctx)
	return n - t.start, err
}

// count reads the counter.
func (r *runner) count(ctx context.Context) (int64, error) {
	x := r.get(ctx, r.cfg.Effects.CountURL)
	if !x.ok2xx() {
		return 0, fmt.Errorf("GET %s: %s %s", r.cfg.Effects.CountURL, x.outcome(), clip(x.body))
	}
	v, ok := lookup(x.body, r.cfg.Effects.CountField)
	n, isNum := v.(json.Number)
	if !ok || !isNum {
		return 0, fmt.Errorf("GET %s: the body has no number at %q: %s", r.cfg.Effects.CountURL, r.cfg.Effects.CountField, clip(x.body))
	}
	f, err := n.Float64()
	if err != nil || f != math.Trunc(f) || math.Abs(f) > 1<<53 {
		return 0, fmt.Errorf("GET %s: %q is %s, not a whole number", r.cfg.Effects.CountURL, r.cfg.Effects.CountField, n)
	}
	return int64(f), nil
}

// id returns the resource id a 2xx response names; ok is false without
// IDField or when the body has no such field.
func (r *runner) id(x exchange) (string, bool) {
	if r.cfg.Effects.IDField == "" || !x.ok2xx() {
		return "", false
	}
	v, ok := lookup(x.body, r.cfg.Effects.IDField)
	switch v := v.(type) {
	case string:
		return v, ok && v != ""
	case json.Number:
		return v.String(), ok
	}
	return "", false
}

// verify looks the id up through VerifyURL; nil when there is none to use
// or it answered 2xx.
func (r *runner) verify(ctx context.Context, id string) error {
	if r.cfg.Effects.VerifyURL == "" {
		return nil
	}
	u := strings.ReplaceAll(r.cfg.Effects.VerifyURL, "{id}", url.PathEscape(id))
	if x := r.get(ctx, u); !x.ok2xx() {
		return fmt.Errorf("GET %s: %s, want 2xx", u, x.outcome())
	}
	return nil
}

// errNoJSON: a body that is not one JSON value.
var errNoJSON = errors.New("not JSON")

// lookup returns the value at the dotted path of a JSON object body, with
// numbers as json.Number.
func lookup(body []byte, path string) (any, bool) {
	v, err := decodeJSON(body)
	if err != nil {
		return nil, false
	}
	for _, name := range strings.Split(path, ".") {
		obj, ok := v.(map[string]any)
		if !ok {
			return nil, false
		}
		if v, ok = obj[name]; !ok {
			return nil, false
		}
	}
	return v, true
}

// decodeJSON decodes one JSON value, numbers as json.Number.
func decodeJSON(body []byte) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, errNoJSON
	}
	if dec.More() {
		return nil, errNoJSON
	}
	return v, nil
}
