#!/bin/sh
# scripts/live-scenario.sh FILE [POLICY] runs a scenario file live: a real
# kube-apiserver and etcd (kubetest/, as scripts/test-kube.sh starts them),
# a node per node of the scenario's cluster labelled with its site, tide
# kube scheduling the trace's jobs as TideJobs with the policy, model and
# placer `tide sim --scenario FILE` uses, serving pods and taken-back edge
# servers following the capacity timeline, and each job's progress
# advanced at its model's rate, on a clock the driver steps through the
# simulator's instants (docs/kubernetes.md, "Live scenarios"). It prints
# the live run's JSON (as `tide sim --scenario FILE --json` prints it),
# the simulator's, and lines comparing deadlines met, average JCT,
# harvested GPU-hours, inference wait and each job.
#
# Environment: TIDE_LIVE_TIMEOUT (wall-time limit of the run, default
# 20m), TIDE_LIVE_OUT (write the output to this file instead of stdout),
# TIDE_LIVE_TRACE (a path prefix: write both runs' rounds to PREFIX.live
# and PREFIX.sim), TIDE_LIVE_DEBUG=FROM:TO (with TIDE_LIVE_TRACE: the
# driver's passes at the instants from FROM to TO simulated seconds, to
# PREFIX.driver), TIDE_LIVE_KWOK=1 (kwok, built once as TestKubeNodes
# builds it, keeps the nodes Ready and starts their pods), GOGC (default
# 400 here: the run's process spends less CPU collecting garbage).
set -eu
if [ $# -lt 1 ] || [ $# -gt 2 ]; then
	echo "usage: scripts/live-scenario.sh scenarios/FILE.yaml [POLICY]" >&2
	exit 2
fi
root=$(cd "$(dirname "$0")/.." && pwd)
case $1 in
/*) file=$1 ;;
*) file=$(pwd)/$1 ;;
esac
if [ ! -f "$file" ]; then
	echo "live-scenario: $1: no such file" >&2
	exit 2
fi
out=${TIDE_LIVE_OUT:-}
tmp=
if [ -z "$out" ]; then
	tmp=$(mktemp)
	out=$tmp
fi
start=$(date +%s)
cd "$root/kubetest"
GOGC=${GOGC:-400} TIDE_LIVE_SCENARIO=$file TIDE_LIVE_POLICY=${2:-} TIDE_LIVE_OUT=$out \
	go test -vet=off -count=1 -timeout 0 -run '^TestLiveScenario$' . >&2
echo "live-scenario: $(($(date +%s) - start)) s wall" >&2
if [ -n "$tmp" ]; then
	cat "$tmp"
	rm -f "$tmp"
fi
