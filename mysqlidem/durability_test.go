package mysqlidem

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/idemkit/idem/mysqlidem/internal/mysqltest"
)

// TestCheckDurability reads the machine's MariaDB, which flushes every
// commit and keeps no binary log, and judges each setting's values.
func TestCheckDurability(t *testing.T) {
	db := mysqltest.Open(t, mysqltest.Database(t), 2)
	d, err := CheckDurability(context.Background(), db)
	require.NoError(t, err)
	require.Len(t, d.Findings, 4, d.String())
	names := []string{d.Findings[0].Name, d.Findings[1].Name, d.Findings[2].Name, d.Findings[3].Name}
	assert.Equal(t, []string{"read_only", "innodb_flush_log_at_trx_commit", "sync_binlog", "semi-synchronous replication"}, names)
	var flush string
	require.NoError(t, db.QueryRow("SELECT @@innodb_flush_log_at_trx_commit").Scan(&flush))
	assert.Equal(t, flush, d.Findings[1].Value)
	assert.Equal(t, flush != "1", d.Findings[1].Risk, d.String())

	for _, c := range []struct {
		v    string
		risk bool
	}{{"1", false}, {"2", true}, {"0", true}} {
		assert.Equal(t, c.risk, flushLog(c.v).Risk, "innodb_flush_log_at_trx_commit=%s", c.v)
	}
	assert.False(t, syncBinlog("OFF", "0").Risk, "no binary log")
	assert.True(t, syncBinlog("ON", "0").Risk)
	assert.False(t, syncBinlog("ON", "1").Risk)
	assert.True(t, semiSync(map[string]string{"log_bin": "ON", "rpl_semi_sync_master_enabled": "OFF"}).Risk)
	assert.True(t, semiSync(map[string]string{"log_bin": "ON", "rpl_semi_sync_master_enabled": "ON", "rpl_semi_sync_master_wait_point": "AFTER_COMMIT"}).Risk)
	assert.False(t, semiSync(map[string]string{"log_bin": "ON", "rpl_semi_sync_source_enabled": "ON", "rpl_semi_sync_source_wait_point": "AFTER_SYNC"}).Risk)
	assert.True(t, readOnly("ON").Risk)
	assert.False(t, readOnly("OFF").Risk)
}
