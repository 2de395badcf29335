package perf

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
)

func TestAllocCounts(t *testing.T) {
	cases := []struct {
		perNode     []int
		gpus, nodes int
		description string
	}{
		{nil, 0, 0, "empty"},
		{[]int{4}, 4, 1, "one node"},
		{[]int{4, 4, 2}, 10, 3, "three nodes"},
		{[]int{1, 1, 1, 1, 1}, 5, 5, "spread"},
	}
	for _, c := range cases {
		a := Alloc{GPUType: "T4", PerNode: c.perNode}
		if got := a.GPUs(); got != c.gpus {
			t.Errorf("%s: GPUs() = %d, want %d", c.description, got, c.gpus)
		}
		if got := a.Nodes(); got != c.nodes {
			t.Errorf("%s: Nodes() = %d, want %d", c.description, got, c.nodes)
		}
	}
}

func TestPacked(t *testing.T) {
	cases := []struct {
		n, perNode int
		want       []int
	}{
		{1, 4, []int{1}},
		{4, 4, []int{4}},
		{5, 4, []int{4, 1}},
		{8, 4, []int{4, 4}},
		{10, 4, []int{4, 4, 2}},
		{16, 8, []int{8, 8}},
		{3, 1, []int{1, 1, 1}},
		// perNode <= 0: no node size known, everything on one node.
		{6, 0, []int{6}},
		{6, -2, []int{6}},
		// Nothing to place.
		{0, 4, nil},
		{0, 0, nil},
	}
	for _, c := range cases {
		a := Packed("V100", c.n, c.perNode)
		if a.GPUType != "V100" {
			t.Errorf("Packed(V100, %d, %d).GPUType = %q", c.n, c.perNode, a.GPUType)
		}
		if len(a.PerNode) != len(c.want) || (len(c.want) > 0 && !reflect.DeepEqual(a.PerNode, c.want)) {
			t.Errorf("Packed(V100, %d, %d).PerNode = %v, want %v", c.n, c.perNode, a.PerNode, c.want)
		}
		if n := max(c.n, 0); a.GPUs() != n {
			t.Errorf("Packed(V100, %d, %d).GPUs() = %d, want %d", c.n, c.perNode, a.GPUs(), n)
		}
	}
}

// Packing is the most consolidated layout: for every n and node size, the
// node count is ceil(n/perNode), every node but the last is full, and no
// node holds more than perNode GPUs.
func TestPackedProperties(t *testing.T) {
	for perNode := 1; perNode <= 8; perNode++ {
		for n := 1; n <= 64; n++ {
			a := Packed("A100", n, perNode)
			if a.GPUs() != n {
				t.Fatalf("Packed(%d, %d) has %d GPUs", n, perNode, a.GPUs())
			}
			if want := (n + perNode - 1) / perNode; a.Nodes() != want {
				t.Fatalf("Packed(%d, %d) spans %d nodes, want %d", n, perNode, a.Nodes(), want)
			}
			for i, g := range a.PerNode {
				if g <= 0 || g > perNode || (i < len(a.PerNode)-1 && g != perNode) {
					t.Fatalf("Packed(%d, %d) = %v: not full nodes then a remainder", n, perNode, a.PerNode)
				}
			}
		}
	}
}

func TestCostTableFor(t *testing.T) {
	def := Costs{Start: 1, Restart: 2, Resize: 3}
	bert := Costs{Start: 10, Restart: 20, Resize: 30}
	tb := CostTable{Default: def, PerKey: map[string]Costs{"bert": bert}}
	if got := tb.For("bert"); got != bert {
		t.Errorf("For(bert) = %+v, want %+v", got, bert)
	}
	if got := tb.For("cifar10"); got != def {
		t.Errorf("For(cifar10) = %+v, want the default %+v", got, def)
	}
	if got := tb.For(""); got != def {
		t.Errorf("For(\"\") = %+v, want the default %+v", got, def)
	}
	// A nil map is a table with only a default.
	if got := (CostTable{Default: def}).For("bert"); got != def {
		t.Errorf("nil PerKey: For(bert) = %+v, want %+v", got, def)
	}
	// The zero table costs nothing.
	if got := (CostTable{}).For("x"); got != (Costs{}) {
		t.Errorf("zero table: For(x) = %+v, want zero costs", got)
	}
}

func TestPolluxArtifactCosts(t *testing.T) {
	// petuum/adaptdl osdi21-artifact, simulator/simulator.py, Job.reallocate:
	// "self.rescale_time = 30" on every new placement, the first included.
	want := Costs{Start: 30, Restart: 30, Resize: 30}
	if PolluxArtifactCosts != want {
		t.Errorf("PolluxArtifactCosts = %+v, want %+v", PolluxArtifactCosts, want)
	}
}

func TestMeasuredRestartCosts(t *testing.T) {
	// APPLICATIONS_DELAY in applications.py of the DeepBoot simulator
	// (github.com/czq693497091/DeepBoot): the delay of every reallocation
	// of a training job when its fast-rescale (AFE) option is off.
	want := map[string]float64{
		"bert": 103, "cifar10": 24, "ncf": 25, "deepspeech2": 18, "yolov3": 26, "imagenet": 35,
	}
	if len(MeasuredRestartCosts) != len(want) {
		t.Errorf("MeasuredRestartCosts has %d models, want the %d Pollux models", len(MeasuredRestartCosts), len(want))
	}
	for name, s := range want {
		c, ok := MeasuredRestartCosts[name]
		if !ok {
			t.Errorf("MeasuredRestartCosts lacks %s", name)
			continue
		}
		if c != (Costs{Start: s, Restart: s, Resize: s}) {
			t.Errorf("MeasuredRestartCosts[%s] = %+v, want %v s for each", name, c, s)
		}
	}
	// Used as a table, a model without measurements falls back to the default.
	tb := CostTable{Default: PolluxArtifactCosts, PerKey: MeasuredRestartCosts}
	if got := tb.For("bert").Restart; got != 103 {
		t.Errorf("table For(bert).Restart = %v, want 103", got)
	}
	if got := tb.For("resnet50"); got != PolluxArtifactCosts {
		t.Errorf("table For(resnet50) = %+v, want the default", got)
	}
}

func TestErrUnknownModelWraps(t *testing.T) {
	err := fmt.Errorf("job j1: model %q: %w", "gpt", ErrUnknownModel)
	if !errors.Is(err, ErrUnknownModel) {
		t.Errorf("errors.Is(%v, ErrUnknownModel) = false", err)
	}
}

func secondsJob(gpus, minGPUs int, work float64) *job.Job {
	return &job.Job{ID: "j", GPUs: gpus, MinGPUs: minGPUs, MaxGPUs: max(gpus, 16), Work: work, Unit: job.Seconds}
}

func TestDurationName(t *testing.T) {
	if got := (Duration{}).Name(); got != "duration" {
		t.Errorf("Name() = %q", got)
	}
}

func TestDurationCheck(t *testing.T) {
	var d Duration
	if err := d.Check(secondsJob(4, 1, 100)); err != nil {
		t.Errorf("Check(seconds job) = %v, want nil", err)
	}
	for _, u := range []job.Unit{job.Epochs, job.Iterations, job.Samples, ""} {
		j := secondsJob(4, 1, 100)
		j.ID = "bad-unit"
		j.Unit = u
		err := d.Check(j)
		if err == nil {
			t.Errorf("Check(unit %q) = nil, want an error", u)
			continue
		}
		if !strings.Contains(err.Error(), "bad-unit") || !strings.Contains(err.Error(), fmt.Sprintf("%q", u)) {
			t.Errorf("Check(unit %q) = %q: want the job id and the unit in the message", u, err)
		}
	}
}

func TestDurationWork(t *testing.T) {
	var d Duration
	for _, w := range []float64{1, 3600, 12345.5} {
		if got := d.Work(secondsJob(4, 1, w)); got != w {
			t.Errorf("Work(job of %v s) = %v", w, got)
		}
	}
}

func TestDurationRate(t *testing.T) {
	var d Duration
	j := secondsJob(4, 2, 1000) // requested 4 GPUs, runs on 2 or more
	cases := []struct {
		perNode []int
		want    float64
	}{
		{[]int{4}, 1},          // the requested count: 1 s of work per second
		{[]int{2, 2}, 1},       // layout does not matter
		{[]int{2}, 0.5},        // half the GPUs, half the speed
		{[]int{3}, 0.75},       // 3/4
		{[]int{8}, 2},          // twice the GPUs, twice the speed
		{[]int{4, 4, 4, 4}, 4}, // 16/4
		{[]int{1}, 0},          // below MinGPUs: cannot run
		{nil, 0},               // no GPUs
	}
	for _, c := range cases {
		for _, gt := range []string{"", "T4", "A100"} { // any GPU type, same speed
			r, until := d.Rate(j, Alloc{GPUType: gt, PerNode: c.perNode}, 0)
			if r != c.want {
				t.Errorf("Rate(%v on %q) = %v, want %v", c.perNode, gt, r, c.want)
			}
			if !math.IsInf(until, 1) {
				t.Errorf("Rate(%v) until = %v, want +Inf (the rate never changes)", c.perNode, until)
			}
		}
	}
	// Progress does not change the rate.
	for _, p := range []float64{0, 1, 500, 999.9} {
		if r, _ := d.Rate(j, Alloc{PerNode: []int{2}}, p); r != 0.5 {
			t.Errorf("Rate at progress %v = %v, want 0.5", p, r)
		}
	}
}

func TestDurationRemaining(t *testing.T) {
	var d Duration
	j := secondsJob(4, 1, 1000)
	cases := []struct {
		n    int
		p    float64
		want float64
	}{
		{4, 0, 1000},  // the trace's duration on its requested GPUs
		{2, 0, 2000},  // half the GPUs: twice as long
		{8, 0, 500},   // linear scaling
		{1, 0, 4000},  // one GPU
		{4, 250, 750}, // from progress 250
		{2, 600, 800}, // 400 s of work at speed 1/2
		{4, 1000, 0},  // finished
		{4, 1500, 0},  // past the end
	}
	for _, c := range cases {
		got := Remaining(d, j, Packed("T4", c.n, 4), c.p)
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("Remaining(n=%d, p=%v) = %v, want %v", c.n, c.p, got, c.want)
		}
	}
	// Work equals the duration: Remaining from 0 on the requested count is
	// exactly Work.
	if got := Remaining(d, j, Packed("T4", j.GPUs, 8), 0); got != d.Work(j) {
		t.Errorf("Remaining on the requested GPUs = %v, want Work = %v", got, d.Work(j))
	}
	// Below MinGPUs the job cannot run.
	j.MinGPUs = 2
	if got := Remaining(d, j, Packed("T4", 1, 4), 0); !math.IsInf(got, 1) {
		t.Errorf("Remaining below MinGPUs = %v, want +Inf", got)
	}
	if got := Remaining(d, j, Alloc{}, 0); !math.IsInf(got, 1) {
		t.Errorf("Remaining on no GPUs = %v, want +Inf", got)
	}
}

func TestDurationCosts(t *testing.T) {
	d := Duration{Cost: CostTable{Default: Costs{Restart: 30, Resize: 30}, PerKey: map[string]Costs{"bert": {Start: 1, Restart: 2, Resize: 3}}}}
	j := secondsJob(1, 1, 10)
	if got := d.Costs(j); got != (Costs{Restart: 30, Resize: 30}) {
		t.Errorf("Costs(no model) = %+v, want the default", got)
	}
	j.Model = "bert"
	if got := d.Costs(j); got != (Costs{Start: 1, Restart: 2, Resize: 3}) {
		t.Errorf("Costs(bert) = %+v, want the per-model costs", got)
	}
}

// stepModel is a hand-made Model whose rate changes at given progress
// points, to check Remaining's piecewise integration.
type stepModel struct {
	work   float64
	bounds []float64 // rate i holds on [bounds[i-1], bounds[i]); last bound is +Inf
	rates  []float64
	calls  int
}

func (m *stepModel) Name() string          { return "step" }
func (m *stepModel) Check(*job.Job) error  { return nil }
func (m *stepModel) Work(*job.Job) float64 { return m.work }
func (m *stepModel) Costs(*job.Job) Costs  { return Costs{} }
func (m *stepModel) Rate(_ *job.Job, _ Alloc, p float64) (float64, float64) {
	m.calls++
	for i, b := range m.bounds {
		if p < b {
			return m.rates[i], b
		}
	}
	return m.rates[len(m.rates)-1], math.Inf(1)
}

func TestRemainingPiecewise(t *testing.T) {
	m := &stepModel{work: 10, bounds: []float64{4, 8, math.Inf(1)}, rates: []float64{1, 2, 0.5}}
	a := Alloc{PerNode: []int{1}}
	cases := []struct{ p, want float64 }{
		// 4 at rate 1, 4 at rate 2, 2 at rate 1/2: 4 + 2 + 4.
		{0, 10},
		// 1 at rate 1, then 2 + 4.
		{3, 7},
		// Exactly on a boundary: the next piece.
		{4, 6},
		{6, 5},
		{8, 4},
		{9.5, 1},
		{10, 0},
		{12, 0},
	}
	for _, c := range cases {
		if got := Remaining(m, nil, a, c.p); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("Remaining from %v = %v, want %v", c.p, got, c.want)
		}
	}
	// The work ends inside a piece: the piece is cut at Work.
	m2 := &stepModel{work: 5, bounds: []float64{4, 8}, rates: []float64{1, 2}}
	if got := Remaining(m2, nil, a, 0); math.Abs(got-4.5) > 1e-12 {
		t.Errorf("Remaining with work inside a piece = %v, want 4 + 1/2", got)
	}
	// One Rate call per piece.
	m.calls = 0
	Remaining(m, nil, a, 0)
	if m.calls != 3 {
		t.Errorf("Remaining called Rate %d times for 3 pieces", m.calls)
	}
}

func TestRemainingCannotRun(t *testing.T) {
	a := Alloc{PerNode: []int{1}}
	// Zero rate from the start.
	if got := Remaining(&stepModel{work: 10, rates: []float64{0}}, nil, a, 0); !math.IsInf(got, 1) {
		t.Errorf("zero rate: Remaining = %v, want +Inf", got)
	}
	// Zero rate in a later piece.
	m := &stepModel{work: 10, bounds: []float64{5}, rates: []float64{1, 0}}
	if got := Remaining(m, nil, a, 0); !math.IsInf(got, 1) {
		t.Errorf("zero rate after 5: Remaining = %v, want +Inf", got)
	}
	// A NaN or negative rate is no rate at all.
	for _, r := range []float64{math.NaN(), -1} {
		if got := Remaining(&stepModel{work: 10, rates: []float64{r}}, nil, a, 0); !math.IsInf(got, 1) {
			t.Errorf("rate %v: Remaining = %v, want +Inf", r, got)
		}
	}
}

func TestScaled(t *testing.T) {
	j := &job.Job{ID: "a", GPUs: 2, MinGPUs: 1, MaxGPUs: 8, Work: 100, Unit: job.Seconds}
	s := Scaled{Model: Duration{}, Type: "v100", Ref: "a100", Lambda: 0.4}
	for _, tc := range []struct {
		typ  string
		gpus int
		want float64
	}{{"v100", 1, 0.4 * 0.5}, {"V100", 4, 0.4 * 2}, {"a100", 4, 2}, {"t4", 1, 0.5}} {
		if r, _ := s.Rate(j, Packed(tc.typ, tc.gpus, 8), 0); math.Abs(r-tc.want) > 1e-12 {
			t.Errorf("%d %s: rate %v, want %v", tc.gpus, tc.typ, r, tc.want)
		}
	}
	if !s.Valid() || (Scaled{Lambda: 0}).Valid() || (Scaled{Lambda: 1.5}).Valid() {
		t.Error("Valid")
	}
	if got := CheckpointGiB("bert"); math.Abs(got-110e6*12/(1<<30)) > 1e-9 || CheckpointGiB("nope") != DefaultCheckpointGiB {
		t.Errorf("checkpoint sizes: bert %v", got)
	}
}
