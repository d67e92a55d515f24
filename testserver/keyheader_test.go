package testserver

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"
)

// Config.KeyHeader names the header whose key is a request's operation id
// (issue 18), so that the events and the checker follow a client and a
// server that use another name than Idempotency-Key.
func TestConfigKeyHeader(t *testing.T) {
	s := startServer(t, &app{}, Config{KeyHeader: "X-Idempotency-Key"}, nil)
	c := &http.Client{Timeout: 5 * time.Second}
	for i, hdr := range []map[string]string{
		{"x-idempotency-key": "k1"},
		{"X-Idempotency-Key": `"k1"`},
		{"Idempotency-Key": "other"}, // not the configured header: no operation
	} {
		req, _ := http.NewRequest(http.MethodPost, s.URL+"/p", strings.NewReader("{}"))
		for k, v := range hdr {
			req.Header.Set(k, v)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	var got []string
	for _, ev := range waitEvents(t, s, 3) {
		got = append(got, fmt.Sprintf("%s/%s#%d", ev.Key, ev.Op, ev.Attempt))
	}
	if want := "[k1/k1#1 k1/k1#2 /#1]"; fmt.Sprint(got) != want {
		t.Fatalf("events %v, want %v", got, want)
	}
	if _, err := NewProxy([]string{"http://127.0.0.1:1"}, Config{KeyHeader: "bad header"}); err == nil {
		t.Error("NewProxy(KeyHeader \"bad header\") = nil error, want one")
	}
}
