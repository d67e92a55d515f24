package mysqlidem

import (
	"database/sql"

	_ "github.com/go-sql-driver/mysql" // the "mysql" driver
)

func sqlOpen(dsn string) (*sql.DB, error) { return sql.Open("mysql", dsn) }
