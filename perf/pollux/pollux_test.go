package pollux

// Expected values in these tests are read by hand from the profiles under
// data/pollux/profiles/<model>/ (the Pollux OSDI'21 artifact's
// simulator/traces). "placements.csv line N" is the N-th line of the file,
// the header being line 1; the same for the other CSVs. Validation files
// hold one row per epoch: epoch e (0-based) is on line e+2.

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"sync"
	"testing"

	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

var (
	artifactOnce  sync.Once
	artifactModel *Model
	artifactErr   error
)

// artifact is the model over the embedded profiles, loaded once.
func artifact(t testing.TB) *Model {
	t.Helper()
	artifactOnce.Do(func() { artifactModel, artifactErr = Load(data.FS, data.ProfilesDir) })
	if artifactErr != nil {
		t.Fatalf("Load(embedded profiles): %v", artifactErr)
	}
	return artifactModel
}

func profile(t testing.TB, name string) *Profile {
	t.Helper()
	p := artifact(t).Profiles[name]
	if p == nil {
		t.Fatalf("no profile %q", name)
	}
	return p
}

func epochJob(model string, batch int) *job.Job {
	return &job.Job{ID: "j-" + model, Model: model, BatchSize: batch, GPUs: 1, MinGPUs: 1, MaxGPUs: 64, Work: 1000, Unit: job.Epochs}
}

func alloc(perNode ...int) perf.Alloc { return perf.Alloc{GPUType: "T4", PerNode: perNode} }

// near reports whether got is within a relative 1e-12 of want.
func near(got, want float64) bool {
	return math.Abs(got-want) <= 1e-12*math.Max(1, math.Abs(want))
}

func configure(t *testing.T, model string, perNode []int, batch int) Config {
	t.Helper()
	c, ok := profile(t, model).Configure(perNode, batch)
	if !ok {
		t.Fatalf("%s.Configure(%v, %d): not ok", model, perNode, batch)
	}
	return c
}

func TestLoadEmbeddedProfiles(t *testing.T) {
	m := artifact(t)
	want := []string{"bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"}
	if got := m.ModelNames(); !reflect.DeepEqual(got, want) {
		t.Fatalf("ModelNames() = %v, want %v", got, want)
	}
	if m.Name() != "pollux-profiles" {
		t.Errorf("Name() = %q", m.Name())
	}
	// InitBatch/MaxBatch: smallest and largest N of validation-N.csv.
	// Min/MaxLocalBsz: smallest and largest local_bsz of placements.csv,
	// except yolov3, which the artifact's applications.py caps at 8
	// (max_local_bsz=8) although placements.csv goes up to 16.
	// MaxEpochs: max_epochs in applications.py's APPLICATIONS; every
	// validation file has exactly that many rows.
	cases := []struct {
		name                     string
		init, max, minL, maxL, e int
	}{
		{"bert", 12, 384, 4, 12, 2},
		{"cifar10", 128, 4096, 32, 1024, 100},
		{"deepspeech2", 20, 640, 10, 80, 80},
		{"imagenet", 200, 12800, 20, 200, 90},
		{"ncf", 256, 32768, 32, 32768, 10},
		{"yolov3", 8, 512, 4, 8, 50},
	}
	for _, c := range cases {
		p := profile(t, c.name)
		got := [5]int{p.InitBatch, p.MaxBatch, p.MinLocalBsz, p.MaxLocalBsz, p.MaxEpochs}
		if got != [5]int{c.init, c.max, c.minL, c.maxL, c.e} {
			t.Errorf("%s: (InitBatch, MaxBatch, MinLocalBsz, MaxLocalBsz, MaxEpochs) = %v, want %v",
				c.name, got, [5]int{c.init, c.max, c.minL, c.maxL, c.e})
		}
		if p.Name != c.name {
			t.Errorf("profile %s has Name %q", c.name, p.Name)
		}
		if Epochs[c.name] != c.e {
			t.Errorf("Epochs[%s] = %d, want %d", c.name, Epochs[c.name], c.e)
		}
	}
}

func TestCosts(t *testing.T) {
	m := artifact(t)
	for _, name := range m.ModelNames() {
		if got := m.Costs(epochJob(name, 0)); got != perf.PolluxArtifactCosts {
			t.Errorf("Costs(%s) = %+v, want the artifact's 30 s for every change", name, got)
		}
		// The measured restart table covers every profiled model.
		if _, ok := perf.MeasuredRestartCosts[name]; !ok {
			t.Errorf("perf.MeasuredRestartCosts has no entry for the profiled model %s", name)
		}
	}
	m2 := &Model{Profiles: m.Profiles, Cost: perf.CostTable{Default: perf.PolluxArtifactCosts, PerKey: perf.MeasuredRestartCosts}}
	if got := m2.Costs(epochJob("bert", 0)); got != (perf.Costs{Start: 103, Restart: 103, Resize: 103}) {
		t.Errorf("Costs(bert) with measured costs = %+v", got)
	}
}

// Work is the artifact's get_progress(max_epochs): the smallest progress
// value, over all validation files, on the row of the last epoch.
func TestWorkIsProgressAtLastEpoch(t *testing.T) {
	m := artifact(t)
	cases := []struct {
		model string
		want  float64
	}{
		// bert: line 3 of validation-*.csv; smallest in validation-12.csv.
		{"bert", 14774.0},
		// cifar10: line 101; smallest in validation-256.csv.
		{"cifar10", 39062.90816659533},
		// deepspeech2: line 81; smallest in validation-20.csv.
		{"deepspeech2", 28536.0},
		// imagenet: line 91; smallest in validation-400.csv (not the
		// initial batch's file, validation-200.csv: 576526.0).
		{"imagenet", 576525.594895604},
		// ncf: line 11; smallest in validation-256.csv.
		{"ncf", 194174.0},
		// yolov3: line 51; smallest in validation-16.csv (validation-8.csv
		// has 103444.0).
		{"yolov3", 103443.97796253164},
	}
	for _, c := range cases {
		j := epochJob(c.model, 0)
		if got := m.Work(j); got != c.want {
			t.Errorf("Work(%s) = %v, want %v", c.model, got, c.want)
		}
		// Asking for more epochs than the model trains changes nothing.
		j.Work = float64(Epochs[c.model] + 50)
		if got := m.Work(j); got != c.want {
			t.Errorf("Work(%s, %v epochs) = %v, want %v", c.model, j.Work, got, c.want)
		}
	}
}

func TestWorkFewerEpochs(t *testing.T) {
	m := artifact(t)
	cases := []struct {
		model  string
		epochs float64
		want   float64
	}{
		// cifar10 line 11 (end of epoch 10): smallest in validation-256.csv.
		{"cifar10", 10, 3906.9539834614734},
		// A partial epoch counts as a whole one: line 12, smallest in
		// validation-128.csv.
		{"cifar10", 10.5, 4297.0},
		{"cifar10", 11, 4297.0},
		// bert line 2: smallest in validation-12.csv.
		{"bert", 1, 7387.0},
		{"bert", 2, 14774.0},
	}
	for _, c := range cases {
		j := epochJob(c.model, 0)
		j.Work = c.epochs
		if got := m.Work(j); got != c.want {
			t.Errorf("Work(%s, %v epochs) = %v, want %v", c.model, c.epochs, got, c.want)
		}
	}
}

func TestEpoch(t *testing.T) {
	p := profile(t, "cifar10")
	// End of epoch 9 / start of epoch 10: 3906.9539834614734 (line 11 of
	// validation-256.csv); start of epoch 11: 4297.0 (line 12 of
	// validation-128.csv).
	cases := []struct {
		x    float64
		want int
	}{
		{-1, 0},
		{0, 0},
		{3906.9, 9},
		{3906.9539834614734, 10},
		{4000, 10},
		{4296.99, 10},
		{4297.0, 11},
		{39062.90816659533, 99}, // the end: still the last epoch
		{1e9, 99},
	}
	for _, c := range cases {
		if got := p.Epoch(c.x); got != c.want {
			t.Errorf("cifar10 Epoch(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

// On a measured placement at a measured per-GPU batch, step and sync time
// are the values of that row.
func TestMeasuredPlacementStepTime(t *testing.T) {
	cases := []struct {
		model      string
		perNode    []int
		batch      int
		atomic     int
		step, sync float64
		row        string
	}{
		// 2 GPUs, 128 samples: 64 per GPU.
		{"cifar10", []int{2}, 128, 64, 0.06547343730926514, 0.0009209567964076996, "cifar10 placements.csv line 708: 2,64"},
		// 4 GPUs, 256 samples: 64 per GPU.
		{"cifar10", []int{4}, 256, 64, 0.06841483116149902, 0.007376121616363525, "cifar10 placements.csv line 1144: 4,64"},
		// bert, 1 GPU, the initial batch 12: 12 per GPU, no accumulation.
		{"bert", []int{1}, 12, 12, 0.9215156733989716, 0.013695754051208497, "bert placements.csv line 6: 1,12"},
		// Batch 0 is the model's initial batch on one GPU.
		{"bert", []int{1}, 0, 12, 0.9215156733989716, 0.013695754051208497, "bert placements.csv line 6: 1,12"},
		// bert, 48 samples on 4 GPUs of one node: 12 per GPU.
		{"bert", []int{4}, 48, 12, 0.9571182131767273, 0.09286786985397338, "bert placements.csv line 526: 4,12"},
		// bert, 48 samples on 2 nodes of 2: 12 per GPU.
		{"bert", []int{2, 2}, 48, 12, 2.1157262921333313, 1.2578204421997068, "bert placements.csv line 331: 22,12"},
	}
	for _, c := range cases {
		cfg := configure(t, c.model, c.perNode, c.batch)
		if cfg.Atomic != c.atomic || cfg.Accum != 0 {
			t.Errorf("%s %v batch %d: Atomic, Accum = %d, %d, want %d, 0", c.model, c.perNode, c.batch, cfg.Atomic, cfg.Accum, c.atomic)
		}
		if cfg.Step != c.step || cfg.Sync != c.sync {
			t.Errorf("%s %v batch %d: Step, Sync = %v, %v, want %v, %v (%s)", c.model, c.perNode, c.batch, cfg.Step, cfg.Sync, c.step, c.sync, c.row)
		}
		if cfg.IterTime != c.step {
			t.Errorf("%s %v batch %d: IterTime = %v, want Step %v without accumulation", c.model, c.perNode, c.batch, cfg.IterTime, c.step)
		}
	}
}

// Between two measured per-GPU batches the step and sync time are
// interpolated linearly (the artifact's interp1d).
func TestLocalBatchInterpolation(t *testing.T) {
	// bert, 14 samples on placement 2: 7 per GPU, halfway between the rows
	// 2,6 (line 323) and 2,8 (line 324) of placements.csv.
	cfg := configure(t, "bert", []int{2}, 14)
	wantStep := (0.586463674902916 + 0.7121821641921997) / 2
	wantSync := (0.055930083513259884 + 0.05449784374237061) / 2
	if cfg.Atomic != 7 || !near(cfg.Step, wantStep) || !near(cfg.Sync, wantSync) {
		t.Errorf("bert [2] batch 14: Atomic %d Step %v Sync %v, want 7, %v, %v", cfg.Atomic, cfg.Step, cfg.Sync, wantStep, wantSync)
	}

	// cifar10, the initial 128 samples on one GPU: 128 per GPU, 37/38 of
	// the way from row 1,91 (line 5) to row 1,129 (line 6).
	cfg = configure(t, "cifar10", []int{1}, 128)
	w := 37.0 / 38.0
	wantStep = 0.07591350078582763 + w*(0.10385050773620605-0.07591350078582763)
	wantSync = 0.0005244320034980774 + w*(0.0005253599941730499-0.0005244320034980774)
	if cfg.Atomic != 128 || cfg.Accum != 0 || !near(cfg.Step, wantStep) || !near(cfg.Sync, wantSync) {
		t.Errorf("cifar10 [1] batch 128: %+v, want Atomic 128, Accum 0, Step %v, Sync %v", cfg, wantStep, wantSync)
	}
	// At the initial batch the gain is 1, so the rate is 1 per iteration.
	r, _ := artifact(t).Rate(epochJob("cifar10", 128), alloc(1), 0)
	if !near(r, 1/wantStep) {
		t.Errorf("cifar10 [1] batch 128: Rate = %v, want 1/%v", r, wantStep)
	}
}

// The artifact's get_throughput drops empty nodes and looks placements up by
// their lexicographically smallest rotation.
func TestPlacementRotation(t *testing.T) {
	// cifar10 placements.csv line 213: 12,64.
	step12, sync12 := 0.17025303840637207, 0.11205555114746091
	// line 81: 112,64 (the CSV has no 121 or 211).
	step112, sync112 := 0.12597379684448243, 0.06773929214477539
	// lines 301 and 422: 123,64 and 132,64 (mirror images are different
	// placements: only rotations are merged).
	step123, step132 := 0.1406691074371338, 0.13874359130859376
	cases := []struct {
		perNode []int
		batch   int
		step    float64
		sync    float64
	}{
		{[]int{1, 2}, 192, step12, sync12},
		{[]int{2, 1}, 192, step12, sync12},
		{[]int{0, 2, 0, 1, 0}, 192, step12, sync12},
		{[]int{1, 1, 2}, 256, step112, sync112},
		{[]int{1, 2, 1}, 256, step112, sync112},
		{[]int{2, 1, 1}, 256, step112, sync112},
		{[]int{1, 2, 3}, 384, step123, 0.08265732192993162},
		{[]int{2, 3, 1}, 384, step123, 0.08265732192993162},
		{[]int{3, 1, 2}, 384, step123, 0.08265732192993162},
		{[]int{1, 3, 2}, 384, step132, 0.0805527099609375},
		{[]int{3, 2, 1}, 384, step132, 0.0805527099609375},
	}
	for _, c := range cases {
		cfg := configure(t, "cifar10", c.perNode, c.batch)
		if cfg.Atomic != 64 || cfg.Step != c.step || cfg.Sync != c.sync {
			t.Errorf("cifar10 %v batch %d: Atomic %d Step %v Sync %v, want 64, %v, %v", c.perNode, c.batch, cfg.Atomic, cfg.Step, cfg.Sync, c.step, c.sync)
		}
	}
	if a, b := normalise([]int{2, 1}), normalise([]int{1, 2}); a != "12" || b != "12" {
		t.Errorf("normalise([2 1]), normalise([1 2]) = %q, %q, want 12", a, b)
	}
	if got := normalise([]int{4, 1, 3, 1}); got != "1314" {
		t.Errorf("normalise([4 1 3 1]) = %q, want 1314", got)
	}
	if got := normalise([]int{10}); got != "" {
		t.Errorf("normalise([10]) = %q, want \"\" (never measured)", got)
	}
}

// A placement that was not measured is interpolated over (nodes, GPUs,
// per-GPU batch) among the placements' per-group means and scalability.csv.
// At a point of that grid the result is the grid value.
func TestUnmeasuredPlacementGroupMean(t *testing.T) {
	// cifar10 [5, 1]: 2 nodes, 6 GPUs; "15" is not in placements.csv. The
	// placements with 2 nodes and 6 GPUs are 24 and 33 (lines 939 and 1037
	// at 64 per GPU); the artifact averages them (groupby mean).
	cfg := configure(t, "cifar10", []int{5, 1}, 384)
	wantStep := (0.20656263828277588 + 0.17414524555206298) / 2
	wantSync := (0.14817356719970703 + 0.11339275588989257) / 2
	if cfg.Atomic != 64 || !near(cfg.Step, wantStep) || !near(cfg.Sync, wantSync) {
		t.Errorf("cifar10 [5 1] batch 384: Atomic %d Step %v Sync %v, want 64, %v, %v", cfg.Atomic, cfg.Step, cfg.Sync, wantStep, wantSync)
	}
}

func ones(n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = 1
	}
	return s
}

func repeat(g, n int) []int {
	s := make([]int, n)
	for i := range s {
		s[i] = g
	}
	return s
}

func TestScalabilityGridPoints(t *testing.T) {
	cases := []struct {
		perNode    []int
		batch      int
		atomic     int
		step, sync float64
		row        string
	}{
		// 6 nodes of 1 GPU (never measured as a placement); the default
		// batch is max(12, 4*6) = 24: 4 per GPU.
		{ones(6), 0, 4, 1.4923269003629684, 1.0928203125, "line 2: 6,6,4"},
		{ones(6), 24, 4, 1.4923269003629684, 1.0928203125, "line 2: 6,6,4"},
		{ones(6), 36, 6, 1.526017963886261, 1.0126073074340822, "line 3: 6,6,6"},
		{ones(6), 72, 12, 1.6451402753591537, 0.7795770301818847, "line 6: 6,6,12"},
		{repeat(2, 6), 48, 4, 1.5320806801319122, 1.1351072044372557, "line 82: 6,12,4"},
		{ones(8), 88, 11, 1.5642719268798828, 0.7623508186340331, "line 10: 8,8,11"},
		{ones(12), 96, 8, 1.5833693891763687, 0.9428823623657226, "line 14: 12,12,8"},
		{ones(16), 176, 11, 1.7646283358335495, 0.9498705978393556, "line 20: 16,16,11"},
		// More than 16 nodes count as 16 (the artifact's min(num_nodes, 16)):
		// 20 nodes of 1 GPU read the 16-node, 20-GPU row.
		{ones(20), 80, 4, 1.6327007710933685, 1.2320324172973631, "line 22: 16,20,4"},
	}
	for _, c := range cases {
		cfg := configure(t, "bert", c.perNode, c.batch)
		if cfg.Atomic != c.atomic || cfg.Accum != 0 || !near(cfg.Step, c.step) || !near(cfg.Sync, c.sync) {
			t.Errorf("bert %v batch %d: Atomic %d Accum %d Step %v Sync %v, want %d, 0, %v, %v (bert scalability.csv %s)",
				c.perNode, c.batch, cfg.Atomic, cfg.Accum, cfg.Step, cfg.Sync, c.atomic, c.step, c.sync, c.row)
		}
	}
}

// Between grid points, the documented rule: linear over per-GPU batch at a
// (nodes, GPUs) point, linear between the two bracketing node counts.
func TestScalabilityInterpolation(t *testing.T) {
	// bert, 6 nodes of 1 GPU, 30 samples: 5 per GPU, halfway between
	// scalability.csv lines 2 (6,6,4) and 3 (6,6,6).
	cfg := configure(t, "bert", ones(6), 30)
	wantStep := (1.4923269003629684 + 1.526017963886261) / 2
	wantSync := (1.0928203125 + 1.0126073074340822) / 2
	if cfg.Atomic != 5 || !near(cfg.Step, wantStep) || !near(cfg.Sync, wantSync) {
		t.Errorf("bert 6x1 batch 30: Atomic %d Step %v Sync %v, want 5, %v, %v", cfg.Atomic, cfg.Step, cfg.Sync, wantStep, wantSync)
	}
	// bert, 7 nodes of 2 GPUs, 56 samples: 4 per GPU, halfway between the
	// 6-node and 8-node rows with 14 GPUs (lines 112: 6,14,4 and 77: 8,14,4).
	cfg = configure(t, "bert", repeat(2, 7), 56)
	wantStep = (1.5054878890514374 + 1.5535256564617157) / 2
	wantSync = (1.0991498374938966 + 1.1257736854553222) / 2
	if cfg.Atomic != 4 || !near(cfg.Step, wantStep) || !near(cfg.Sync, wantSync) {
		t.Errorf("bert 7x2 batch 56: Atomic %d Step %v Sync %v, want 4, %v, %v", cfg.Atomic, cfg.Step, cfg.Sync, wantStep, wantSync)
	}
}

func gain(sqr, vr, scale float64) float64 { return (vr + sqr) / (vr/scale + sqr) }

// Rate is gain / iteration time, with the artifact's
// gain = (var + sqr) / (var/scale + sqr), scale = batch / initial batch, and
// the gradient statistics of the job's current epoch.
func TestStatisticalEfficiency(t *testing.T) {
	m := artifact(t)
	cases := []struct {
		name       string
		model      string
		perNode    []int
		batch      int
		x          float64 // progress
		step       float64 // iteration time (no accumulation)
		sqr, vr    float64
		scale      float64
		wantUntil  float64
		wantAtomic int
	}{
		{
			// cifar10 epoch 10 (x = 4000 lies in [3906.95..., 4297.0)),
			// 256 samples on one node of 4: placements.csv line 1144
			// (4,64); validation-256.csv line 12 (epoch 10).
			name: "cifar10 256 epoch 10", model: "cifar10", perNode: []int{4}, batch: 256, x: 4000,
			step: 0.06841483116149902, sqr: 0.1701291386282806, vr: 2.029413777964595,
			scale: 2, wantUntil: 4297.0, wantAtomic: 64,
		},
		{
			// 384 samples, between the validated 256 and 512: the gradient
			// statistics are averaged (validation-256.csv and
			// validation-512.csv line 12). Placement [4 2] is measured as
			// 24 (line 939: 24,64).
			name: "cifar10 384 epoch 10", model: "cifar10", perNode: []int{4, 2}, batch: 384, x: 4000,
			step:  0.20656263828277588,
			sqr:   (0.1701291386282806 + 0.14840219280546516) / 2,
			vr:    (2.029413777964595 + 2.424385923306376) / 2,
			scale: 3, wantUntil: 4297.0, wantAtomic: 64,
		},
		{
			// cifar10 epoch 0, 512 samples on one node of 4 (128 per GPU,
			// 37/38 of the way from 4,91 to 4,129, placements.csv lines
			// 1145-1146); validation-512.csv line 2. Epoch 0 ends at the
			// smallest progress on line 2 of the validation files,
			// 390.71438596642224 in validation-256.csv.
			name: "cifar10 512 epoch 0", model: "cifar10", perNode: []int{4}, batch: 512, x: 0,
			step: 0.08193559646606445 + 37.0/38.0*(0.11051218509674073-0.08193559646606445),
			sqr:  8.220063889732206, vr: 8.914520446545186,
			scale: 4, wantUntil: 390.71438596642224, wantAtomic: 128,
		},
		{
			// bert epoch 1 (x = 10000 in [7387, 14774)), 48 samples on 4
			// GPUs: placements.csv line 526 (4,12); validation-48.csv line 3.
			name: "bert 48 epoch 1", model: "bert", perNode: []int{4}, batch: 48, x: 10000,
			step: 0.9571182131767273, sqr: 69055119274.80128, vr: 43961892733847.03,
			scale: 4, wantUntil: 14774.0, wantAtomic: 12,
		},
		{
			// bert epoch 0, 72 samples on 6 nodes of 1: scalability.csv
			// line 6 (6,6,12); halfway between validation-48.csv and
			// validation-96.csv line 2.
			name: "bert 72 epoch 0", model: "bert", perNode: ones(6), batch: 72, x: 0,
			step:  1.6451402753591537,
			sqr:   (57286300666507.94 + 33071554914573.36) / 2,
			vr:    (6875640191433787.0 + 6080307119140154.0) / 2,
			scale: 6, wantUntil: 7387.0, wantAtomic: 12,
		},
	}
	for _, c := range cases {
		cfg := configure(t, c.model, c.perNode, c.batch)
		if cfg.Atomic != c.wantAtomic || cfg.Accum != 0 || cfg.Batch != c.batch {
			t.Errorf("%s: config %+v, want Atomic %d, no accumulation, Batch %d", c.name, cfg, c.wantAtomic, c.batch)
		}
		r, until := m.Rate(epochJob(c.model, c.batch), alloc(c.perNode...), c.x)
		g := gain(c.sqr, c.vr, c.scale)
		if want := g / c.step; !near(r, want) {
			t.Errorf("%s: Rate = %v, want gain %v / step %v = %v", c.name, r, g, c.step, want)
		}
		if until != c.wantUntil {
			t.Errorf("%s: until = %v, want the end of the epoch %v", c.name, until, c.wantUntil)
		}
		if !(g > 1 && g < c.scale) {
			t.Errorf("%s: hand-computed gain %v not in (1, %v): bad test data", c.name, g, c.scale)
		}
	}
}

// With a batch equal to the initial batch, scale is 1 and the gain is 1 in
// every epoch: one unit of progress per iteration.
func TestGainOneAtInitialBatch(t *testing.T) {
	m := artifact(t)
	for _, name := range m.ModelNames() {
		p := m.Profiles[name]
		for _, batch := range []int{0, p.InitBatch} {
			j := epochJob(name, batch)
			cfg := configure(t, name, []int{1}, batch)
			if cfg.Batch != p.InitBatch || cfg.Accum != 0 {
				t.Fatalf("%s [1] batch %d: %+v, want Batch %d without accumulation", name, batch, cfg, p.InitBatch)
			}
			for e := 0; e < p.MaxEpochs; e++ {
				x := p.progress[e]
				r, until := m.Rate(j, alloc(1), x)
				if !near(r*cfg.IterTime, 1) {
					t.Errorf("%s epoch %d at the initial batch: rate*iterTime = %v, want 1", name, e, r*cfg.IterTime)
				}
				if until != p.progress[e+1] {
					t.Errorf("%s epoch %d: until = %v, want %v", name, e, until, p.progress[e+1])
				}
			}
		}
	}
}

// The per-GPU batch is ceil(B/K), split into accumulation steps of at most
// MaxLocalBsz, as the artifact's Job.update_local_bsz.
func TestLocalBatchAndAccumulation(t *testing.T) {
	cases := []struct {
		model                string
		perNode              []int
		batch                int
		atomic, accum, total int
	}{
		// yolov3: largest per-GPU batch 8 (the artifact's override).
		{"yolov3", []int{1}, 0, 8, 0, 8},
		{"yolov3", []int{1}, 8, 8, 0, 8},
		// One GPU above the initial batch always accumulates at least once.
		{"yolov3", []int{1}, 12, 6, 1, 12},
		{"yolov3", []int{1}, 16, 8, 1, 16},
		// Two GPUs, 16: 8 each fits in one pass.
		{"yolov3", []int{2}, 16, 8, 0, 16},
		// Two GPUs, 32: 16 each > 8, two passes of 8 (without the override
		// 16 would fit in one).
		{"yolov3", []int{2}, 32, 8, 1, 32},
		// Two GPUs, 21: ceil(21/2) = 11 per GPU, 2 passes of ceil(11/2) = 6:
		// 24 samples.
		{"yolov3", []int{2}, 21, 6, 1, 24},
		// Three GPUs, 10: ceil(10/3) = 4 per GPU: 12 samples.
		{"yolov3", []int{3}, 10, 4, 0, 12},
		// Four GPUs, 100: 25 per GPU, 4 passes of 7: 112 samples.
		{"yolov3", []int{4}, 100, 7, 3, 112},
		// 16 GPUs, 512: 32 per GPU, 4 passes of 8.
		{"yolov3", []int{4, 4, 4, 4}, 512, 8, 3, 512},
		// 3 GPUs, 511: 171 per GPU, 22 passes of ceil(171/22) = 8, but the
		// total may not exceed the largest batch 512: 8 is cut to
		// int(512 / (3*22)) = 7, 462 samples.
		{"yolov3", []int{1, 2}, 511, 7, 21, 462},
		// cifar10 on one GPU: 256 fits in one pass of 1024 but a single GPU
		// above the initial batch accumulates: 2 passes of 128.
		{"cifar10", []int{1}, 256, 128, 1, 256},
		{"cifar10", []int{1}, 4096, 1024, 3, 4096},
		// Default batch on 16 GPUs: max(128, 32*16) = 512.
		{"cifar10", []int{4, 4, 4, 4}, 0, 32, 0, 512},
		// bert default on 16 GPUs: max(12, 4*16) = 64.
		{"bert", ones(16), 0, 4, 0, 64},
	}
	for _, c := range cases {
		cfg := configure(t, c.model, c.perNode, c.batch)
		if cfg.Atomic != c.atomic || cfg.Accum != c.accum || cfg.Batch != c.total {
			t.Errorf("%s %v batch %d: Atomic %d Accum %d Batch %d, want %d, %d, %d",
				c.model, c.perNode, c.batch, cfg.Atomic, cfg.Accum, cfg.Batch, c.atomic, c.accum, c.total)
		}
	}

	// Iteration time with accumulation: step + accum*(step - sync).
	// yolov3 [2] batch 32: placements.csv line 324 (2,8), one extra pass.
	cfg := configure(t, "yolov3", []int{2}, 32)
	step, sync := 0.3566535413265228, 0.03225891834497452
	if cfg.Step != step || cfg.Sync != sync || !near(cfg.IterTime, step+(step-sync)) {
		t.Errorf("yolov3 [2] batch 32: %+v, want Step %v Sync %v IterTime %v", cfg, step, sync, step+(step-sync))
	}
	// yolov3 [1 2] batch 511: 7 per pass, halfway between placements.csv
	// lines 98 (12,6) and 99 (12,8); 21 extra passes.
	cfg = configure(t, "yolov3", []int{1, 2}, 511)
	step = (1.2270783931016922 + 1.0688867717981339) / 2
	sync = (0.8152660026550294 + 0.7794266777038574) / 2
	if !near(cfg.Step, step) || !near(cfg.Sync, sync) || !near(cfg.IterTime, step+21*(step-sync)) {
		t.Errorf("yolov3 [1 2] batch 511: %+v, want Step %v Sync %v IterTime %v", cfg, step, sync, step+21*(step-sync))
	}
	// The rate uses the batch actually run (462), not the one asked for.
	m := artifact(t)
	r, _ := m.Rate(epochJob("yolov3", 511), alloc(1, 2), 0)
	p := m.Profiles["yolov3"]
	g := p.gradAt(462, 0)
	if want := gain(g.sqr, g.vr, 462.0/8) / cfg.IterTime; !near(r, want) {
		t.Errorf("yolov3 [1 2] batch 511: Rate = %v, want %v (gain at batch 462)", r, want)
	}
}

func TestCheck(t *testing.T) {
	m := artifact(t)
	for _, name := range m.ModelNames() {
		p := m.Profiles[name]
		for _, b := range []int{0, p.InitBatch, p.MaxBatch} {
			if err := m.Check(epochJob(name, b)); err != nil {
				t.Errorf("Check(%s batch %d) = %v, want nil", name, b, err)
			}
		}
	}

	j := epochJob("gpt-3", 0)
	j.ID = "job-42"
	err := m.Check(j)
	if err == nil {
		t.Fatal("Check(unknown model) = nil")
	}
	if !errors.Is(err, perf.ErrUnknownModel) {
		t.Errorf("Check(unknown model) = %v, want it to wrap perf.ErrUnknownModel", err)
	}
	for _, s := range []string{"job-42", `"gpt-3"`, "bert", "cifar10", "deepspeech2", "imagenet", "ncf", "yolov3"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("Check(unknown model) = %q: want it to contain %s", err, s)
		}
	}
	// A near miss in case is still unknown.
	if err := m.Check(epochJob("CIFAR10", 0)); !errors.Is(err, perf.ErrUnknownModel) {
		t.Errorf("Check(CIFAR10) = %v, want unknown model", err)
	}

	for _, c := range []struct {
		model string
		batch int
		want  string
	}{
		{"cifar10", 64, "[128, 4096]"},
		{"cifar10", 127, "[128, 4096]"},
		{"cifar10", 4097, "[128, 4096]"},
		{"yolov3", 1024, "[8, 512]"},
		{"bert", 4, "[12, 384]"},
	} {
		err := m.Check(epochJob(c.model, c.batch))
		if err == nil {
			t.Errorf("Check(%s batch %d) = nil, want out of range", c.model, c.batch)
			continue
		}
		if !strings.Contains(err.Error(), c.want) || errors.Is(err, perf.ErrUnknownModel) {
			t.Errorf("Check(%s batch %d) = %q, want the range %s", c.model, c.batch, err, c.want)
		}
	}

	for _, u := range []job.Unit{job.Seconds, job.Iterations, job.Samples} {
		j := epochJob("cifar10", 0)
		j.Unit = u
		if err := m.Check(j); err == nil || !strings.Contains(err.Error(), string(u)) {
			t.Errorf("Check(unit %s) = %v, want an error naming the unit", u, err)
		}
	}
}

func TestRateCannotRun(t *testing.T) {
	m := artifact(t)
	for _, c := range []struct {
		j *job.Job
		a perf.Alloc
	}{
		{epochJob("cifar10", 0), alloc()},
		{epochJob("cifar10", 0), alloc(0, 0)},
		{epochJob("unknown", 0), alloc(4)},
	} {
		r, until := m.Rate(c.j, c.a, 0)
		if r != 0 || !math.IsInf(until, 1) {
			t.Errorf("Rate(%s on %v) = %v, %v, want 0, +Inf", c.j.Model, c.a.PerNode, r, until)
		}
	}
}

// Every model, GPU counts 1..16 in several layouts, batch sizes across the
// validated range: the rate is positive and finite, holds until a later
// progress, and the configuration obeys the documented rules.
func TestRatePositiveEverywhere(t *testing.T) {
	m := artifact(t)
	for _, name := range m.ModelNames() {
		p := m.Profiles[name]
		batches := []int{0, p.InitBatch, p.InitBatch + 1, (p.InitBatch + p.MaxBatch) / 2, p.MaxBatch - 1, p.MaxBatch}
		batches = append(batches, p.valBatch...)
		work := m.Work(epochJob(name, 0))
		xs := []float64{0, work / 3, work / 2, work * (1 - 1e-9)}
		for e := 0; e < p.MaxEpochs; e += max(1, p.MaxEpochs/7) {
			xs = append(xs, (p.progress[e]+p.progress[e+1])/2)
		}
		for n := 1; n <= 16; n++ {
			for _, per := range []int{1, 2, 3, 4, 8} {
				a := perf.Packed("T4", n, per)
				for _, b := range batches {
					cfg, ok := p.Configure(a.PerNode, b)
					if !ok {
						t.Fatalf("%s %v batch %d: Configure not ok", name, a.PerNode, b)
					}
					want := max(b, p.InitBatch)
					if b == 0 {
						want = max(p.InitBatch, p.MinLocalBsz*n)
					}
					switch {
					case cfg.Batch != n*cfg.Atomic*(cfg.Accum+1):
						t.Fatalf("%s %v batch %d: %+v: Batch is not GPUs*Atomic*(Accum+1)", name, a.PerNode, b, cfg)
					case cfg.Atomic < 1 || cfg.Atomic > p.MaxLocalBsz || cfg.Accum < 0:
						t.Fatalf("%s %v batch %d: %+v: per-pass batch outside [1, %d]", name, a.PerNode, b, cfg, p.MaxLocalBsz)
					case cfg.Batch > p.MaxBatch:
						t.Fatalf("%s %v batch %d: %+v: above the largest batch %d", name, a.PerNode, b, cfg, p.MaxBatch)
					case cfg.Batch < want && cfg.Batch+n*(cfg.Accum+1) <= p.MaxBatch:
						// Only the cut to the largest batch may run fewer
						// samples than asked.
						t.Fatalf("%s %v batch %d: %+v: runs fewer than %d samples", name, a.PerNode, b, cfg, want)
					case !(cfg.Step > cfg.Sync && cfg.Sync >= 0):
						t.Fatalf("%s %v batch %d: %+v: want Step > Sync >= 0", name, a.PerNode, b, cfg)
					case !near(cfg.IterTime, cfg.Step+float64(cfg.Accum)*(cfg.Step-cfg.Sync)):
						t.Fatalf("%s %v batch %d: %+v: IterTime is not Step + Accum*(Step-Sync)", name, a.PerNode, b, cfg)
					}
					j := epochJob(name, b)
					scale := float64(cfg.Batch) / float64(p.InitBatch)
					for _, x := range xs {
						r, until := m.Rate(j, a, x)
						if !(r > 0) || math.IsInf(r, 0) {
							t.Fatalf("%s %v batch %d x %v: rate %v", name, a.PerNode, b, x, r)
						}
						if !(until > x) || until > work {
							t.Fatalf("%s %v batch %d x %v: until %v, want in (x, %v]", name, a.PerNode, b, x, until, work)
						}
						// The gain lies between 1 and scale.
						g := r * cfg.IterTime
						if lo, hi := math.Min(1, scale), math.Max(1, scale); g < lo*(1-1e-12) || g > hi*(1+1e-12) {
							t.Fatalf("%s %v batch %d x %v: gain %v outside [%v, %v]", name, a.PerNode, b, x, g, lo, hi)
						}
					}
					if rem := perf.Remaining(m, j, a, 0); !(rem > 0) || math.IsInf(rem, 0) {
						t.Fatalf("%s %v batch %d: Remaining = %v", name, a.PerNode, b, rem)
					}
				}
			}
		}
	}
}

// The same question gets the same answer: from a fresh load, from the cache,
// and from concurrent callers.
func TestRateDeterministic(t *testing.T) {
	type q struct {
		model string
		a     perf.Alloc
		batch int
		x     float64
	}
	m1 := artifact(t)
	var qs []q
	for _, name := range m1.ModelNames() {
		p := m1.Profiles[name]
		for n := 1; n <= 16; n += 3 {
			for _, per := range []int{1, 4} {
				for _, b := range []int{0, p.InitBatch, p.MaxBatch / 2, p.MaxBatch} {
					for _, x := range []float64{0, p.progress[p.MaxEpochs/2]} {
						qs = append(qs, q{name, perf.Packed("T4", n, per), b, x})
					}
				}
			}
		}
	}
	rate := func(m *Model, c q) [2]float64 {
		r, u := m.Rate(epochJob(c.model, c.batch), c.a, c.x)
		return [2]float64{r, u}
	}
	first := make([][2]float64, len(qs))
	for i, c := range qs {
		first[i] = rate(m1, c)
	}
	for i, c := range qs { // cached now
		if got := rate(m1, c); got != first[i] {
			t.Fatalf("%+v: second call %v, first %v", c, got, first[i])
		}
	}
	m2, err := Load(data.FS, data.ProfilesDir)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := len(qs) - 1 - w; i >= 0; i-- {
				if got := rate(m2, qs[i]); got != first[i] {
					select {
					case errs <- "fresh load, concurrent: differs":
					default:
					}
					return
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// The configuration cache must not mix up placements whose GPU counts read
// alike ([1 2] and [12], [11 2] and [1 12]); only empty nodes are ignored.
func TestConfigCacheKeys(t *testing.T) {
	m, err := Load(data.FS, data.ProfilesDir)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Profiles["ncf"]
	placements := [][]int{{1, 2}, {12}, {11, 2}, {1, 12}, {2, 1}, {0, 1, 2}, {1, 0, 2}, {1, 1, 2}, {11, 2}, {1, 12}}
	for _, b := range []int{0, 4096} {
		for _, pl := range placements {
			got, ok := p.Configure(pl, b)
			want := p.computeConfig(pl, b)
			if ok != want.ok || got != want.c {
				t.Errorf("ncf Configure(%v, %d) = %+v, %v; computed afresh %+v, %v", pl, b, got, ok, want.c, want.ok)
			}
		}
	}
	// [12] and [1 2] really differ: 12 GPUs on one node is not measured.
	a, _ := p.Configure([]int{12}, 4096)
	c, _ := p.Configure([]int{1, 2}, 4096)
	if a == c {
		t.Errorf("ncf [12] and [1 2] configured the same: %+v", a)
	}
}

// TestConfigCacheShortKeys: a placement's config read through the cache (twice:
// computed, then found) is the one computed afresh, for placements with
// idle nodes anywhere, more nodes than the short key holds and a node of
// more than 255 GPUs; two placements that differ only in idle nodes share
// an entry, others do not; and a config found in the cache under a short
// key costs no allocation.
func TestConfigCacheShortKeys(t *testing.T) {
	m, err := Load(data.FS, data.ProfilesDir)
	if err != nil {
		t.Fatal(err)
	}
	p := m.Profiles["cifar10"]
	if p == nil {
		t.Fatal("no cifar10 profile")
	}
	many := make([]int, 20)
	for i := range many {
		many[i] = 1 + i%3
	}
	placements := [][]int{{1}, {4}, {0, 4}, {4, 0}, {2, 0, 2}, {2, 2}, {1, 3}, {3, 1}, {0, 0, 1, 0, 3}, many, {300}, {0, 2, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4, 4}}
	for _, pl := range placements {
		for _, batch := range []int{0, 128, 512} {
			want := p.computeConfig(pl, batch)
			for range 2 {
				if got := p.config(pl, batch); got != want {
					t.Errorf("config(%v, %d) = %+v, computed afresh %+v", pl, batch, got, want)
				}
			}
		}
	}
	n := 0
	p.configCache.Range(func(k, v any) bool { n++; return true })
	// {1} {4} {2,2} {1,3} {3,1} many {300} and the last one, at 3 batches:
	// {0,4} and {4,0} are {4}, {2,0,2} is {2,2}, {0,0,1,0,3} is {1,3}.
	if n != 8*3 {
		t.Errorf("%d cache entries, want %d", n, 8*3)
	}
	pl := []int{0, 2, 0, 4}
	if a := testing.AllocsPerRun(100, func() { p.config(pl, 128) }); a != 0 {
		t.Errorf("a config found in the cache cost %v allocations, want 0", a)
	}
}
