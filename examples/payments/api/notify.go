package api

import (
	"net/http"
	"strings"

	"github.com/idemkit/idem/outbox"
)

// PaymentCreated returns the outbox message that tells the Receiver at
// receiverURL (its base URL) that p was made: POST /v1/notifications with
// p's payment.created as JSON. Its name is EventPaymentCreated, so its key
// derives from the payment's operation (see outbox.DeriveKey).
func PaymentCreated(receiverURL string, p Payment) outbox.Message {
	return outbox.Message{
		Name: EventPaymentCreated, Method: http.MethodPost,
		URL:    strings.TrimSuffix(receiverURL, "/") + "/v1/notifications",
		Header: http.Header{"Content-Type": {"application/json"}},
		Body:   notification(p),
	}
}

// NotifyTo makes every payment enqueue a payment.created notification to
// the Receiver at receiverURL in o, in the payment's own transaction: the
// notification is sent if and only if the payment commits. Call it before
// the backend serves; it returns b.
func (b *PostgresBackend) NotifyTo(o *outbox.Outbox, receiverURL string) *PostgresBackend {
	b.notify, b.to = o, receiverURL
	return b
}

// NotifyTo makes every payment enqueue a payment.created notification to
// the Receiver at receiverURL in the memory outbox q, atomically with the
// payment (under the backend's lock). Call it before the backend serves;
// it returns m.
func (m *MemoryBackend) NotifyTo(q *outbox.Memory, receiverURL string) *MemoryBackend {
	m.notify, m.to = q, receiverURL
	return m
}
