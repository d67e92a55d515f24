package server

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// Durability is what [CheckDurability] found: each setting of the database
// that decides what a crash or a failover can take from idem's promises (no
// double effect, no lost ok), with what it means in words. It is a report,
// not a verdict: Clean says whether any finding is a risk, and the caller
// decides what to do about it (log it, refuse to start). See
// docs/replication.md for the settings and the failover they prepare.
type Durability struct {
	// Findings lists one finding per setting, always in this order: role,
	// fsync, full_page_writes, synchronous_commit,
	// synchronous_standby_names.
	Findings []DurabilityFinding
}

// DurabilityFinding is one setting of the database and what it means for
// idem's promises.
type DurabilityFinding struct {
	// Name is the setting's name ("fsync", "synchronous_commit", ...), or
	// "role" for whether the connection is to a primary.
	Name string
	// Value is the setting as the server reports it to the pool's
	// sessions; synchronous_standby_names adds the standbys connected.
	Value string
	// Meaning says, in a sentence or two, what the value means for the
	// operations that idem answers.
	Meaning string
	// Risk is true when the value lets a crash or a failover lose an
	// operation already answered (a retry of it then runs it again), or
	// keeps the store from working at all.
	Risk bool
}

// Clean reports whether no finding is a risk.
func (d Durability) Clean() bool {
	for _, f := range d.Findings {
		if f.Risk {
			return false
		}
	}
	return true
}

// String renders the report, one finding a line, each marked "risk" or
// "ok".
func (d Durability) String() string {
	var b strings.Builder
	for _, f := range d.Findings {
		mark := "ok  "
		if f.Risk {
			mark = "risk"
		}
		fmt.Fprintf(&b, "%s %s = %s: %s\n", mark, f.Name, f.Value, f.Meaning)
	}
	return b.String()
}

// sqlDurability reads, in one round trip and on one connection, what
// [CheckDurability] judges. pg_stat_replication shows a standby's state
// only to roles with pg_read_all_stats (pg_monitor): for others it is
// NULL, counted as hidden.
const sqlDurability = `
SELECT current_setting('synchronous_commit'), current_setting('synchronous_standby_names'),
       current_setting('fsync'), current_setting('full_page_writes'), pg_is_in_recovery(),
       count(r.pid), count(*) FILTER (WHERE r.sync_state IN ('sync', 'quorum')),
       count(*) FILTER (WHERE r.pid IS NOT NULL AND r.state IS NULL)
FROM (SELECT 1) AS one LEFT JOIN pg_stat_replication r ON true`

// CheckDurability reads the settings of the database behind db that
// decide what a crash or a failover can lose (synchronous_commit,
// synchronous_standby_names and the standbys connected, fsync,
// full_page_writes, and whether the connection is to a primary) and says
// what each means for idem's promises. It reads them on one connection of
// db, as the pool's sessions see them (a synchronous_commit set for the
// pool's role or in its connection string counts). It returns an error
// only when the database could not be read; ctx governs the read. A
// server should call it at start and log the report (the payments
// example does); a deployment that must not run with a risk may refuse to
// start unless [Durability.Clean].
func CheckDurability(ctx context.Context, db DB) (Durability, error) {
	conn, err := db.Acquire(ctx)
	if err != nil {
		return Durability{}, fmt.Errorf("server: durability: %w", err)
	}
	defer conn.Release()
	var f durabilityFacts
	err = conn.QueryRow(ctx, sqlDurability).Scan(&f.syncCommit, &f.syncNames, &f.fsync, &f.fullPageWrites,
		&f.inRecovery, &f.standbys, &f.synchronous, &f.hidden)
	if err != nil {
		return Durability{}, fmt.Errorf("server: durability: %w", err)
	}
	return f.judge(), nil
}

// durabilityFacts is what sqlDurability read.
type durabilityFacts struct {
	syncCommit, syncNames string
	fsync, fullPageWrites string // "on" or "off"
	inRecovery            bool
	standbys              int // WAL receivers connected (pg_stat_replication)
	synchronous           int // of them, synchronous (sync or quorum)
	hidden                int // of them, whose state this role may not see
}

// judge turns the facts into findings.
func (f durabilityFacts) judge() Durability {
	return Durability{Findings: []DurabilityFinding{f.role(), f.fsyncFinding(), f.fullPageWritesFinding(), f.commitFinding(), f.replication()}}
}

func (f durabilityFacts) role() DurabilityFinding {
	if f.inRecovery {
		return DurabilityFinding{Name: "role", Value: "standby", Risk: true,
			Meaning: "the connection is to a standby in recovery, which takes no writes: every claim fails (503 store-unavailable); " +
				"point the pool at the primary (a multi-host URL with target_session_attrs=read-write)"}
	}
	return DurabilityFinding{Name: "role", Value: "primary", Meaning: "the connection is to a primary: records and effects commit here"}
}

func (f durabilityFacts) fsyncFinding() DurabilityFinding {
	return mustBeOn("fsync", f.fsync, "commits are flushed to disk",
		"commits are not flushed to disk: a crash of the machine can lose or corrupt operations already answered, "+
			"and a retry of a lost one runs it again")
}

func (f durabilityFacts) fullPageWritesFinding() DurabilityFinding {
	return mustBeOn("full_page_writes", f.fullPageWrites, "pages torn by a crash are repaired from the WAL",
		"a crash in the middle of a page write can leave a torn page that recovery cannot repair: "+
			"payments and their records may be corrupt")
}

// mustBeOn judges a setting that keeps the promises only when on: it
// means on when it is, and is a risk meaning off otherwise.
func mustBeOn(name, value, on, off string) DurabilityFinding {
	if value != "on" {
		return DurabilityFinding{Name: name, Value: value, Meaning: off, Risk: true}
	}
	return DurabilityFinding{Name: name, Value: value, Meaning: on}
}

func (f durabilityFacts) commitFinding() DurabilityFinding {
	d := DurabilityFinding{Name: "synchronous_commit", Value: f.syncCommit}
	switch f.syncCommit {
	case "off":
		d.Risk = true
		d.Meaning = "a commit is answered before its WAL is on disk: a crash of the database server loses the operations " +
			"answered in its last moments (up to three times wal_writer_delay), and a retry of one runs it again"
	case "local":
		d.Meaning = "a commit waits for this server's disk, never for a standby"
	case "remote_write":
		d.Meaning = "a commit waits for this server's disk and for a synchronous standby to have written (not flushed) its WAL: " +
			"a failover loses nothing unless the standby's machine crashes too"
	case "remote_apply":
		d.Meaning = "a commit waits for this server's disk and for a synchronous standby to have flushed and applied its WAL"
	default: // on
		d.Meaning = "a commit waits for this server's disk and for a synchronous standby's disk, if any is named"
	}
	return d
}

// requiredStandbys is how many synchronous standbys a commit waits for by
// synchronous_standby_names: num_sync in "FIRST num_sync (names)", "ANY
// num_sync (names)" and "num_sync (names)", and 1 for a plain list of
// names (PostgreSQL's grammar for the setting).
func requiredStandbys(names string) int {
	s := strings.TrimSpace(names)
	if keyword, rest, ok := strings.Cut(s, " "); ok && (strings.EqualFold(keyword, "FIRST") || strings.EqualFold(keyword, "ANY")) {
		s = strings.TrimSpace(rest)
	}
	digits := len(s) - len(strings.TrimLeft(s, "0123456789"))
	if digits == 0 || !strings.HasPrefix(strings.TrimSpace(s[digits:]), "(") {
		return 1
	}
	n, err := strconv.Atoi(s[:digits])
	if err != nil || n < 1 {
		return 1
	}
	return n
}

// waitsForStandbys reports whether commits wait for the named standbys.
func (f durabilityFacts) waitsForStandbys() bool {
	return f.syncNames != "" && f.syncCommit != "off" && f.syncCommit != "local"
}

func (f durabilityFacts) replication() DurabilityFinding {
	d := DurabilityFinding{Name: "synchronous_standby_names",
		Value: fmt.Sprintf("'%s' (%d standbys connected, %d synchronous)", f.syncNames, f.standbys, f.synchronous)}
	switch {
	case f.inRecovery:
		d.Meaning = "not judged: the connection is to a standby"
	case !f.waitsForStandbys() && f.standbys > 0:
		d.Risk = true
		d.Meaning = "asynchronous replication: a failover can lose operations already answered, and a retry of one runs it again " +
			"(in Transactional mode its effects were lost with it, so nothing doubles; in Leased mode its external effect runs again, " +
			"safe only because the downstream key is forwarded)"
	case !f.waitsForStandbys():
		d.Meaning = "no standby: a crash of this server loses nothing answered (with fsync on) but stops the API until it restarts, " +
			"and its disk is the only copy"
	case f.hidden > 0 && f.synchronous == 0:
		d.Risk = true
		d.Meaning = "this role may not see whether a standby is synchronous: grant it pg_monitor (pg_read_all_stats) to know"
	case f.synchronous == 0:
		d.Risk = true
		d.Meaning = "synchronous standbys are named but none is connected in sync: every commit waits until one is (the API stalls), " +
			"and a commit whose wait is cancelled is committed here alone: answered to its retry, it is lost by a failover"
	case f.synchronous < requiredStandbys(f.syncNames):
		d.Risk = true
		d.Meaning = fmt.Sprintf("%d synchronous standbys are required but only %d is connected in sync: every commit waits "+
			"until enough are (the API stalls), and a commit whose wait is cancelled is committed here alone: answered to its retry, "+
			"it is lost by a failover", requiredStandbys(f.syncNames), f.synchronous)
	default:
		d.Meaning = "synchronous replication: an operation is answered only once a synchronous standby has it, so a failover " +
			"to a synchronous standby loses none (the HA manager must choose one of them, and fence this server)"
	}
	return d
}
