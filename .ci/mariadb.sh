# shellcheck shell=bash
# ensure_mariadb makes sure a MariaDB answers at 127.0.0.1:3306 (root, no
# password, database test) for the mysqlidem tests: it installs Debian's
# mariadb-server when missing, starts mariadbd when none answers, creates
# the database test, and exports MYSQL_DSN. as_root comes from postgres.sh.

mariadb_ok() { mysql -h 127.0.0.1 -P 3306 -u root -e 'SELECT 1' >/dev/null 2>&1; }

ensure_mariadb() {
	export MYSQL_DSN="root@tcp(127.0.0.1:3306)/test"
	if ! command -v mariadbd >/dev/null && [ ! -x /usr/sbin/mariadbd ]; then
		echo "installing mariadb-server with apt-get"
		as_root apt-get update -q
		DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q mariadb-server
	fi
	if ! mariadb_ok; then
		echo "starting mariadbd"
		as_root mkdir -p /run/mysqld
		as_root chown mysql:mysql /run/mysqld 2>/dev/null || true
		as_root start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql
		for _ in $(seq 60); do
			mariadb_ok && break
			sleep 0.5
		done
	fi
	if ! mariadb_ok; then
		echo "mariadbd did not answer at 127.0.0.1:3306 as root" >&2
		return 1
	fi
	mysql -h 127.0.0.1 -P 3306 -u root -e 'CREATE DATABASE IF NOT EXISTS test'
}
