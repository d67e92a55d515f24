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
