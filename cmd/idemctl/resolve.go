package main

import (
	"context"
	"fmt"
	"net/http"

	"github.com/idemkit/idem/server"
)

// runResolve settles an uncertain operation: applied, with the response
// every later retry replays, or not applied, which frees the key.
func runResolve(ctx context.Context, t *tool, args []string) error {
	fs := t.flags("resolve")
	op := scopeFlags(fs)
	applied := fs.Bool("applied", false, "the operation took effect: later retries replay -status, -content-type and -body")
	notApplied := fs.Bool("not-applied", false, "the operation did not take effect: the key is freed, the next retry runs it")
	status := fs.Int("status", 0, "with -applied: the status every later retry gets (200 to 499)")
	contentType := fs.String("content-type", "application/json", "with -applied: the response's Content-Type")
	body := fs.String("body", "", "with -applied: the response's body")
	by := fs.String("by", "", "who resolves it (required; kept with the record and logged)")
	reason := fs.String("reason", "", "why: a ticket, the downstream's evidence (required)")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	if err := parse(fs, args, 1); err != nil {
		return err
	}
	op.Key = fs.Arg(0)
	if *applied == *notApplied {
		fmt.Fprintln(t.e.stderr, "idemctl resolve: say -applied or -not-applied")
		return errUsage
	}
	res := server.Resolution{Applied: *applied, By: *by, Reason: *reason}
	if *applied {
		res.Response = &server.Response{Status: *status, Header: http.Header{"Content-Type": {*contentType}}, Body: []byte(*body)}
	}
	if !*yes {
		q := fmt.Sprintf("Resolve the operation of key %q on %q (tenant %q, principal %q) as %s?", op.Key, op.Route,
			op.Tenant, op.Principal, map[bool]string{true: "applied", false: "not applied (its key is freed)"}[*applied])
		if err := t.confirm(q); err != nil {
			return err
		}
	}
	rec, err := t.ops.Resolve(ctx, *op, res)
	if err != nil {
		return err
	}
	if t.g.json {
		return t.printJSON(map[string]any{"resolved": recordJSON(rec)})
	}
	fmt.Fprintf(t.e.stdout, "resolved: %s %q is now %s\n", op.Route, op.Key, rec.State)
	return nil
}
