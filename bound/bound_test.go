package bound

import (
	"fmt"
	"math"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/solver"
	"github.com/tide-sched/tide/solver/solvertest"
)

// sqrtModel runs a job of Work w at sqrt(g) units per second on g GPUs: on
// 1, 2, 3 and 4 GPUs it takes w, w/1.414, w/1.732 and w/2 seconds, and
// spends w, 1.414w, 1.732w and 2w GPU-seconds.
type sqrtModel struct{}

func (sqrtModel) Name() string              { return "sqrt" }
func (sqrtModel) Check(*job.Job) error      { return nil }
func (sqrtModel) Work(j *job.Job) float64   { return j.Work }
func (sqrtModel) Costs(*job.Job) perf.Costs { return perf.Costs{} }
func (sqrtModel) Rate(_ *job.Job, a perf.Alloc, _ float64) (float64, float64) {
	return math.Sqrt(float64(a.GPUs())), math.Inf(1)
}

// halfway runs at 1 unit per second per GPU up to half its work and at a
// tenth of that after, whatever the count: its rate moves with progress.
type halfway struct{ sqrtModel }

func (halfway) Rate(j *job.Job, a perf.Alloc, p float64) (float64, float64) {
	if p < j.Work/2 {
		return float64(a.GPUs()), j.Work / 2
	}
	return float64(a.GPUs()) / 10, math.Inf(1)
}

func jobs(n int, work, submit, deadline float64) []*job.Job {
	var out []*job.Job
	for i := 0; i < n; i++ {
		out = append(out, &job.Job{ID: string(rune('a' + i)), Submit: submit, Deadline: deadline, Work: work, GPUs: 1, MinGPUs: 1, MaxGPUs: 64})
	}
	return out
}

func pool(gpus int) Pool {
	return Pool{Name: "cloud", GPUTypes: []string{"x"}, PerNode: gpus, GPUs: gpus}
}

func TestDeadlines(t *testing.T) {
	solvertest.Require(t)
	duration := perf.Duration{}
	for _, tc := range []struct {
		name  string
		m     perf.Model
		jobs  []*job.Job
		pools []Pool
		want  int
		alone int
	}{
		// Three jobs of 100 GPU-seconds in [0, 250] on one GPU: 250
		// GPU-seconds hold two.
		{"one GPU, two of three fit", duration, jobs(3, 100, 0, 250), []Pool{pool(1)}, 2, 0},
		{"one GPU, all three fit", duration, jobs(3, 100, 0, 300), []Pool{pool(1)}, 3, 0},
		// The same three on a GPU that is down for 100 of the 300 s.
		{"capacity dips", duration, jobs(3, 100, 0, 300), []Pool{{Name: "c", GPUTypes: []string{"x"}, PerNode: 1, GPUs: 1,
			Capacity: forecast.Series{{T: 0, V: 1}, {T: 100, V: 0}, {T: 200, V: 1}}}}, 2, 0},
		// Two jobs of work 100 due in 60 s on 4 GPUs at sqrt(g): alone,
		// each needs at least 3 GPUs for part of its run. On the
		// envelope between 3 GPUs (57.7 s, 173.2 GPU-s) and 2 (70.7 s,
		// 141.4 GPU-s), 60 s costs at least 167 GPU-s: two need 335, the
		// pool has 240. Counting only the least GPU-seconds (100 each)
		// would let both in.
		{"the deadline makes jobs dear", sqrtModel{}, jobs(2, 100, 0, 60), []Pool{pool(4)}, 1, 0},
		// Due in 40 s: even 4 GPUs (50 s) are too slow.
		{"too slow alone", sqrtModel{}, jobs(2, 100, 0, 40), []Pool{pool(4)}, 0, 2},
		// A second pool of 4 GPUs takes the other job.
		{"two pools", sqrtModel{}, jobs(2, 100, 0, 60), []Pool{pool(4), {Name: "edge", GPUTypes: []string{"x"}, PerNode: 4, GPUs: 4}}, 2, 0},
		// An edge pool whose jobs hold at most one GPU: 100 s alone, too
		// slow for a 60 s deadline, so it adds nothing.
		{"one GPU per job on the edge", sqrtModel{}, jobs(2, 100, 0, 60), []Pool{pool(4), {Name: "edge", GPUTypes: []string{"x"}, PerNode: 1, GPUs: 8, MaxJob: 1}}, 1, 0},
		// Two jobs of 6 s on one A100, due at 10 s; a second pool holds one
		// V100 at half an A100's speed (12 s alone: too slow). Both can be
		// met: a on the A100 over [0, 6]; b on the V100 over [0, 8] (4 s
		// of its work), then on the A100 over [8, 10]. A job too slow on a
		// pool alone may still do part of its work there.
		{"part of the work on a pool too slow alone", perf.Scaled{Model: duration, Type: "v100", Ref: "a100", Lambda: 0.5},
			jobs(2, 6, 0, 10), []Pool{{Name: "cloud", GPUTypes: []string{"a100"}, PerNode: 1, GPUs: 1},
				{Name: "edge", GPUTypes: []string{"v100"}, PerNode: 1, GPUs: 1, MaxJob: 1}}, 2, 0},
		// Windows apart: each job has the pool to itself.
		{"windows apart", duration, append(jobs(1, 100, 0, 100), jobs(1, 100, 100, 200)...), []Pool{pool(1)}, 2, 0},
		// Rates that move with progress: the least GPU-seconds (work 100:
		// 50 at 1 unit/s, then 50 at 0.1: 550 on one GPU) and the least
		// time (on 2 GPUs: 25 + 250 = 275 s) still bound it. Two jobs
		// due at 600 on 2 GPUs: 1,100 GPU-s needed, 1,200 there.
		{"rates that move", halfway{}, jobs(2, 100, 0, 600), []Pool{pool(2)}, 2, 0},
		{"rates that move, too little", halfway{}, jobs(3, 100, 0, 600), []Pool{pool(2)}, 2, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			js := tc.jobs
			for i, j := range js {
				j.ID = string(rune('a' + i))
			}
			got, err := Deadlines(js, tc.m, tc.pools, solver.Options{})
			if err != nil {
				t.Fatal(err)
			}
			if got.Bound != tc.want || got.Alone != tc.alone || got.Jobs != len(js) {
				t.Errorf("got %+v, want bound %d, alone %d of %d", got, tc.want, tc.alone, len(js))
			}
		})
	}
}

func TestDeadlinesIgnoresJobsWithoutDeadline(t *testing.T) {
	solvertest.Require(t)
	js := jobs(3, 100, 0, 300)
	js[0].Deadline = 0
	got, err := Deadlines(js, perf.Duration{}, []Pool{pool(1)}, solver.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Jobs != 2 || got.Bound != 2 {
		t.Errorf("got %+v, want 2 jobs with deadlines, both met", got)
	}
}

func TestDeadlinesErrors(t *testing.T) {
	for _, pools := range [][]Pool{nil, {{Name: "p", GPUs: 0, GPUTypes: []string{"x"}}}, {{Name: "p", GPUs: 4}}} {
		if _, err := Deadlines(jobs(1, 1, 0, 10), perf.Duration{}, pools, solver.Options{}); err == nil {
			t.Errorf("pools %+v: no error", pools)
		}
	}
}

// TestWindowsAsBroken: Deadlines hands the solver only the windows its
// solutions break (solveWindows); on random traces (BenchmarkDeadlines'
// jobs and pools, at rates constant and moving with progress) its result
// is the one of the whole program, every window handed at once, and of
// adding five windows a solve. The traces are tight enough that windows
// bind: the bound is under the job count on each.
func TestWindowsAsBroken(t *testing.T) {
	solvertest.Require(t)
	for seed := range uint64(4) {
		r := rand.New(rand.NewPCG(seed, 40))
		var js []*job.Job
		for i := range 40 {
			at := r.Float64() * 43200
			js = append(js, &job.Job{ID: fmt.Sprint(i), Submit: at, Deadline: at + 3600 + r.Float64()*21600,
				Work: 2000 + r.Float64()*38000, GPUs: 1, MinGPUs: 1, MaxGPUs: 16})
		}
		var cloud forecast.Series
		for at := 0.0; at < 86400; at += 21600 {
			cloud = append(cloud, forecast.Point{T: at, V: 8}, forecast.Point{T: at + 10000, V: 4}, forecast.Point{T: at + 13600, V: 8})
		}
		pools := []Pool{
			{Name: "cloud", GPUTypes: []string{"x"}, PerNode: 4, GPUs: 8, Capacity: cloud},
			{Name: "edge", GPUTypes: []string{"x"}, PerNode: 1, GPUs: 2, MaxJob: 1},
		}
		for _, m := range []perf.Model{sqrtModel{}, halfway{}} {
			whole, err := deadlines(js, m, pools, solver.Options{}, 0)
			if err != nil {
				t.Fatal(err)
			}
			if whole.Bound >= whole.Jobs-whole.Alone || whole.Windows == 0 {
				t.Errorf("seed %d, %T: bound %d of %d jobs (%d alone), %d windows: no window binds", seed, m, whole.Bound, whole.Jobs, whole.Alone, whole.Windows)
			}
			for _, per := range []int{windowsPerRound, 5} {
				got, err := deadlines(js, m, pools, solver.Options{}, per)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(got, whole) {
					t.Errorf("seed %d, %T, %d windows a solve: %+v, the whole program %+v", seed, m, per, got, whole)
				}
			}
		}
	}
}
