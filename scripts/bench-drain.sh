#!/bin/sh
# scripts/bench-drain.sh runs kubetest's BenchmarkDrain (docs/kubernetes.md,
# "Benchmark: draining a backlog") and prints, per case, the median and
# the range (min-max) of each metric over the runs.
#
#   scripts/bench-drain.sh [NODES PODS RUNS [CASES]]
#
# Defaults: 1000 nodes, 8000 pods, 3 runs, the six cases of tide FIFO,
# tide Tiresias and kube-scheduler on pods and on gangs of 8. The raw
# `go test -bench` output is kept in bench-drain-NODESxPODS.txt in the
# current directory. It prints the load (uptime) before and after, the
# wall time and the CPU time of everything it ran; the benchmark reports
# each scheduler's and the API server's peak memory. A drain is given 15
# minutes per 8,000 pods (TIDE_BENCH_TIMEOUT=DURATION changes that).
# `scripts/bench-drain.sh summary FILE` summarizes a file written before.
set -eu
summarize() {
	awk '
	/^BenchmarkDrain\// {
		name = $1; sub(/^BenchmarkDrain\//, "", name); sub(/-[0-9]+$/, "", name); sub(/#[0-9]+$/, "", name)
		if (!(name in seen)) { seen[name] = 1; order[++ncase] = name }
		runs[name]++
		for (i = 3; i < NF; i += 2) {
			unit = $(i + 1)
			if (!(unit in useen)) { useen[unit] = 1; units[++nunit] = unit }
			v[name, unit, runs[name]] = $i
		}
	}
	function median(a, n,   i, j, t) {
		for (i = 2; i <= n; i++) for (j = i; j > 1 && a[j - 1] > a[j]; j--) { t = a[j]; a[j] = a[j - 1]; a[j - 1] = t }
		return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
	}
	END {
		for (c = 1; c <= ncase; c++) {
			name = order[c]
			printf "%s (%d runs)\n", name, runs[name]
			for (u = 1; u <= nunit; u++) {
				unit = units[u]; n = 0
				for (r = 1; r <= runs[name]; r++) if ((name, unit, r) in v) a[++n] = v[name, unit, r] + 0
				if (n == 0) continue
				m = median(a, n)
				printf "  %-22s median %10.4g   range %.4g-%.4g\n", unit, m, a[1], a[n]
				delete a
			}
		}
	}' "$1"
}
if [ "${1:-}" = summary ]; then
	summarize "$2"
	exit 0
fi
nodes=${1:-1000}
pods=${2:-8000}
runs=${3:-3}
cases=${4:-'tide-fifo-pods|kube-scheduler-pods|tide-tiresias-pods|tide-fifo-gang8|kube-scheduler-gang8|tide-tiresias-gang8'}
out=$PWD/bench-drain-${nodes}x${pods}.txt
cd "$(dirname "$0")/../kubetest"
echo "bench-drain: $nodes nodes, $pods pods, $runs runs of ($cases); $(date -u); load before: $(uptime)"
start=$(date +%s)
TIDE_BENCH_NODES=$nodes TIDE_BENCH_PODS=$pods TIDE_BENCH_RUNS=$runs \
	go test -vet=off -run XXX -bench "Drain/($cases)(#[0-9]+)?\$" -benchtime 1x -timeout 600m . >"$out" 2>&1 || {
	grep -E '^(Benchmark|---|FAIL|ok)|bench_test' "$out" | tail -20
	echo "bench-drain: failed; output in $out" >&2
	exit 1
}
echo "bench-drain: $(date -u); $(($(date +%s) - start)) s wall; load after: $(uptime); raw output in $out"
echo "bench-drain: CPU time (user, system) of this shell, then of everything it ran (go test, the API server, the schedulers):"
times
summarize "$out"
