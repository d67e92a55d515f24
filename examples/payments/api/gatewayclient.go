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
	"net/url"
	"strings"

	"github.com/idemkit/idem/internal/wire"
)

var (
	// errDeclined: the gateway declined the charge (402), a final answer.
	errDeclined = errors.New("api: the gateway declined the charge")
	// errGateway wraps every other failure to get a charge from the gateway.
	errGateway = errors.New("api: card gateway unavailable")
	// errNoCharge: a lookup found no charge under the key (404): none was
	// made or declined, and none is being processed.
	errNoCharge = errors.New("api: the gateway has no charge under this key")
	// errChargeRunning: a lookup found a charge under the key still being
	// processed (409); its outcome cannot be told yet.
	errChargeRunning = errors.New("api: the gateway is still processing the charge under this key")
)

// gatewayClient calls the gateway's POST /v1/charges and GET
// /v1/charges/by-key/{key}.
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
	status, data, err := c.do(req)
	switch {
	case err != nil:
		return gatewayCharge{}, err
	case status == http.StatusPaymentRequired:
		return gatewayCharge{}, errDeclined
	case status != http.StatusCreated:
		return gatewayCharge{}, fmt.Errorf("%w: it answered %d %s: %s", errGateway, status, http.StatusText(status), bytes.TrimSpace(data))
	}
	var gc gatewayCharge
	if err := json.Unmarshal(data, &gc); err != nil || gc.ID == "" {
		return gatewayCharge{}, fmt.Errorf("%w: malformed charge %q", errGateway, data)
	}
	return gc, nil
}

// lookup asks the gateway what became of the charge requested under key:
// its outcome (charged or declined), errNoCharge when there is none,
// errChargeRunning while one is being processed, or an error wrapping
// errGateway when the gateway cannot tell.
func (c *gatewayClient) lookup(ctx context.Context, key string) (gatewayOutcome, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.url+"/v1/charges/by-key/"+url.PathEscape(key), nil)
	if err != nil {
		return gatewayOutcome{}, fmt.Errorf("%w: %w", errGateway, err)
	}
	status, data, err := c.do(req)
	switch {
	case err != nil:
		return gatewayOutcome{}, err
	case status == http.StatusNotFound:
		return gatewayOutcome{}, errNoCharge
	case status == http.StatusConflict:
		return gatewayOutcome{}, errChargeRunning
	case status != http.StatusOK:
		return gatewayOutcome{}, fmt.Errorf("%w: the lookup answered %d %s: %s", errGateway, status, http.StatusText(status), bytes.TrimSpace(data))
	}
	var out gatewayOutcome
	err = json.Unmarshal(data, &out)
	if err != nil || out.Key != key || (out.Status != outcomeDeclined && (out.Status != outcomeCharged || out.ID == "")) {
		return gatewayOutcome{}, fmt.Errorf("%w: malformed lookup answer %q", errGateway, data)
	}
	return out, nil
}

// do sends req and reads the response: its status and body, or an error
// wrapping errGateway when none came whole.
func (c *gatewayClient) do(req *http.Request) (status int, body []byte, err error) {
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, fmt.Errorf("%w: %w", errGateway, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBodyBytes))
	if err != nil {
		return 0, nil, fmt.Errorf("%w: reading the response: %w", errGateway, err)
	}
	return resp.StatusCode, data, nil
}
