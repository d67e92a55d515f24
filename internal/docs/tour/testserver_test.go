package tour

import (
	"net/http"
	"testing"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/server"
	"github.com/idemkit/idem/testserver"
)

func TestLostResponses(t *testing.T) {
	var ledger testserver.Ledger   // what took effect
	var history testserver.History // what the client was told
	pay := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := testserver.InfoFrom(r.Context())
		ledger.Record(info.Op, "") // one effect each time the handler runs
		w.WriteHeader(http.StatusCreated)
	})
	mux := http.NewServeMux()
	mux.Handle("POST /v1/payments", server.Middleware(server.NewMemoryStore(), server.Config{})(pay))
	srv := testserver.New(mux, testserver.Config{Rules: []testserver.Rule{
		{Script: []testserver.Fault{{Kind: testserver.FaultDropReset}}}, // attempt 1: handler ran, response lost
	}})
	defer srv.Close()
	for range 20 {
		key := idem.NewKey()
		resp, err := Pay(idem.WithKey(t.Context(), key), srv.URL, nil)
		if err != nil || resp.StatusCode != http.StatusCreated {
			t.Fatalf("payment %s: %v, %v", key, resp, err)
		}
		resp.Body.Close()
		history.OK(key, "")
	}
	if err := testserver.Check(&ledger, &history).Err(); err != nil {
		t.Fatal(err) // a payment made twice, or an ok never made
	}
}
