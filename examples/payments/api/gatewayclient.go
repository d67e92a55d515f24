package api

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strings"

	"github.com/idemkit/idem/internal/wire"
)

var (
	// errDeclined: the gateway declined the charge (402), a final answer.
	errDeclined = errors.New("api: the gateway declined the charge")
	// errGateway wraps every other failure to get a charge from the gateway.
	errGateway = errors.New("api: card gateway unavailable")
)

// gatewayClient calls the gateway's POST /v1/charges.
type gatewayClient struct {
	url  string
	http *http.Client
}

func newGatewayClient(url string, client *http.Client) *gatewayClient {
	if client == nil {
		client = defaultGatewayClient()
	}
	return &gatewayClient{url: strings.TrimSuffix(url, "/"), http: client}
}

// downstreamKey derives the gateway's Idempotency-Key from the incoming
// key and its scope: every attempt of one operation, on any node, sends the
// same key to the gateway, and no two operations (of any tenant) share one.
func downstreamKey(c caller, key string) string {
	sum := sha256.Sum256([]byte(c.Tenant + "\x00" + c.Principal + "\x00POST /v1/charges\x00" + key))
	return "charge-" + hex.EncodeToString(sum[:])
}

// charge asks the gateway for a charge under key. The gateway charges once
// per key and replays its answer afterwards, so calling again with the same
// key after a crash never charges twice. It returns errDeclined for a 402.
func (c *gatewayClient) charge(ctx context.Context, key string, in gatewayRequest) (gatewayCharge, error) {
	body, _ := json.Marshal(in) // a struct of strings and ints cannot fail
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.url+"/v1/charges", bytes.NewReader(body))
	if err != nil {
		return gatewayCharge{}, fmt.Errorf("%w: %w", errGateway, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(wire.HeaderKey, key)
	resp, err := c.http.Do(req)
	if err != nil {
		return gatewayCharge{}, fmt.Errorf("%w: %w", errGateway, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	switch {
	case err != nil:
		return gatewayCharge{}, fmt.Errorf("%w: reading the response: %w", errGateway, err)
	case resp.StatusCode == http.StatusPaymentRequired:
		return gatewayCharge{}, errDeclined
	case resp.StatusCode != http.StatusCreated:
		return gatewayCharge{}, fmt.Errorf("%w: it answered %s: %s", errGateway, resp.Status, bytes.TrimSpace(data))
	}
	var gc gatewayCharge
	if err := json.Unmarshal(data, &gc); err != nil || gc.ID == "" {
		return gatewayCharge{}, fmt.Errorf("%w: malformed charge %q", errGateway, data)
	}
	return gc, nil
}
