package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/server"
)

// route is the Leased route of the abandoned operations: POST /v1/charges,
// as the payments example names it.
const route = "POST /v1/charges"

// abandon makes n abandoned operations of route, keys prefix-1 ..
// prefix-n. The first is real: a Leased request through the middleware
// whose handler records the recovery point "recorded" (as the example's
// charge does) and then answers 502, which ends its lease at once. The
// others are that record cloned in SQL, column for column, but for the
// key, its scope hash (a hash of the key, not the middleware's, which the
// reconciler never computes) and the fencing token: each then has the
// stored request, recovery point and lease of a real abandoned charge. The
// table is analyzed afterwards, as autovacuum would do after such growth.
func abandon(ctx context.Context, pool *pgxpool.Pool, store server.Store, prefix string, n int) error {
	template := prefix + "-template"
	if err := abandonOne(store, template); err != nil {
		return err
	}
	cols, err := recordColumns(ctx, pool)
	if err != nil {
		return err
	}
	var sel []string
	for _, c := range cols {
		switch c {
		case "scope_hash":
			sel = append(sel, "sha256(convert_to($2 || '-' || g, 'UTF8'))")
		case "idem_key":
			sel = append(sel, "$2 || '-' || g")
		case "token":
			sel = append(sel, "gen_random_uuid()")
		default:
			sel = append(sel, "r."+c)
		}
	}
	clone := fmt.Sprintf(`INSERT INTO idem_records (%s) SELECT %s FROM idem_records AS r, generate_series(1, $1) AS g
WHERE r.idem_key = $3`, strings.Join(cols, ", "), strings.Join(sel, ", "))
	tag, err := pool.Exec(ctx, clone, n, prefix, template)
	if err != nil {
		return fmt.Errorf("cloning the abandoned record: %w", err)
	}
	if tag.RowsAffected() != int64(n) {
		return fmt.Errorf("cloned %d records, want %d", tag.RowsAffected(), n)
	}
	if _, err := pool.Exec(ctx, `DELETE FROM idem_records WHERE idem_key = $1`, template); err != nil {
		return err
	}
	_, err = pool.Exec(ctx, `ANALYZE idem_records`)
	return err
}

// abandonOne abandons one operation under key through the middleware.
func abandonOne(store server.Store, key string) error {
	mux := http.NewServeMux()
	leased := server.Middleware(store, server.Config{Mode: server.Leased, Scope: scope, Logger: slog.New(slog.DiscardHandler)})
	mux.Handle(route, leased(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		lease, _ := server.LeaseFrom(r.Context())
		data, _ := json.Marshal(map[string]string{"gateway_charge_id": "gwch_bench"})
		if err := lease.Checkpoint(r.Context(), "recorded", data); err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.WriteHeader(http.StatusBadGateway) // the lease ends: abandoned
	})))
	req := httptest.NewRequest(http.MethodPost, "/v1/charges",
		strings.NewReader(`{"account_id":"acct-01","amount_cents":1234,"currency":"EUR"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	rec := httptest.NewRecorder()
	mux.ServeHTTP(rec, req)
	if rec.Code != http.StatusBadGateway {
		return fmt.Errorf("the template request answered %d: %s", rec.Code, rec.Body)
	}
	return nil
}

func scope(*http.Request) (string, string) { return tenant, "client" }

// recordColumns lists the columns of idem_records, in order.
func recordColumns(ctx context.Context, pool *pgxpool.Pool) ([]string, error) {
	rows, err := pool.Query(ctx, `SELECT column_name FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name = 'idem_records' ORDER BY ordinal_position`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var cols []string
	for rows.Next() {
		var c string
		if err := rows.Scan(&c); err != nil {
			return nil, err
		}
		cols = append(cols, c)
	}
	return cols, rows.Err()
}

// answers are the reconcile function's answers, from memory: for each key
// prefix-i, Completed with a 201 the size of a charge's.
func answers(prefix string, n int) map[string]server.Settlement {
	out := make(map[string]server.Settlement, n)
	header := http.Header{"Content-Type": {"application/json"}}
	for i := 1; i <= n; i++ {
		key := fmt.Sprintf("%s-%d", prefix, i)
		body := fmt.Sprintf(`{"charge_id":"ch_%026d","account_id":"acct-01","amount_cents":1234,"currency":"EUR",`+
			`"balance_cents":%d,"gateway_charge_id":"gwch_%026d"}`+"\n", i, 1_000_000+i, i)
		out[key] = server.Settlement{Answer: server.Completed, Status: http.StatusCreated, Header: header, Body: []byte(body)}
	}
	return out
}
