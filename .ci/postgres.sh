# shellcheck shell=bash
# ensure_postgres installs PostgreSQL when it (or one of the programs that
# the tests' private clusters run) is missing, starts it when it is
# not running, creates a superuser role for the current user and a database
# "test", and exports DATABASE_URL (kept when it already points at a live
# server). It prefers 127.0.0.1:5432 and falls back to the Unix socket, where
# Debian's default peer authentication admits the matching role.

pg_ok() { psql "$1" -tAc 'select 1' >/dev/null 2>&1; }

as_postgres() {
	if [ "$(id -u)" = 0 ]; then su postgres -c "$*"; else sudo -u postgres sh -c "$*"; fi
}

as_root() {
	if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi
}

install_postgres() {
	if ls /usr/lib/postgresql/*/bin/postgres >/dev/null 2>&1 && has_cluster_programs; then return; fi
	echo "installing PostgreSQL with apt-get"
	as_root apt-get update -q
	DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q postgresql postgresql-client
}

# has_cluster_programs reports whether one /usr/lib/postgresql/<v>/bin has
# the programs that the tests' private clusters run (internal/pgcluster:
# TestFailover, the durability report's tests): initdb, pg_ctl and
# pg_basebackup.
has_cluster_programs() {
	local bin
	for bin in /usr/lib/postgresql/*/bin; do
		[ -x "$bin/initdb" ] && [ -x "$bin/pg_ctl" ] && [ -x "$bin/pg_basebackup" ] && return 0
	done
	return 1
}

start_postgres() {
	local version
	version=$(ls /etc/postgresql | sort -V | tail -1)
	if ! pg_lsclusters -h 2>/dev/null | grep -q .; then
		as_root pg_createcluster "$version" main
	fi
	if ! pg_isready -q -h 127.0.0.1 -p 5432 && ! pg_isready -q; then
		echo "starting PostgreSQL $version"
		as_root pg_ctlcluster --skip-systemctl-redirect "$version" main start
	fi
	for _ in $(seq 60); do
		pg_isready -q && return
		sleep 0.5
	done
	echo "PostgreSQL did not become ready" >&2
	return 1
}

create_role_and_db() {
	local user
	user=$(id -un)
	if ! as_postgres "psql -tAc \"select 1 from pg_roles where rolname='$user'\"" | grep -q 1; then
		as_postgres "createuser -s '$user'"
	fi
	if ! as_postgres "psql -tAc \"select 1 from pg_database where datname='test'\"" | grep -q 1; then
		as_postgres "createdb -O '$user' test"
	fi
}

ensure_postgres() {
	# The private clusters need the programs even when DATABASE_URL points
	# at a server that runs elsewhere.
	install_postgres
	if [ -n "${DATABASE_URL:-}" ] && pg_ok "$DATABASE_URL"; then return; fi
	start_postgres
	create_role_and_db
	local tcp="postgres://$(id -un)@127.0.0.1:5432/test?sslmode=disable"
	local sock="postgres://$(id -un)@/test?host=/var/run/postgresql"
	if pg_ok "$tcp"; then
		export DATABASE_URL="$tcp"
	elif pg_ok "$sock"; then
		export DATABASE_URL="$sock"
	else
		echo "PostgreSQL runs but neither $tcp nor $sock admits us" >&2
		return 1
	fi
}
