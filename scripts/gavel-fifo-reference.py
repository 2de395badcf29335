#!/usr/bin/env python3
"""Reference figures for tide's Gavel FIFO policies (docs/heterogeneity.md).

A small re-implementation, written for tide, of what Gavel's trace simulator
(stanford-futuredata/gavel, scheduler/scheduler.py simulate() at c4fa4009,
scheduler/policies/fifo.py) does for its FIFO and FIFO_Perf policies with
single-GPU jobs on one GPU per server, without packing: rounds of
time_per_iteration seconds in which each scheduled job runs
int(throughput x round) steps and the round ends when the longest finishes;
arrivals join at the next round boundary; the allocation is recomputed when
jobs arrived or left, at most every 1,920 s; each type's GPUs go to the jobs
of highest priority (allocation / share of the type's time since the last
recomputation; ties to the larger deficit, then the larger allocation, then
the earlier job); under FIFO a job with priority 0 waits. The FIFO policy draws
with Python's random.Random(seed), as Gavel's does, so the same --seed gives
Gavel's draws.

It reproduces Gavel's published figures for generated_seed0_lam3600.trace
(-c 8:8:8 --num_gpus_per_server 1:1:1 -s 100 -e 200 --seed 0, 360 s rounds):
FIFO 71,776 s and FIFO_Perf 55,668 s, to the second. Standard library only.

    python3 scripts/gavel-fifo-reference.py ../shared/data/gavel/generated_seed1_lam3600.trace \\
        --throughputs ../shared/data/gavel/simulation_throughputs.json --policy fifo --seeds 0-9
"""
import argparse
import heapq
import json
import random
import re
import statistics

ROUND_TYPES = ['v100', 'p100', 'k80']  # Gavel's fixed order of types


def read_throughputs(path):
    """{type: {(model, scale factor): isolated iterations/s}}"""
    out = {}
    for gpu, table in json.load(open(path)).items():
        out[gpu] = {}
        for key, row in table.items():
            m = re.match(r"\('(.*)', (\d+)\)", key)
            out[gpu][(m.group(1), int(m.group(2)))] = row['null']
    return out


def read_trace(path):
    """Gavel's 10-column trace: job type, ..., total steps (6th), scale
    factor (7th), ..., arrival time (10th)."""
    jobs = []
    for line in open(path):
        f = line.rstrip('\n').split('\t')
        if int(f[6]) != 1:
            raise SystemExit('%s: only single-GPU jobs are modelled' % path)
        jobs.append({'type': f[0], 'steps': int(f[5]), 'arrival': float(f[9])})
    return jobs


class FIFO:
    """FIFOPolicy: mode 'base' (FIFO) keeps each job's type and picks as Gavel's
    code does; 'perf' (FIFO_Perf) recomputes from scratch, fastest type."""

    def __init__(self, perf, seed):
        self.perf = perf
        self.held = {}  # job -> type
        self.rng = random.Random()
        if seed is not None:
            self.rng.seed(seed)

    def allocate(self, tput, cluster):
        free = dict(cluster)
        if self.perf:
            self.held = {}
        queue = [j for j in sorted(tput) if j not in self.held]
        for j in sorted(self.held):
            gpu = self.held[j]
            if j in tput:
                free[gpu] -= 1
                continue
            # j left: its type goes to the head of the queue if it fits in
            # the free count as it stands at this point of the walk.
            if queue and free[gpu] >= 1 and tput[queue[0]][gpu] > 0:
                self.held[queue.pop(0)] = gpu
                free[gpu] -= 1
            del self.held[j]
        listed = sorted(g for g in free if free[g] > 0)
        while queue and listed:
            j = queue.pop(0)
            fit = [i for i, g in enumerate(listed) if free[g] >= 1]
            if not fit:
                break
            if self.perf:
                best = max(range(len(fit)), key=lambda i: (tput[j][listed[fit[i]]], -i))
                drawn, gpu = best, listed[fit[best]]
            else:
                # Gavel draws an index but assigns the type its loop over the
                # listed types ended on: the last one.
                drawn, gpu = self.rng.randrange(len(fit)), listed[-1]
            if not tput[j][gpu] > 0:
                continue
            self.held[j] = gpu
            free[gpu] -= 1
            if free[gpu] == 0:
                listed.pop(fit[drawn])
        return {j: {g: (1.0 if self.held.get(j) == g else 0.0) for g in cluster} for j in tput}


def simulate(trace, oracle, cluster, window, policy, seed, round_s=360.0, reset_s=1920.0):
    perf = policy == 'fifo_perf'
    fifo = FIFO(perf, seed)
    shuffler = random.Random()
    shuffler.seed(seed + 5)  # Gavel shuffles the type order for non-Perf policies
    half = round_s / 2
    types = sorted(cluster)
    jobs, tput, done_steps, received = {}, {}, {}, {}
    type_time = {g: 0.0 for g in types}
    prio = {g: {} for g in types}
    deficit = {g: {} for g in types}
    submit, last_end, jct = {}, {}, {}
    alloc = {}
    state = {'last_reset': 0.0, 'stale': False, 'now': 0.0}

    def reset_and_allocate():
        nonlocal alloc
        now = state['now']
        elapsed = now - state['last_reset']
        for g in types:
            type_time[g] = 0.0
            for j in received:
                should = alloc[j][g] * elapsed if j in alloc else 0.0
                deficit[g][j] += should - (received[j][g] - half)
                received[j][g] = half
                type_time[g] += half
        state['last_reset'] = now
        alloc = fifo.allocate({j: dict(tput[j]) for j in jobs}, cluster)
        state['stale'] = False

    def schedule():
        now = state['now']
        if state['stale'] and (now - state['last_reset'] >= reset_s or state['last_reset'] == 0):
            reset_and_allocate()
        for g in types:
            for j in prio[g]:
                a = alloc[j][g] if j in alloc else 0.0
                share = received[j][g] / type_time[g] if type_time[g] else 0.0
                if a == 0.0 or tput[j][g] == 0:
                    prio[g][j] = 0.0
                else:
                    prio[g][j] = a / share if share > 0 else a * 1e9
        order = [g for g in ROUND_TYPES if g in cluster]
        if not perf:
            shuffler.shuffle(order)
        entries = []
        for g in order:
            e = [(j, g, prio[g][j], deficit[g][j], alloc[j][g] if j in alloc else 0.0) for j in prio[g]]
            entries += sorted(e, key=lambda x: (x[2], x[3], x[4]), reverse=True)
        left, placed, out = dict(cluster), set(), []
        for j, g, p, _, _ in entries:
            if left[g] == 0 or j in placed or tput[j][g] <= 0 or p <= 0:
                continue
            left[g] -= 1
            placed.add(j)
            out.append((j, g))
        return [(j, g) for j, g in out if j in alloc]

    arrivals = [(job['arrival'], i, job) for i, job in enumerate(trace)]
    arrivals.reverse()
    first_arrival = arrivals[-1][0]
    state['now'] = first_arrival
    want = set(range(window[0], window[1]))
    running = []  # heap of (-finish, job, type, steps)
    round_start, round_end = 0.0, None
    while not want <= set(jct):
        if running:
            end = -running[0][0]
            if round_end is not None:
                round_start = round_end
            round_end = end
            state['now'] = end
        else:
            if state['now'] > first_arrival:
                # Gavel's simulate() then jumps back to the first arrival
                # and waits forever; it never happens on these traces.
                raise SystemExit('idle cluster at %.0f s: Gavel stalls here' % state['now'])
            state['now'] = first_arrival
        while running:
            finish, j, g, steps = heapq.heappop(running)
            finish = -finish
            ran = finish - round_start
            last_end[j] = finish
            if steps <= 0 or ran <= 0:
                state['stale'] = True
                continue
            done_steps[j] += steps
            received[j][g] += ran
            type_time[g] += ran
            if jobs[j]['steps'] - done_steps[j] <= 0:
                jct[j] = last_end[j] - submit[j]
                for d in (jobs, tput, done_steps, received):
                    del d[j]
                for g2 in types:
                    del prio[g2][j]
                    del deficit[g2][j]
                state['stale'] = True
        while arrivals and arrivals[-1][0] <= state['now']:
            t, j, job = arrivals.pop()
            jobs[j], submit[j], done_steps[j] = job, t, 0
            tput[j] = {g: oracle[g][(job['type'], 1)] for g in types}
            received[j] = {g: half for g in types}
            for g in types:
                prio[g][j], deficit[g][j] = 0.0, 0.0
            state['stale'] = True
        for j, g in schedule():
            steps = min(int(tput[j][g] * round_s), jobs[j]['steps'] - done_steps[j])
            heapq.heappush(running, (-(state['now'] + steps / tput[j][g]), j, g, steps))
        if not running and not arrivals and not jobs:
            break
    return statistics.mean(jct[j] for j in sorted(want))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    ap.add_argument('trace')
    ap.add_argument('--throughputs', required=True, help="Gavel's simulation_throughputs.json")
    ap.add_argument('--policy', choices=['fifo', 'fifo_perf'], default='fifo')
    ap.add_argument('--seeds', default='0', help='Gavel --seed values: N or LO-HI')
    ap.add_argument('--cluster', default='8:8:8', help='V100:P100:K80 GPUs, one per server')
    ap.add_argument('--window', default='100:200', help='job IDs LO:HI whose average JCT is reported')
    ap.add_argument('--round', type=float, default=360.0, help='seconds per round (time_per_iteration)')
    a = ap.parse_args()
    lo, _, hi = a.seeds.partition('-')
    seeds = range(int(lo), int(hi or lo) + 1)
    v, p, k = (int(x) for x in a.cluster.split(':'))
    w = [int(x) for x in a.window.split(':')]
    oracle, trace = read_throughputs(a.throughputs), read_trace(a.trace)
    res = []
    for s in seeds:
        res.append(simulate(trace, oracle, {'v100': v, 'p100': p, 'k80': k}, w, a.policy, s, a.round))
        print('%s seed %d: average JCT of jobs %d-%d %.1f s' % (a.policy, s, w[0], w[1] - 1, res[-1]), flush=True)
    if len(res) > 1:
        print('%s seeds %s: mean %.1f s, sd %.1f s, min %.1f s, max %.1f s' % (
            a.policy, a.seeds, statistics.mean(res), statistics.stdev(res), min(res), max(res)))


if __name__ == '__main__':
    main()
