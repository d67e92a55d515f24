package server

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"time"
)

// errPosition is returned by [ParsePosition] for text that String did not
// make.
var errPosition = errors.New("server: not a position of the operations in flight")

// positionOf is the position of rec in the list of operations in flight.
func positionOf(rec Record) Position {
	return Position{CreatedAt: rec.CreatedAt, Tenant: rec.Tenant, Principal: rec.Principal, Route: rec.Route, Key: rec.Key}
}

// positionText is the JSON of a [Position]'s text form.
type positionText struct {
	T         time.Time `json:"t"`
	Tenant    string    `json:"te,omitempty"`
	Principal string    `json:"p,omitempty"`
	Route     string    `json:"r"`
	Key       string    `json:"k"`
}

// String is p's text form (URL-safe base64), "" for the zero [Position].
func (p Position) String() string {
	if p.IsZero() {
		return ""
	}
	b, _ := json.Marshal(positionText{T: p.CreatedAt, Tenant: p.Tenant, Principal: p.Principal, Route: p.Route, Key: p.Key})
	return base64.RawURLEncoding.EncodeToString(b)
}

// IsZero reports the zero [Position]: the start of the list.
func (p Position) IsZero() bool {
	return p.CreatedAt.IsZero() && p.Tenant == "" && p.Principal == "" && p.Route == "" && p.Key == ""
}

// ParsePosition reads a [Position]'s text form; "" is the zero Position.
func ParsePosition(s string) (Position, error) {
	if s == "" {
		return Position{}, nil
	}
	b, err := base64.RawURLEncoding.DecodeString(s)
	var t positionText
	if err != nil || json.Unmarshal(b, &t) != nil || t.T.IsZero() {
		return Position{}, errPosition
	}
	return Position{CreatedAt: t.T, Tenant: t.Tenant, Principal: t.Principal, Route: t.Route, Key: t.Key}, nil
}
