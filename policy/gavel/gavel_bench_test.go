package gavel

import (
	"bufio"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/solver/solvertest"
)

// BenchmarkGavelRound measures Gavel's decision time: one round that
// recomputes the allocation (the LP, or FIFO's rule) and runs the priority
// mechanism, from a snapshot of waiting jobs.
//
//   - 100x3: the first 100 jobs of Gavel's generated_seed0_lam3600.trace with
//     Gavel's simulation throughputs, on 8 V100 + 8 P100 + 8 K80; also with
//     space sharing (pair variables in the LP).
//   - 2000x5: 2,000 jobs on the GPUs of the Alibaba PAI 2020 machine list
//     (pai_machine_spec.csv: V100M32, V100, MISC, T4, P100; 6,742 GPUs), 1 to 8
//     GPUs each, with per-type speeds V100M32 1, V100 0.95, P100 0.55,
//     T4 0.45, MISC 0.35 (illustrative: PAI publishes none), each job's
//     jittered by up to +-30% so the types rank differently for different jobs.
//
// Both read ../shared/data and skip without it:
//
//	go test ./policy -run '^$' -bench GavelRound -benchtime 5x
func BenchmarkGavelRound(b *testing.B) {
	solvertest.Require(b)
	cases := []struct {
		name string
		snap func(b *testing.B) *engine.Snapshot
	}{{"100x3", gavelSnap100}, {"2000x5", paiSnap2000}}
	for _, c := range cases {
		var s *engine.Snapshot
		specs := []string{"gavel-las", "gavel-makespan", "gavel-ftf", "gavel-throughput", "fifo-perf"}
		if c.name == "100x3" { // only Gavel's tables measure pairs
			specs = append(specs, "gavel-las:space_sharing=true", "gavel-ftf:space_sharing=true")
		}
		for _, spec := range specs {
			b.Run(c.name+"/"+spec, func(b *testing.B) {
				if s == nil {
					s = c.snap(b)
				}
				for b.Loop() {
					p, err := fam(spec, contract.Context{})
					if err != nil {
						b.Fatal(err)
					}
					plan := p.Schedule(s)
					if len(plan.Run) == 0 {
						b.Fatal("empty plan")
					}
					if g := p.(*Gavel); g.Failures > 0 {
						b.Fatalf("solver failed: %v", g.LastErr)
					}
				}
			})
		}
	}
}

func gavelSnap100(b *testing.B) *engine.Snapshot {
	jobs, m := gavelSeed0(b)
	return policytest.JobsSnap(enginetest.Cluster("8x1:v100,8x1:p100,8x1:k80"), m, jobs[:100])
}

// gavelSeed0 reads Gavel's generated_seed0_lam3600.trace and simulation
// throughputs from ../shared/data/gavel, skipping tb without them.
func gavelSeed0(tb testing.TB) ([]*job.Job, *table.Gavel) {
	return policytest.GavelTrace(tb, 0)
}

// paiSnap2000 builds the PAI cluster from the machine list and 2,000 jobs.
func paiSnap2000(b *testing.B) *engine.Snapshot {
	path := enginetest.SharedData(b) + "/alibaba-pai-2020/pai_machine_spec.csv"
	f, err := os.Open(path)
	if err != nil {
		b.Skipf("PAI machine list not here (%v)", err)
	}
	defer f.Close()
	// machine,gpu_type,cap_cpu,cap_mem,cap_gpu; count machines per (type, GPUs).
	groups := map[string]int{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rec := strings.Split(sc.Text(), ",")
		if len(rec) != 5 {
			b.Fatalf("%s: want 5 fields, got %q", path, sc.Text())
		}
		g, err := strconv.Atoi(rec[4])
		if err != nil {
			b.Fatalf("%s: cap_gpu %q", path, rec[4])
		}
		if g > 0 {
			groups[fmt.Sprintf("%dx:%s", g, strings.ToLower(rec[1]))]++
		}
	}
	var parts []string
	for k, n := range groups {
		g, typ, _ := strings.Cut(k, "x:")
		parts = append(parts, fmt.Sprintf("%dx%s:%s", n, g, typ))
	}
	sort.Strings(parts)
	c := enginetest.Cluster(strings.Join(parts, ","))
	speed := map[string]float64{"v100m32": 1, "v100": 0.95, "p100": 0.55, "t4": 0.45, "misc": 0.35}
	m := jitterModel{perf.SpeedFactors{Base: perf.Duration{}, Speed: speed, Strict: true}}
	rng := rand.New(rand.NewPCG(7, 11))
	sizes := []int{1, 1, 1, 1, 2, 2, 4, 8}
	jobs := make([]*job.Job, 2000)
	for i := range jobs {
		n := sizes[rng.IntN(len(sizes))]
		jobs[i] = enginetest.Job(fmt.Sprintf("j%04d", i)).At(float64(i)).GPUs(n).Seconds(600 + rng.Float64()*36000).Obj()
		jobs[i].Model = strconv.Itoa(i) // keys the jitter
	}
	return policytest.JobsSnap(c, m, jobs)
}

// jitterModel varies SpeedFactors by job: up to +-30% per (job, type).
type jitterModel struct{ perf.SpeedFactors }

func (j jitterModel) Rate(jb *job.Job, a perf.Alloc, p float64) (float64, float64) {
	r, until := j.SpeedFactors.Rate(jb, a, p)
	h := 0
	for _, c := range jb.Model + a.GPUType {
		h = h*31 + int(c)
	}
	return r * (0.7 + 0.6*float64(uint32(h)%1000)/1000), until
}
