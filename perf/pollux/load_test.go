package pollux

import (
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// toyFiles is a profile small enough to follow by hand. "toy" is not in
// Epochs, so it trains as many epochs as its shortest validation file (2).
//
//	placement 1: per-GPU 2 -> step 1.0, sync 0.25; 4 -> step 2.0, sync 0.5
//	placement 2: per-GPU 2 -> step 1.5, sync 0.5;  4 -> step 2.5, sync 1.0
//	batch 4: progress 10, 20, 30 (3 epochs), sqr 1, var 1
//	batch 8: progress 12, 18 (2 epochs),     sqr 1, var 3
//
// So B0 = 4, largest batch 8, per-GPU batch in [2, 4], and the epochs end at
// progress min(10, 12) = 10 and min(20, 18) = 18.
func toyFiles() fstest.MapFS {
	return fstest.MapFS{
		"profiles/toy/placements.csv": {Data: []byte("placement,local_bsz,step_time,sync_time\n" +
			"1,4,2.0,0.5\n" + // out of order on purpose
			"1,2,1.0,0.25\n" +
			"2,2,1.5,0.5\n" +
			"2,4,2.5,1.0\n")},
		"profiles/toy/scalability.csv": {Data: []byte("num_nodes,num_replicas,local_bsz,step_time,sync_time\n")},
		"profiles/toy/validation-4.csv": {Data: []byte("progress,iteration,metric,grad_sqr,grad_var\n" +
			"10,10,0.5,1,1\n20,20,0.6,1,1\n30,30,0.7,1,1\n")},
		"profiles/toy/validation-8.csv": {Data: []byte("progress,iteration,metric,grad_sqr,grad_var\n" +
			"12,6,0.5,1,3\n18,9,0.6,1,3\n")},
		"profiles/README": {Data: []byte("not a model directory")},
	}
}

func loadToy(t *testing.T) *Model {
	t.Helper()
	m, err := Load(toyFiles(), "profiles")
	if err != nil {
		t.Fatalf("Load(toy): %v", err)
	}
	return m
}

func TestToyProfileFields(t *testing.T) {
	m := loadToy(t)
	if got := m.ModelNames(); len(got) != 1 || got[0] != "toy" {
		t.Fatalf("ModelNames() = %v, want [toy]", got)
	}
	p := m.Profiles["toy"]
	got := [5]int{p.InitBatch, p.MaxBatch, p.MinLocalBsz, p.MaxLocalBsz, p.MaxEpochs}
	if got != [5]int{4, 8, 2, 4, 2} {
		t.Errorf("(InitBatch, MaxBatch, MinLocalBsz, MaxLocalBsz, MaxEpochs) = %v, want [4 8 2 4 2]", got)
	}
	j := &job.Job{ID: "t", Model: "toy", Work: 5, Unit: job.Epochs}
	if w := m.Work(j); w != 18 {
		t.Errorf("Work = %v, want 18", w)
	}
	if m.Costs(j) != perf.PolluxArtifactCosts {
		t.Errorf("Costs = %+v, want the artifact's default", m.Costs(j))
	}
}

func TestToyRemaining(t *testing.T) {
	m := loadToy(t)
	cases := []struct {
		name    string
		batch   int
		perNode []int
		p       float64
		want    float64
	}{
		// Batch 4 on 1 GPU: step 2.0, gain 1: 1/2 progress per second; 18
		// progress in 36 s.
		{"B0 on 1 GPU", 4, []int{1}, 0, 36},
		{"B0 on 1 GPU from 15", 4, []int{1}, 15, 6},
		// Batch 8 on placement 2: 4 per GPU, step 2.5; grad (1, 3) in both
		// epochs, scale 2: gain (3+1)/(3/2+1) = 1.6, rate 0.64: 18/0.64.
		{"B8 on 2 GPUs", 8, []int{2}, 0, 28.125},
		// Batch 8 on 1 GPU: 2 passes of 4, 2.0 + (2.0-0.5) = 3.5 s; gain 1.6.
		{"B8 on 1 GPU", 8, []int{1}, 0, 18 * 3.5 / 1.6},
		// Batch 6 on 1 GPU: 2 passes of 3, step 1.5 and sync 0.375 halfway
		// between per-GPU 2 and 4: 1.5 + 1.125 = 2.625 s. Gradient
		// statistics halfway between batch 4 and 8: sqr 1, var 2; scale 1.5:
		// gain 3/(2/1.5 + 1) = 9/7.
		{"B6 on 1 GPU", 6, []int{1}, 0, 18 * 2.625 * 7 / 9},
	}
	for _, c := range cases {
		j := &job.Job{ID: "t", Model: "toy", BatchSize: c.batch, Work: 2, Unit: job.Epochs}
		if err := m.Check(j); err != nil {
			t.Fatalf("%s: Check: %v", c.name, err)
		}
		got := perf.Remaining(m, j, alloc(c.perNode...), c.p)
		if math.Abs(got-c.want) > 1e-9 {
			t.Errorf("%s: Remaining = %v, want %v", c.name, got, c.want)
		}
	}

	// The rate changes at the end of epoch 0 (progress 10) when the
	// statistics do: batch 4 has var 1 in both epochs, so use a profile
	// whose batch-8 statistics change between epochs.
	files := toyFiles()
	files["profiles/toy/validation-8.csv"] = &fstest.MapFile{Data: []byte("progress,iteration,metric,grad_sqr,grad_var\n" +
		"12,6,0.5,1,3\n18,9,0.6,1,0\n")}
	m2, err := Load(files, "profiles")
	if err != nil {
		t.Fatal(err)
	}
	j := &job.Job{ID: "t", Model: "toy", BatchSize: 8, Work: 2, Unit: job.Epochs}
	r0, u0 := m2.Rate(j, alloc(2), 0)
	r1, u1 := m2.Rate(j, alloc(2), 10)
	// Epoch 0: gain 1.6 / 2.5 s until 10. Epoch 1: var 0, gain 1, 1/2.5
	// until 18.
	if math.Abs(r0-0.64) > 1e-12 || u0 != 10 || math.Abs(r1-0.4) > 1e-12 || u1 != 18 {
		t.Errorf("Rate at 0 = %v until %v, at 10 = %v until %v; want 0.64 until 10, 0.4 until 18", r0, u0, r1, u1)
	}
	if got, want := perf.Remaining(m2, j, alloc(2), 0), 10/0.64+8/0.4; math.Abs(got-want) > 1e-9 {
		t.Errorf("Remaining across the epoch change = %v, want %v", got, want)
	}
}

// Outside the measured per-GPU range the ends are held (the artifact would
// raise instead).
func TestToyCurveEnds(t *testing.T) {
	p := loadToy(t).Profiles["toy"]
	c := p.placements["1"]
	for _, tc := range []struct{ x, step, sync float64 }{
		{1, 1.0, 0.25},
		{2, 1.0, 0.25},
		{2.5, 1.25, 0.3125},
		{3, 1.5, 0.375},
		{4, 2.0, 0.5},
		{9, 2.0, 0.5},
	} {
		s, y := c.at(tc.x)
		if math.Abs(s-tc.step) > 1e-12 || math.Abs(y-tc.sync) > 1e-12 {
			t.Errorf("placement 1 at %v = %v, %v, want %v, %v", tc.x, s, y, tc.step, tc.sync)
		}
	}
}

func TestLoadErrors(t *testing.T) {
	cases := []struct {
		name   string
		mutate func(fstest.MapFS)
		want   []string
	}{
		{"no model directories", func(f fstest.MapFS) {
			for k := range f {
				if strings.HasPrefix(k, "profiles/toy/") {
					delete(f, k)
				}
			}
		}, []string{"no model directories"}},
		{"no validation files", func(f fstest.MapFS) {
			delete(f, "profiles/toy/validation-4.csv")
			delete(f, "profiles/toy/validation-8.csv")
		}, []string{"validation"}},
		{"batch size in a file name", func(f fstest.MapFS) {
			f["profiles/toy/validation-big.csv"] = f["profiles/toy/validation-4.csv"]
		}, []string{"validation-big.csv"}},
		{"zero batch size in a file name", func(f fstest.MapFS) {
			f["profiles/toy/validation-0.csv"] = f["profiles/toy/validation-4.csv"]
		}, []string{"validation-0.csv"}},
		{"empty validation file", func(f fstest.MapFS) {
			f["profiles/toy/validation-8.csv"] = &fstest.MapFile{Data: []byte("progress,iteration,metric,grad_sqr,grad_var\n")}
		}, []string{"validation-8.csv", "no rows"}},
		{"bad header", func(f fstest.MapFS) {
			f["profiles/toy/placements.csv"] = &fstest.MapFile{Data: []byte("placement,bsz,step_time,sync_time\n1,2,1,0.5\n")}
		}, []string{"placements.csv", "column 2", "local_bsz"}},
		{"not a number", func(f fstest.MapFS) {
			f["profiles/toy/placements.csv"] = &fstest.MapFile{Data: []byte("placement,local_bsz,step_time,sync_time\n1,2,fast,0.5\n")}
		}, []string{"placements.csv", "line 2", "step_time"}},
		{"NaN", func(f fstest.MapFS) {
			f["profiles/toy/scalability.csv"] = &fstest.MapFile{Data: []byte("num_nodes,num_replicas,local_bsz,step_time,sync_time\n6,6,2,NaN,1\n")}
		}, []string{"scalability.csv", "step_time"}},
		{"zero GPUs on a node", func(f fstest.MapFS) {
			f["profiles/toy/placements.csv"] = &fstest.MapFile{Data: []byte("placement,local_bsz,step_time,sync_time\n10,2,1,0.5\n")}
		}, []string{"placements.csv", "line 2", `"10"`}},
		{"wrong field count", func(f fstest.MapFS) {
			f["profiles/toy/placements.csv"] = &fstest.MapFile{Data: []byte("placement,local_bsz,step_time,sync_time\n1,2,1\n")}
		}, []string{"placements.csv", "line 2"}},
		{"missing scalability", func(f fstest.MapFS) {
			delete(f, "profiles/toy/scalability.csv")
		}, []string{"scalability.csv"}},
	}
	for _, c := range cases {
		f := toyFiles()
		c.mutate(f)
		_, err := Load(f, "profiles")
		if err == nil {
			t.Errorf("%s: Load = nil error", c.name)
			continue
		}
		for _, s := range c.want {
			if !strings.Contains(err.Error(), s) {
				t.Errorf("%s: Load error %q does not mention %s", c.name, err, s)
			}
		}
	}
	if _, err := Load(toyFiles(), "nowhere"); err == nil {
		t.Error("Load(missing directory) = nil error")
	}
}
