#!/usr/bin/env bash
# Client overhead: the idem stack against its bare twin (same keyed POST,
# same loopback server, same http.Transport), in alternating runs so that
# drift on a shared machine hits both alike; then the stack alone over an
# in-memory base. Prints the mean ns/op, B/op and allocs/op of each.
#   bash bench/client-overhead.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
bin=$(mktemp -d)/idem.test
go test -c -o "$bin" .
for _ in $(seq "$rounds"); do
	"$bin" -test.run '^$' -test.bench '^Benchmark(Bare)?Transport(InMemory)?$' -test.benchmem -test.count 1 | grep '^Benchmark'
done | awk '{ns[$1]+=$3; b[$1]+=$5; a[$1]+=$7; n[$1]++}
	END {for (k in ns) printf "%-36s %9.0f ns/op %7.0f B/op %5.1f allocs/op  (%d runs)\n", k, ns[k]/n[k], b[k]/n[k], a[k]/n[k], n[k]}' | sort
rm -rf "$(dirname "$bin")"
