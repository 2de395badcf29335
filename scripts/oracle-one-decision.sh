#!/usr/bin/env bash
# oracle-one-decision.sh: could EdgeFlow have met more deadlines on one
# scenario point by changing one admission decision? (docs/tidal.md,
# section 4, "Third pass".)
#
# Usage: scripts/oracle-one-decision.sh SCENARIO.yaml [STEP_S]
#
# SCENARIO.yaml must have one point (no sweep). The script runs EdgeFlow
# once, then reruns it once per decision with its diagnostic knobs:
#   - one more admission: each job EdgeFlow declines waits, untried, until
#     T and is then admitted whatever the test says (force_admit=ID@T), for
#     T from its arrival every STEP_S seconds (default 3600) while T is
#     before its deadline less half its run on its requested GPUs;
#   - one fewer: each job EdgeFlow admits is declined at arrival
#     (force_decline=ID).
# It prints EdgeFlow's deadlines met and the best of each family, with the
# decisions that reach it. TIDE (default: go run ./cmd/tide) and JOBS
# (parallel runs, default 2) may be set.
set -euo pipefail
file=${1:?usage: $0 SCENARIO.yaml [STEP_S]}
step=${2:-3600}
source "$(dirname "$0")/oracle-common.sh"
# Columns: 2 id, 6 submit, 9 deadline, 10 state, 17 lower bound (the ones
# before the quoted reason).
awk -F, -v step="$step" 'NR > 1 && $10 == "declined" {
	for (t = $6; t < $9 - $17 / 2; t += step) printf "force_admit=%s@%.0f\n", substr($2, 1, 8), t
}' "$dir/base/jobs-edgeflow.csv" >"$dir/tasks"
awk -F, 'NR > 1 && $10 != "declined" { printf "force_decline=%s\n", substr($2, 1, 8) }' "$dir/base/jobs-edgeflow.csv" >>"$dir/tasks"
run_tasks
echo "$file: EdgeFlow meets $base"
for kind in force_admit force_decline; do
	best=$(grep "^$kind=" "$dir/out" | sort -k2 -n | tail -1 | cut -d' ' -f2)
	runs=$(grep -c "^$kind=" "$dir/out" || true)
	[[ -z $best ]] && continue
	echo "$kind: $runs runs, best $best ($(( best - base )) against EdgeFlow):" $(grep "^$kind=" "$dir/out" | awk -v b="$best" '$2 == b { print $1 }' | head -8)
done
