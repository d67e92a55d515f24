# shellcheck shell=bash
# ensure_redis makes sure a Redis answers at 127.0.0.1:6379 for the
# idemredis tests: it installs Debian's redis-server (with redis-cli,
# which the Cluster tests also need) when missing, starts one without
# persistence and with maxmemory-policy noeviction when none answers, and
# exports REDIS_ADDR. as_root comes from postgres.sh.

redis_ok() { redis-cli -h 127.0.0.1 -p 6379 ping 2>/dev/null | grep -q PONG; }

ensure_redis() {
	export REDIS_ADDR=127.0.0.1:6379
	if ! command -v redis-server >/dev/null || ! command -v redis-cli >/dev/null; then
		echo "installing redis-server with apt-get"
		as_root apt-get update -q
		DEBIAN_FRONTEND=noninteractive as_root apt-get install -y -q redis-server
	fi
	if redis_ok; then return; fi
	echo "starting redis-server on $REDIS_ADDR"
	redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save '' --appendonly no \
		--maxmemory-policy noeviction --dir /tmp
	for _ in $(seq 60); do
		redis_ok && return
		sleep 0.5
	done
	echo "redis-server did not answer at $REDIS_ADDR" >&2
	return 1
}
