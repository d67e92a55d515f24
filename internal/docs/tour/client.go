package tour

import (
	"bytes"
	"context"
	"net/http"

	"github.com/idemkit/idem"
)

var client = idem.NewClient(idem.Config{}) // the defaults; safe for concurrent use: make one, share it

// Pay makes one payment, once: its attempts carry one Idempotency-Key, and
// ctx's deadline bounds every attempt and every wait between them.
func Pay(ctx context.Context, api string, payment []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, "POST", api+"/v1/payments", bytes.NewReader(payment))
	if err != nil {
		return nil, err
	}
	return client.Do(req) // err is an *idem.Error; errors.Is(err, idem.ErrOutcomeUnknown) if it may have paid
}
