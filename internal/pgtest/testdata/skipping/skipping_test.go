// Package skipping is the fixture of pgtest's TestMainCountsSkips: two
// Postgres tests and one that needs no database, under pgtest.Main.
package skipping

import (
	"os"
	"testing"

	"github.com/idemkit/idem/internal/pgtest"
)

func TestMain(m *testing.M) { os.Exit(pgtest.Main(m)) }

func TestFirst(t *testing.T) { pgtest.DatabaseURL(t) }

func TestSecond(t *testing.T) { pgtest.SchemaURL(t) }

func TestNoDatabase(t *testing.T) {}
