package server

import "fmt"

// PostgresStore keeps a response in the headers column, in the stored form
// of every store ([Response.MarshalBinary]), and its status in the status
// column too, for the operator's lists and people reading the table; the
// body column stays NULL. The headers column is the one that holds the new
// form because versions before it refuse what they find there (a header
// block of an unknown format) rather than replay a record without its
// headers and body.
//
// Records written before the stored form hold the header block alone
// (headerFormat, or the text of the jsonb of older versions) in headers,
// beside status and body. They keep replaying: responseOf reads both. The
// older form can be dropped from responseOf one retention period (the
// longest [Config.Retention] of the routes) after every node runs this
// version, and the status and body columns then only serve the lists.

// responseValues returns the values of the state, status and headers
// columns for res, as sqlComplete and sqlInsertDone take them: a NULL
// status (nil) for a reconciler's result-unavailable, which has none.
func responseValues(res *Response) (state string, status *int, headers []byte) {
	if res.Status != 0 {
		status = &res.Status
	}
	headers, _ = res.MarshalBinary() // never fails
	return string(res.state()), status, headers
}

// responseOf reads the response that a record in state holds in its status,
// headers and body columns: nil while it runs, or for a record of an
// earlier version with no status.
func responseOf(state recordState, status *int, headers, body []byte) (*Response, error) {
	if state == stateRunning {
		return nil, nil
	}
	if len(headers) > 0 && headers[0] == responseFormat {
		res := &Response{}
		if err := res.UnmarshalBinary(headers); err != nil {
			return nil, fmt.Errorf("server: stored response: %w", err)
		}
		return res, nil
	}
	if status == nil {
		return nil, nil
	}
	h, err := decodeHeader(headers)
	if err != nil {
		return nil, fmt.Errorf("server: stored headers: %w", err)
	}
	return &Response{Unavailable: state == stateUnavailable, Status: *status, Header: h, Body: body}, nil
}
