package testserver

import (
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"testing"
)

// TestKindTableRows: every row acts exactly once, before or after the
// handler, and names a kind of its own.
func TestKindTableRows(t *testing.T) {
	seen := map[FaultKind]bool{}
	for _, row := range kindTable {
		if (row.before == nil) == (row.after == nil) {
			t.Errorf("row %q: before set %v, after set %v; want exactly one", row.kind, row.before != nil, row.after != nil)
		}
		if row.kind == FaultNone || seen[row.kind] {
			t.Errorf("row %q: empty or listed twice", row.kind)
		}
		seen[row.kind] = true
	}
}

// TestKindTableHasEveryConstant: each FaultKind constant of fault.go but
// FaultNone has a row, in the order of declaration, so a new constant
// without a row fails here.
func TestKindTableHasEveryConstant(t *testing.T) {
	declared := faultKindConstants(t)
	if !slices.Equal(declared, Kinds()) {
		t.Fatalf("Kinds() = %v, want the constants of fault.go in order: %v", Kinds(), declared)
	}
}

// faultKindConstants reads the values of the FaultKind constants declared
// in fault.go, FaultNone left out.
func faultKindConstants(t *testing.T) []FaultKind {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "fault.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var out []FaultKind
	ast.Inspect(f, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok || vs.Type == nil || len(vs.Values) != 1 {
			return true
		}
		if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != "FaultKind" {
			return true
		}
		lit, ok := vs.Values[0].(*ast.BasicLit)
		if !ok {
			t.Fatalf("%s: value is not a string literal", vs.Names[0].Name)
		}
		v, err := strconv.Unquote(lit.Value)
		if err != nil {
			t.Fatal(err)
		}
		if v != "" {
			out = append(out, FaultKind(v))
		}
		return true
	})
	return out
}
