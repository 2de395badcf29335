# oracle-common.sh: what scripts/oracle-one-decision.sh and
# oracle-two-decisions.sh share; sourced by them, with file set to the
# one-point scenario. It builds tide unless TIDE is set, makes $dir (removed
# on exit), runs EdgeFlow once with its per-job report in $dir/base and its
# deadlines met in $base, and defines run_tasks: each line of $dir/tasks is
# a knob list run as edgeflow:LINE, the lines and the deadlines they meet in
# $dir/out, JOBS (default 2) at a time.
jobs=${JOBS:-2}
tide=${TIDE:-}
if [[ -z $tide ]]; then
	tide=$(mktemp -d)/tide
	go build -o "$tide" ./cmd/tide
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
"$tide" sim --scenario "$file" --policy edgeflow --report "$dir/base" >/dev/null
met() { jq -r '.points[0].policies[0] | (.deadline_met_frac * .jobs_with_deadline + 0.5 | floor)'; }
base=$("$tide" sim --scenario "$file" --policy edgeflow --json | met)
run_tasks() {
	export tide file
	xargs -P "$jobs" -I{} sh -c '
		n=$("$tide" sim --scenario "$file" --policy "edgeflow:{}" --json | jq -r ".points[0].policies[0] | (.deadline_met_frac * .jobs_with_deadline + 0.5 | floor)")
		echo "{} $n"' <"$dir/tasks" >"$dir/out"
}
