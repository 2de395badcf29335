package scenario

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/solver"
)

// TestRandomClusters: every policy, with its defaults and its presets
// (policy.Info.Presets), runs every job to
// an end (finished, or declined by a deadline policy) on small random
// clusters: one to three GPU types, a cloud whose nodes may fail, and an
// edge or inference site or both whose capacity varies, with jobs of one
// to eight GPUs, some pinned to a type, some with deadlines. A policy that
// leaves a job waiting for ever fails the run (the simulator says so).
// Its first 24 seeds found elasticflow, edgeflow, tidal, deepboot and aryl
// giving jobs pinned to a type another type; seeds 25 to 1,024, the Gavel
// policies, gandiva-fair and allox counting a type's GPUs over sites no job
// spans, and gandiva migrating a job back onto a type the greedy pass had
// moved it off; with the presets, gandiva:preset=gavel's rotation handing
// a type to a job no one site of it could hold. All pass now; 200 seeds run
// here (TIDE_RANDOM_CLUSTERS: "N" for seeds 1..N, "A-B" for A..B).
func TestRandomClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every policy on random clusters")
	}
	lo, hi := draws(t, "TIDE_RANDOM_CLUSTERS", 200)
	everyPolicy(t, lo, hi, false)
}

// TestRandomClustersRich is TestRandomClusters with tenants, priorities,
// elastic ranges and parts of GPUs in the traces (richColumns): each
// policy runs every job to an end, or refuses at the start, naming it, a
// job it cannot run (a part of a GPU under an elastic policy).
// TIDE_RANDOM_RICH: "N" for seeds 1..N, "A-B" for A..B (default 1-60).
func TestRandomClustersRich(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every policy on random clusters")
	}
	lo, hi := draws(t, "TIDE_RANDOM_RICH", 60)
	everyPolicy(t, lo, hi, true)
}

// everyPolicy runs every policy and preset on randomCluster's draws lo..hi.
func everyPolicy(t *testing.T, lo, hi uint64, rich bool) {
	var specs []string
	for _, info := range policy.All() {
		if info.NeedsSolver && solver.Available() != nil {
			continue
		}
		specs = append(specs, info.Name)
		for _, p := range info.Presets {
			if p != info.Name {
				specs = append(specs, p)
			}
		}
	}
	for seed := lo; seed <= hi; seed++ {
		y, tr, ins, ok := randomCluster(t, seed, rich)
		if !ok {
			continue
		}
		for _, spec := range specs {
			t.Run(fmt.Sprintf("seed%d/%s", seed, spec), func(t *testing.T) {
				r, err := ins.Build(spec)
				if err != nil {
					if rich && jobNamed.MatchString(err.Error()) {
						return
					}
					t.Logf("build: %v", err)
					return
				}
				res, msg := runResult(r)
				if msg == "" {
					msg = resultHolds(res)
				}
				if msg != "" {
					t.Errorf("%s\n%s\n%s", msg, y, tr)
				}
			})
		}
	}
}

// resultHolds says what a run's result breaks of what every run must
// hold ("" when nothing): every job ended, finished (with some useful
// GPU-seconds) or declined, its times in order, its figures finite and
// not negative, its useful GPU-seconds within those it held; at every
// sample no more GPUs held than the cluster has, nor more making
// progress than held.
func resultHolds(res *report.Run) string {
	const eps = 1e-6
	for _, j := range res.Jobs {
		figs := []float64{j.GPUSeconds, j.UsefulGPUSeconds, j.RestartSeconds, j.WaitSeconds, j.SharedGPUSeconds}
		for _, f := range figs {
			if math.IsNaN(f) || math.IsInf(f, 0) || f < -eps {
				return fmt.Sprintf("job %s: a figure %v (GPU-s %v, useful %v, restart %v, wait %v, shared %v)", j.ID, f, figs[0], figs[1], figs[2], figs[3], figs[4])
			}
		}
		switch j.State {
		case "finished":
			if j.Start < j.Submit-eps || j.Finish < j.Start-eps {
				return fmt.Sprintf("job %s: submitted %v, started %v, finished %v", j.ID, j.Submit, j.Start, j.Finish)
			}
			if j.UsefulGPUSeconds <= 0 {
				return fmt.Sprintf("job %s finished with no useful GPU-seconds", j.ID)
			}
			if j.WaitSeconds > j.Finish-j.Submit+eps {
				return fmt.Sprintf("job %s waited %v s of the %v s from its submission to its end", j.ID, j.WaitSeconds, j.Finish-j.Submit)
			}
		case "declined":
		default:
			return fmt.Sprintf("job %s ended %s", j.ID, j.State)
		}
		if j.UsefulGPUSeconds > j.GPUSeconds*(1+1e-9)+eps {
			return fmt.Sprintf("job %s: %v useful GPU-seconds of %v held", j.ID, j.UsefulGPUSeconds, j.GPUSeconds)
		}
	}
	for _, s := range res.Timeline {
		if int(s.Allocated) > res.TotalGPUs || s.Useful > s.Allocated || s.Allocated < 0 {
			return fmt.Sprintf("t=%v: %d GPUs held, %d making progress, of %d", s.T, s.Allocated, s.Useful, res.TotalGPUs)
		}
	}
	return ""
}

// richColumns draws a job's tenant, priority and either an elastic range
// or a part of each of its g GPUs (a share, or a MIG slice on an A100),
// as tide-csv's columns after gpu_type; room is the most GPUs its type
// has on one site.
func richColumns(x *rand.Rand, g, room int, typ string) string {
	tenant := []string{"vision", "nlp", "ops"}[x.IntN(3)]
	prio := 0
	if x.IntN(10) < 3 {
		prio = 1
	}
	lo, hi, share, mig := "", "", "", ""
	switch k := x.IntN(10); {
	case k < 3:
		lo, hi = "1", fmt.Sprint(min(2*g, room))
	case k < 5 && g <= 2:
		share = []string{"0.25", "0.5", "50%"}[x.IntN(3)]
	case k < 6 && g <= 2 && typ == "a100":
		mig = []string{"1g.10gb", "3g.40gb"}[x.IntN(2)]
	}
	return fmt.Sprintf(",%s,%d,%s,%s,%s,%s", tenant, prio, lo, hi, share, mig)
}

// randomCluster draws TestRandomClusters' cluster and trace for seed (one
// to three GPU types, a cloud whose nodes may fail, edge and inference
// sites whose capacity varies, 14 jobs) and returns the scenario, the
// trace and its inputs; ok is false when the draw has no runnable point
// (logged). rich adds tenants, priorities, elastic ranges and parts of
// GPUs (richColumns).
func randomCluster(t *testing.T, seed uint64, rich bool) (y, tr string, ins *assemble.Inputs, ok bool) {
	t.Helper()
	types := []string{"a100", "v100", "t4"}
	r := rand.New(rand.NewPCG(seed, 7))
	// rich's draws come from a stream of their own: the other draws stay
	// what they are without it.
	x := rand.New(rand.NewPCG(seed, 13))
	pin := seed%2 == 0
	dir := t.TempDir()
	nt := 1 + r.IntN(3)
	var nodes []string
	total := map[string]int{} // GPUs of each type on the cloud
	most := 0
	for k := 0; k < nt; k++ {
		count, gpus := 1+r.IntN(3), []int{1, 2, 4, 8}[r.IntN(4)]
		nodes = append(nodes, fmt.Sprintf("{count: %d, gpus: %d, gpu: %s}", count, gpus, types[k]))
		total[types[k]] = count * gpus
		most = max(most, count*gpus)
	}
	y = "name: random\ncluster:\n  sites:\n    - {name: cloud, nodes: [" + strings.Join(nodes, ", ") + "]}\n"
	var avail []string
	edge, infer := r.IntN(2) == 0, r.IntN(2) == 0
	if edge {
		y += fmt.Sprintf("    - {name: edge, kind: edge, nodes: [{count: %d, gpus: 1, gpu: v100}]}\n", 1+r.IntN(4))
		avail = append(avail, fmt.Sprintf("    - {site: edge, measure: available, period: 14400, trough: 0, peak: 4, noise: 1, step: 600, seed: %d}", seed))
	}
	if infer {
		y += fmt.Sprintf("    - {name: infer, kind: inference, nodes: [{count: 1, gpus: %d, gpu: a100}]}\n", []int{2, 4, 8}[r.IntN(3)])
		avail = append(avail, fmt.Sprintf("    - {site: infer, measure: inference, period: 14400, trough: 0, peak: 8, noise: 1, step: 600, seed: %d}", seed+100))
	}
	if len(avail) > 0 || r.IntN(2) == 0 {
		y += "availability:\n"
		if len(avail) > 0 {
			y += "  diurnal:\n" + strings.Join(avail, "\n") + "\n"
		}
		if r.IntN(2) == 0 {
			y += fmt.Sprintf("  faults: [{site: cloud, mtbf: %d, mttr: 1800, seed: %d}]\n", 7200+r.IntN(20000), seed)
		}
	}
	// The largest job fits the cloud's largest node group.
	tr = "id,submit,gpus,duration,deadline,gpu_type"
	if rich {
		tr += ",tenant,priority,min_gpus,max_gpus,gpu_share,mig"
	}
	tr += "\n"
	for i := 0; i < 14; i++ {
		sub := i * (300 + r.IntN(2400))
		g := []int{1, 1, 2, 4, 8}[r.IntN(5)]
		dl := ""
		if r.IntN(2) == 0 {
			dl = fmt.Sprint(sub + 2000 + r.IntN(20000))
		}
		typ, room := "", most
		if pin && r.IntN(4) == 0 {
			typ = types[r.IntN(nt)]
			room = total[typ]
		}
		g = min(g, room)
		tr += fmt.Sprintf("j%d,%d,%d,%d,%s,%s", i, sub, g, 600+r.IntN(5400), dl, typ)
		if rich {
			tr += richColumns(x, g, room, typ)
		}
		tr += "\n"
	}
	write(t, filepath.Join(dir, "t.csv"), tr)
	model := "model: {kind: duration, costs: \"5\""
	if edge {
		model += ", edge: {type: v100, ref: a100, lambda: 0.5}"
	}
	y += "trace: {file: t.csv, format: tide-csv, sort: true}\n" + model + "}\nround: 120\npolicies: [fifo]\n"
	ins, ok = loadDraw(t, dir, seed, y)
	return y, tr, ins, ok
}

// randomPollux draws a scenario on Pollux's model and measured profiles
// (embedded): 10 to 30 jobs of workload-6 (cifar10, bert, imagenet, ...,
// elastic, batch sizes adapted by goodput, each job's agent fitting and
// reporting its goodput model), their arrivals compressed, on one to four
// T4 nodes of one to four GPUs, sometimes beside an inference site whose
// demand follows a wave, sometimes with node faults. It returns the
// scenario, the trace and its inputs; ok as randomCluster's.
func randomPollux(t *testing.T, seed uint64) (y, tr string, ins *assemble.Inputs, ok bool) {
	t.Helper()
	r := rand.New(rand.NewPCG(seed, 17))
	b, err := os.ReadFile("../data/pollux/workloads/workload-6.csv")
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	rows := lines[1:]
	pick := r.Perm(len(rows))[:10+r.IntN(21)]
	slices.Sort(pick)
	squeeze := []float64{1, 0.25, 0.05}[r.IntN(3)]
	tr = lines[0] + "\n"
	for _, i := range pick {
		f := strings.Split(rows[i], ",")
		at, err := strconv.ParseFloat(f[1], 64)
		if err != nil {
			t.Fatal(err)
		}
		f[1] = strconv.FormatFloat(math.Round(at*squeeze), 'f', -1, 64)
		tr += strings.Join(f, ",") + "\n"
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.csv"), tr)
	y = fmt.Sprintf("name: random-pollux\ncluster:\n  sites:\n    - {name: train, nodes: [{count: %d, gpus: %d, gpu: t4}]}\n", 1+r.IntN(4), 1<<r.IntN(3))
	var avail []string
	if r.IntN(3) == 0 {
		y += fmt.Sprintf("    - {name: infer, kind: inference, nodes: [{count: %d, gpus: 4, gpu: t4}]}\n", 1+r.IntN(2))
		avail = append(avail, fmt.Sprintf("  diurnal:\n    - {site: infer, measure: inference, period: 14400, trough: 0, peak: 8, noise: 1, step: 600, seed: %d}", seed))
	}
	if r.IntN(3) == 0 {
		avail = append(avail, fmt.Sprintf("  faults: [{site: train, mtbf: %d, mttr: 1800, seed: %d}]", 7200+r.IntN(40000), seed))
	}
	if len(avail) > 0 {
		y += "availability:\n" + strings.Join(avail, "\n") + "\n"
	}
	y += "trace: {file: t.csv, format: pollux, sort: true}\nmodel: {kind: pollux}\nround: 60\npolicies: [fifo]\n"
	ins, ok = loadDraw(t, dir, seed, y)
	return y, tr, ins, ok
}

// loadDraw writes scenario y into dir (beside its trace) and loads its
// one point's inputs; ok is false, logged, when the point cannot run.
func loadDraw(t *testing.T, dir string, seed uint64, y string) (*assemble.Inputs, bool) {
	t.Helper()
	write(t, filepath.Join(dir, "s.yaml"), y)
	sc, err := Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatalf("seed %d: %v\n%s", seed, err, y)
	}
	in, pts, err := sc.readPoints()
	if err != nil {
		t.Logf("seed %d: %v (skipped)\n%s", seed, err, y)
		return nil, false
	}
	ins, err := sc.inputs(in, pts[0])
	if err != nil {
		t.Fatalf("seed %d: %v", seed, err)
	}
	return ins, true
}
