package pgtest

import (
	"context"
	"strings"
	"testing"
)

func TestSchemaIsolation(t *testing.T) {
	a, b := Pool(t), Pool(t)
	ctx := context.Background()
	var sa, sb string
	if err := a.QueryRow(ctx, "select current_schema()").Scan(&sa); err != nil {
		t.Fatal(err)
	}
	if err := b.QueryRow(ctx, "select current_schema()").Scan(&sb); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(sa, "idem_test_") || sa == sb {
		t.Errorf("schemas = %q, %q; want two distinct idem_test_ schemas", sa, sb)
	}
	if _, err := a.Exec(ctx, "create table t (x int)"); err != nil {
		t.Fatal(err)
	}
	if _, err := b.Exec(ctx, "create table t (x int)"); err != nil {
		t.Fatalf("second schema is not isolated: %v", err)
	}
}

// TestReachIsCheckedOncePerURL: the second check of a URL returns the
// first one's result without dialling again.
func TestReachIsCheckedOncePerURL(t *testing.T) {
	const url = "postgres://root@127.0.0.1:1/none?sslmode=disable&connect_timeout=5"
	first := reach(url)
	if first == nil {
		t.Fatalf("reach(%q) = nil, want a refused connection", url)
	}
	if again := reach(url); again != first {
		t.Fatalf("reach(%q) again = %v, want the cached error %v", url, again, first)
	}
}
