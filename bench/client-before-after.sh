#!/usr/bin/env bash
# The client stack's own cost before and after a change: builds the test
# binary of the work tree and of a commit (with the work tree's
# bench_test.go, so that both run the same benchmarks), then runs the
# in-memory benchmarks of the two in alternation, so that a busy machine's
# drift hits both alike (the order swapped every round), and prints per
# figure the median of each and the median and range of the per-round
# ratios (after / before). The paired benchmark's stack/bare, the stack's
# time over its bare twin's in one process, is the figure that a process
# running faster or slower as a whole (layout, a busy machine) moves least.
#   bash bench/client-before-after.sh COMMIT [rounds]
set -euo pipefail
cd "$(dirname "$0")/.."
commit=${1:?usage: client-before-after.sh COMMIT [rounds]}
rounds=${2:-12}
dir=$(mktemp -d)
trap 'git worktree remove --force "$dir/before" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
git worktree add -q --detach "$dir/before" "$commit"
cp bench_test.go "$dir/before/bench_test.go"
(cd "$dir/before" && go test -c -o "$dir/before.test" .)
go test -c -o "$dir/after.test" .
for round in $(seq "$rounds"); do
	order="before after"
	if ((round % 2 == 0)); then order="after before"; fi # neither always runs first
	for b in $order; do
		"$dir/$b.test" -test.run '^$' -test.bench '^Benchmark((Bare)?TransportInMemory|TransportInMemoryPaired)$' \
			-test.benchmem -test.count 1 -test.benchtime 200000x | grep '^Benchmark' | sed "s/^/$b /"
	done
done | awk '
	function median(a, n,   s, i) { for (i = 1; i <= n; i++) s[i] = a[i]; asort(s); return n % 2 ? s[(n + 1) / 2] : (s[n / 2] + s[n / 2 + 1]) / 2 }
	{ name = $2; sub(/-[0-9]+$/, "", name)
	  for (i = 4; i < NF; i += 2) { k = name " " $(i + 1); n = ++cnt[$1, k]; v[$1, k, n] = $i; keys[k] = 1
	    if ($(i + 1) == "stack-ns/req") stack = $i; if ($(i + 1) == "bare-ns/req") bare = $i }
	  if (name ~ /Paired$/) { k = name " stack/bare"; n = ++cnt[$1, k]; v[$1, k, n] = stack / bare; keys[k] = 1 } }
	END { for (k in keys) {
		n = cnt["after", k]; if (cnt["before", k] < n) n = cnt["before", k]
		lo = 1e18; hi = 0
		for (i = 1; i <= n; i++) { b[i] = v["before", k, i]; a[i] = v["after", k, i]; r[i] = b[i] ? a[i] / b[i] : 1
			if (r[i] < lo) lo = r[i]; if (r[i] > hi) hi = r[i] }
		printf "%-52s before %9.4g  after %9.4g  after/before %.3f (%.3f to %.3f, %d rounds)\n", k, median(b, n), median(a, n), median(r, n), lo, hi, n } }' | sort
