#!/bin/sh
# scripts/gotest.sh runs `go test` with the given arguments, as it would
# run alone, and when it fails repeats each failing test's own lines
# ("--- FAIL: TestX" and the indented log lines under it, panics too) at
# the very end. The Kubernetes suite's API servers log thousands of lines
# to stderr; without the repeat, a CI log's tail showed only their
# shutdown and not which test failed or why.
set -eu
log=$(mktemp "${TMPDIR:-/tmp}/tide-gotest.XXXXXX")
rcf=$(mktemp "${TMPDIR:-/tmp}/tide-gotest-rc.XXXXXX")
trap 'rm -f "$log" "$rcf"' EXIT
{ rc=0; go test "$@" || rc=$?; echo "$rc" >"$rcf"; } 2>&1 | tee "$log"
rc=$(cat "$rcf")
if [ "$rc" != 0 ]; then
	echo
	echo "== go test failed (exit $rc); the failing tests' own lines, repeated:"
	# A failing test's block: its "--- FAIL" line and the indented lines
	# after it (t.Log, t.Error); klog lines (I1127 ..., W1127 ...) from
	# child processes are left out; panics and build errors are kept.
	awk '
		/^[IWEF][0-9]{4} [0-9:.]+ / { next }
		/^(--- FAIL|panic:|FAIL|# |.*\.go:[0-9]+:[0-9]+: )/ { print; inblock = ($0 ~ /^--- FAIL|^panic:/); next }
		/^=== RUN/ || /^--- (PASS|SKIP)/ || /^ok / { inblock = 0; next }
		inblock && /^(    |\t|goroutine |main\.|created by )/ { print }
	' "$log" | tail -n 200
fi
exit "$rc"
