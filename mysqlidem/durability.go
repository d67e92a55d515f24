package mysqlidem

import (
	"context"
	"database/sql"
	"strings"

	"github.com/idemkit/idem/server"
)

// sqlDurability reads the settings that CheckDurability judges; the
// semi-synchronous names are MySQL's before 8.0.26 and MariaDB's (master)
// and MySQL's since (source), whichever the server has.
const sqlDurability = `SHOW GLOBAL VARIABLES WHERE Variable_name IN ('read_only', 'innodb_flush_log_at_trx_commit',
    'log_bin', 'sync_binlog', 'rpl_semi_sync_master_enabled', 'rpl_semi_sync_source_enabled',
    'rpl_semi_sync_master_wait_point', 'rpl_semi_sync_source_wait_point')`

// CheckDurability reads the settings of the server behind db that decide
// whether a request idem answered survives a crash or a failover, and says
// what each can lose, in a [server.Durability] whose findings are, in this
// order: read_only (the store cannot write at all), innodb_flush_log_at_trx_commit,
// sync_binlog, and semi-synchronous replication. ctx governs the call. It
// is a report: the caller decides what to do about a risk.
func CheckDurability(ctx context.Context, db *sql.DB) (server.Durability, error) {
	rows, err := db.QueryContext(ctx, sqlDurability)
	if err != nil {
		return server.Durability{}, wrap("durability", err)
	}
	defer rows.Close()
	v := map[string]string{}
	for rows.Next() {
		var name, value string
		if err := rows.Scan(&name, &value); err != nil {
			return server.Durability{}, wrap("durability", err)
		}
		v[strings.ToLower(name)] = value
	}
	if err := rows.Err(); err != nil {
		return server.Durability{}, wrap("durability", err)
	}
	return server.Durability{Findings: []server.DurabilityFinding{
		readOnly(v["read_only"]), flushLog(v["innodb_flush_log_at_trx_commit"]),
		syncBinlog(v["log_bin"], v["sync_binlog"]), semiSync(v),
	}}, nil
}

func readOnly(v string) server.DurabilityFinding {
	f := server.DurabilityFinding{Name: "read_only", Value: v,
		Meaning: "the server takes writes: claims and records can be stored"}
	if v != "OFF" {
		f.Meaning, f.Risk = "the server refuses writes (a replica, or a primary set read-only): every claim fails", true
	}
	return f
}

func flushLog(v string) server.DurabilityFinding {
	f := server.DurabilityFinding{Name: "innodb_flush_log_at_trx_commit", Value: v}
	switch v {
	case "1":
		f.Meaning = "every commit is flushed to disk before it is answered: a crash loses no answered request"
	case "2":
		f.Meaning, f.Risk = "commits are written to the OS at once but flushed about once a second: an OS crash or power loss can lose the last second of answered requests, whose retries then run again", true
	default:
		f.Meaning, f.Risk = "commits are flushed about once a second: a crash of the server can lose the last second of answered requests, whose retries then run again", true
	}
	return f
}

func syncBinlog(logBin, v string) server.DurabilityFinding {
	f := server.DurabilityFinding{Name: "sync_binlog", Value: v}
	switch {
	case logBin != "ON":
		f.Value = v + " (log_bin OFF)"
		f.Meaning = "no binary log: there is no replica to fail over to, and nothing to keep in step with InnoDB"
	case v == "1":
		f.Meaning = "the binary log is flushed at every commit: after a crash, replicas get every answered request"
	default:
		f.Meaning, f.Risk = "the binary log is not flushed at every commit: after an OS crash the log can miss answered requests that InnoDB kept, which replicas then never get (a failover to one loses them)", true
	}
	return f
}

func semiSync(v map[string]string) server.DurabilityFinding {
	enabled, point := v["rpl_semi_sync_master_enabled"], v["rpl_semi_sync_master_wait_point"]
	if s, ok := v["rpl_semi_sync_source_enabled"]; ok {
		enabled, point = s, v["rpl_semi_sync_source_wait_point"]
	}
	f := server.DurabilityFinding{Name: "semi-synchronous replication", Value: enabled + " " + point}
	switch {
	case v["log_bin"] != "ON":
		f.Meaning = "no binary log: no replication"
	case enabled != "ON":
		f.Meaning, f.Risk = "replication is asynchronous: a failover to a replica can lose requests already answered, whose retries then run again", true
	case point != "AFTER_SYNC":
		f.Meaning, f.Risk = "semi-synchronous, but AFTER_COMMIT: a commit is visible (a duplicate may replay it) before a replica has it, so a failover can lose a request that was answered or replayed", true
	default:
		f.Meaning = "semi-synchronous AFTER_SYNC (lossless): a commit is answered only once a replica has it, unless the wait times out and replication falls back to asynchronous (rpl_semi_sync_*_timeout)"
	}
	return f
}
