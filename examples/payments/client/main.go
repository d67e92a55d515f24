// Command client sends one payment to the payments API with the idem SDK
// and prints every attempt it makes, so that you can watch a retry:
//
//	go run ./examples/payments/server &
//	go run ./examples/payments/client -balance 10000     # creates acc-1, then pays
//	go run ./examples/payments/client -key 6b0f...      # resend: a replay
//
// Put the fault proxy in between to see retries (the key makes them safe):
//
//	go run ./testserver/cmd/faultproxy -listen 127.0.0.1:9090 -upstream http://127.0.0.1:8080 -rules rules.json
//	go run ./examples/payments/client -url http://127.0.0.1:9090
//
// Flags: -url, -token (tenant:principal), -account, -amount (cents),
// -currency, -reference, -key (default: a new UUIDv4), -balance (PUT the
// account first), -timeout (the whole call, retries included),
// -attempt-timeout, -attempts. It exits 1 when the payment failed, and says
// whether it may have taken effect (then resend it with the same -key).
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/idemkit/idem"
	"github.com/idemkit/idem/internal/wire"
)

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case errors.Is(err, flag.ErrHelp):
	case errors.Is(err, errUsage):
		os.Exit(2)
	case err != nil:
		fmt.Fprintln(os.Stderr, "client:", err)
		os.Exit(1)
	}
}

var errUsage = errors.New("usage")

// options are the program's flags.
type options struct {
	url, token, key              string
	account, currency, reference string
	amount, balance              int64
	timeout, attemptTimeout      time.Duration
	attempts                     int
}

func parseFlags(args []string, stderr io.Writer) (options, error) {
	var o options
	fs := flag.NewFlagSet("client", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&o.url, "url", "http://127.0.0.1:8080", "base `URL` of the payments API")
	fs.StringVar(&o.token, "token", "acme:alice", "bearer token, `tenant:principal` (demo authentication)")
	fs.StringVar(&o.key, "key", "", "Idempotency-Key; empty means a new UUIDv4")
	fs.StringVar(&o.account, "account", "acc-1", "account `id`")
	fs.Int64Var(&o.amount, "amount", 2500, "amount in `cents`")
	fs.StringVar(&o.currency, "currency", "EUR", "currency")
	fs.StringVar(&o.reference, "reference", "", "the payment's reference (a free label)")
	fs.Int64Var(&o.balance, "balance", -1, "when >= 0, PUT the account with this balance (`cents`) first")
	fs.DurationVar(&o.timeout, "timeout", 10*time.Second, "deadline of the whole call, retries included")
	fs.DurationVar(&o.attemptTimeout, "attempt-timeout", 2*time.Second, "bound of each attempt")
	fs.IntVar(&o.attempts, "attempts", idem.DefaultMaxAttempts, "most attempts on the wire")
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return o, err
		}
		return o, errUsage
	}
	if fs.NArg() > 0 || o.timeout <= 0 || o.attempts < 1 {
		fmt.Fprintln(stderr, "client: no arguments are taken; -timeout and -attempts must be positive")
		return o, errUsage
	}
	if o.key == "" {
		o.key = idem.NewKey() // chosen before the first attempt: a resend with -key is the same payment
	}
	o.url = strings.TrimSuffix(o.url, "/")
	return o, nil
}

// run is the program.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	o, err := parseFlags(args, stderr)
	if err != nil {
		return err
	}
	client := idem.NewClient(idem.Config{
		MaxAttempts:    o.attempts,
		AttemptTimeout: o.attemptTimeout,
		Observer:       printer(stdout),
	})
	if o.balance >= 0 {
		fmt.Fprintf(stdout, "PUT %s/v1/accounts/%s  balance_cents: %d\n", o.url, o.account, o.balance)
		if err := putAccount(ctx, client, o); err != nil {
			return err
		}
	}
	return pay(ctx, client, o, stdout)
}

// printer is an Observer that prints each attempt and each wait.
func printer(w io.Writer) idem.Observer {
	return idem.Observer{
		OnAttempt: func(a idem.Attempt) {
			outcome := a.Certainty.String()
			switch {
			case a.Status > 0:
				outcome = fmt.Sprintf("%d %s", a.Status, http.StatusText(a.Status))
				if a.Problem != "" {
					outcome += " (" + a.Problem + ")"
				}
			case a.Err != nil:
				outcome += ": " + a.Err.Error()
			}
			resent := ""
			if a.Wire > 1 {
				resent = fmt.Sprintf(" (%d requests on the wire: net/http re-sent it after a reused connection broke)", a.Wire)
			}
			fmt.Fprintf(w, "attempt %d: %s in %v%s\n", a.Number, outcome, a.Elapsed.Round(time.Millisecond), resent)
		},
		OnRetry: func(a idem.Attempt, wait time.Duration) {
			same := ""
			if a.Key != "" {
				same = " with the same key"
			}
			fmt.Fprintf(w, "  retrying%s in %v\n", same, wait.Round(time.Millisecond))
		},
	}
}

// pay sends the payment and prints the answer.
func pay(ctx context.Context, client *http.Client, o options, stdout io.Writer) error {
	body, _ := json.Marshal(map[string]any{
		"account_id": o.account, "amount_cents": o.amount, "currency": o.currency, "reference": o.reference,
	})
	ctx, cancel := context.WithTimeout(idem.WithKey(ctx, o.key), o.timeout)
	defer cancel()
	fmt.Fprintf(stdout, "POST %s/v1/payments  Idempotency-Key: %s\n", o.url, o.key)
	resp, err := send(ctx, client, o, http.MethodPost, "/v1/payments", body)
	var e *idem.Error
	if errors.As(err, &e) {
		if e.MayHaveTakenEffect {
			return fmt.Errorf("%w\nthe payment may have been made: resend it with -key %s to learn its outcome", err, o.key)
		}
		return fmt.Errorf("%w\nthe payment was not made", err)
	}
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	replayed := ""
	if resp.Header.Get(wire.HeaderReplayed) == "true" {
		replayed = "  (Idempotent-Replayed: a stored response; the payment was made once)"
	}
	fmt.Fprintf(stdout, "%s%s\n%s\n", resp.Status, replayed, bytes.TrimSpace(answer))
	if resp.StatusCode >= 300 {
		return fmt.Errorf("the API answered %s", resp.Status)
	}
	return nil
}

// putAccount creates the account or sets its balance (PUT: idempotent,
// retried without a key).
func putAccount(ctx context.Context, client *http.Client, o options) error {
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	body, _ := json.Marshal(map[string]any{"balance_cents": o.balance, "currency": o.currency})
	resp, err := send(ctx, client, o, http.MethodPut, "/v1/accounts/"+o.account, body)
	if err != nil {
		return fmt.Errorf("creating the account: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		answer, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return fmt.Errorf("creating the account: %s: %s", resp.Status, bytes.TrimSpace(answer))
	}
	return nil
}

func send(ctx context.Context, client *http.Client, o options, method, path string, body []byte) (*http.Response, error) {
	req, err := http.NewRequestWithContext(ctx, method, o.url+path, bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Authorization", "Bearer "+o.token)
	req.Header.Set("Content-Type", "application/json")
	return client.Do(req)
}
