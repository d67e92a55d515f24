package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/idemkit/idem/examples/payments/api"
)

// accounts is how many accounts the payments spread over, so that 16
// requests in flight rarely wait for one account's row lock.
const accounts = 1000

// tenant owns the accounts and the keys.
const tenant = "bench"

// dbTarget is where a run's pools connect: a connection string (a URL or
// key=value), and the schema their search_path selects, "" for the
// server's default.
type dbTarget struct{ dsn, schema string }

// open opens a pool of conns on d.
func (d dbTarget) open(ctx context.Context, conns int) (*pgxpool.Pool, error) {
	cfg, err := pgxpool.ParseConfig(d.dsn)
	if err != nil {
		return nil, err
	}
	if d.schema != "" {
		cfg.ConnConfig.RuntimeParams["search_path"] = d.schema
	}
	cfg.MaxConns = int32(conns)
	return pgxpool.NewWithConfig(ctx, cfg)
}

// database gives the run a database of its own: a private cluster started
// for it, or a schema of its own at c.db. Its clean-up stops the cluster
// and removes it, or drops the schema.
func database(ctx context.Context, c config) (dbTarget, func(), error) {
	if c.db != "" {
		schema, drop, err := ownSchema(ctx, c.db)
		return dbTarget{dsn: c.db, schema: schema}, drop, err
	}
	dsn, stop, err := privateCluster(ctx, c.port, c.pgOptions)
	return dbTarget{dsn: dsn}, stop, err
}

// privateCluster runs initdb in a temporary directory and starts a
// server on port with autovacuum on, options, and the defaults otherwise,
// as the postgres user when this process runs as root (initdb refuses
// root).
func privateCluster(ctx context.Context, port int, options string) (string, func(), error) {
	dir, err := os.MkdirTemp("", "idem-scale-")
	if err != nil {
		return "", nil, err
	}
	asUser := func(name string, args ...string) *exec.Cmd { return exec.CommandContext(ctx, name, args...) }
	if os.Geteuid() == 0 {
		if err := chownTo(dir, "postgres"); err != nil {
			os.RemoveAll(dir)
			return "", nil, err
		}
		asUser = func(name string, args ...string) *exec.Cmd {
			return exec.CommandContext(ctx, "runuser", append([]string{"-u", "postgres", "--", name}, args...)...)
		}
	}
	data := filepath.Join(dir, "data")
	remove := func() { os.RemoveAll(dir) }
	if out, err := asUser(pgBin("initdb"), "-D", data, "-U", "root", "-A", "trust", "-E", "UTF8", "--no-sync").CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("initdb: %w: %s", err, out)
	}
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c autovacuum=on %s", port, dir, options)
	if out, err := asUser(pgBin("pg_ctl"), "-D", data, "-l", filepath.Join(dir, "log"), "-o", opts, "-w", "start").CombinedOutput(); err != nil {
		remove()
		return "", nil, fmt.Errorf("pg_ctl start: %w: %s", err, out)
	}
	stop := func() {
		// Not ctx: the clean-up runs after an interrupt too.
		cmd := exec.Command(pgBin("pg_ctl"), "-D", data, "-m", "fast", "-w", "stop")
		if os.Geteuid() == 0 {
			cmd = exec.Command("runuser", "-u", "postgres", "--", pgBin("pg_ctl"), "-D", data, "-m", "fast", "-w", "stop")
		}
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "scale: pg_ctl stop: %v: %s (the cluster is in %s)\n", err, out, dir)
			return
		}
		remove()
	}
	return fmt.Sprintf("postgres://root@127.0.0.1:%d/postgres?sslmode=disable", port), stop, nil
}

// pgBin returns the PostgreSQL program name: as found on the PATH, else
// in the newest /usr/lib/postgresql/<version>/bin (Debian's packages put
// initdb and pg_ctl there, not on the PATH).
func pgBin(name string) string {
	if _, err := exec.LookPath(name); err == nil {
		return name
	}
	found, _ := filepath.Glob("/usr/lib/postgresql/*/bin/" + name)
	best, bestVersion := name, -1
	for _, f := range found {
		v, err := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(f))))
		if err == nil && v > bestVersion {
			best, bestVersion = f, v
		}
	}
	return best
}

// chownTo gives dir to the named user.
func chownTo(dir, name string) error {
	u, err := user.Lookup(name)
	if err != nil {
		return err
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	return os.Chown(dir, uid, gid)
}

// ownSchema makes a schema of its own at dsn and returns its name; the
// clean-up drops it.
func ownSchema(ctx context.Context, dsn string) (string, func(), error) {
	schema := "scale_bench_" + strings.ToLower(rand.Text()[:12])
	conn, err := pgx.Connect(ctx, dsn)
	if err != nil {
		return "", nil, err
	}
	defer conn.Close(ctx)
	if _, err := conn.Exec(ctx, "CREATE SCHEMA "+schema); err != nil {
		return "", nil, err
	}
	drop := func() {
		if c, err := pgx.Connect(context.Background(), dsn); err == nil {
			_, _ = c.Exec(context.Background(), "DROP SCHEMA "+schema+" CASCADE")
			_ = c.Close(context.Background())
		}
	}
	return schema, drop, nil
}

// setUp applies the payments example's schema, sets idem_records's
// autovacuum scale factors to vacuumScale unless it is 0, and funds the
// accounts.
func setUp(ctx context.Context, pool *pgxpool.Pool, vacuumScale float64) error {
	if err := api.Migrate(ctx, pool); err != nil {
		return err
	}
	if vacuumScale > 0 {
		_, err := pool.Exec(ctx, fmt.Sprintf(`ALTER TABLE idem_records SET (autovacuum_vacuum_scale_factor = %g,
			autovacuum_vacuum_insert_scale_factor = %g)`, vacuumScale, vacuumScale))
		if err != nil {
			return err
		}
	}
	_, err := pool.Exec(ctx, `INSERT INTO accounts (tenant, id, currency, balance_cents)
		SELECT $1, 'acct-' || g, 'EUR', 1::bigint << 60 FROM generate_series(0, $2 - 1) AS g`, tenant, accounts)
	if err != nil {
		return errors.Join(errors.New("funding the accounts"), err)
	}
	return nil
}
