package routers

import (
	"os"
	"testing"

	"github.com/idemkit/idem/internal/pgtest"
)

// TestMain runs the tests under pgtest.Main, which says in one line how
// many Postgres tests skipped.
func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }
