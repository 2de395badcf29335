#!/usr/bin/env bash
# oracle-two-decisions.sh: could EdgeFlow have met more deadlines on one
# scenario point by exchanging one admission for another, as
# Moore-Hodgson's rule would (a shorter newcomer in, a job admitted
# earlier out)? (docs/tidal.md, section 4, "Fourth pass".)
#
# Usage: scripts/oracle-two-decisions.sh SCENARIO.yaml
#
# SCENARIO.yaml must have one point (no sweep). The script runs EdgeFlow
# once, then reruns it once per pair of decisions with its diagnostic
# knobs: a job X that EdgeFlow declines is admitted at its arrival
# (force_admit=X@submit), and a job Y that EdgeFlow admitted before X
# arrived and that had not started by then is declined at its own arrival
# (force_decline=Y). It prints EdgeFlow's deadlines met and the best pair.
# TIDE (default: go run ./cmd/tide) and JOBS (parallel runs, default 2)
# may be set.
set -euo pipefail
file=${1:?usage: $0 SCENARIO.yaml}
source "$(dirname "$0")/oracle-common.sh"
# Columns: 2 id, 6 submit, 7 start, 10 state.
awk -F, 'NR > 1 && $10 == "declined" { d[++n] = substr($2, 1, 8); ds[n] = $6 }
	NR > 1 && $10 != "declined" { a[++m] = substr($2, 1, 8); as[m] = $6; ast[m] = $7 }
	END { for (i = 1; i <= n; i++) for (k = 1; k <= m; k++) if (as[k] < ds[i] && ast[k] > ds[i])
		printf "force_admit=%s@%.0f:force_decline=%s\n", d[i], ds[i], a[k] }' "$dir/base/jobs-edgeflow.csv" >"$dir/tasks"
run_tasks
echo "$file: EdgeFlow meets $base"
best=$(sort -k2 -n "$dir/out" | tail -1 | cut -d' ' -f2)
[[ -z $best ]] && { echo "no pair to try"; exit 0; }
echo "pairs: $(wc -l <"$dir/out") runs, best $best ($(( best - base )) against EdgeFlow):" $(awk -v b="$best" '$2 == b { print $1 }' "$dir/out" | head -8)
echo "distribution (jobs met: runs):" $(cut -d' ' -f2 "$dir/out" | sort -n | uniq -c | awk '{ printf "%s: %s, ", $2, $1 }')
