#!/usr/bin/env bash
# Client overhead: the idem stack against its bare twin (same keyed POST,
# same loopback server, same http.Transport), in alternating runs so that
# drift on a shared machine hits both alike; then the stack alone over an
# in-memory base; then both in one run, request by request
# (BenchmarkTransportPaired: overhead-ns/req, the steadiest of these
# figures). Prints the mean of each figure (ns/op, and for the loopback
# pair cpu-ns/op: the process's CPU time, client and server).
#   bash bench/client-overhead.sh [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-8}
bin=$(mktemp -d)/idem.test
go test -c -o "$bin" .
for _ in $(seq "$rounds"); do
	"$bin" -test.run '^$' -test.bench '^Benchmark((Bare)?Transport(InMemory)?|TransportPaired)$' -test.benchmem -test.count 1 | grep '^Benchmark'
done | awk '{ns[$1]+=$3; n[$1]++; for (i = 5; i < NF; i += 2) {m[$1, $(i+1)] += $i; unit[$(i+1)] = 1}}
	END {for (k in ns) {printf "%-34s %9.0f ns/op", k, ns[k]/n[k];
		for (u in unit) if ((k, u) in m) printf " %9.0f %s", m[k, u]/n[k], u; printf "  (%d runs)\n", n[k]}}' | sort
rm -rf "$(dirname "$bin")"
