package table

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// smallCSV: bs 32 measured on 1, 2, 4, 8 GPUs; bs 64 measured on 1 and 4
// only (2 is empty, 8 is nan).
const smallCSV = `global_batch_size,1,2,4,8
32,10,18,30,40
64,6,,20,nan
`

// from2CSV is measured from 2 GPUs up, with its columns out of order.
const from2CSV = `global_batch_size,4,2
16,9,5
`

func mustTable(t *testing.T, gpuType string, files map[string]string) *Table {
	t.Helper()
	tb := NewTable()
	for model, text := range files {
		if err := tb.AddCSV(gpuType, model, model+".csv", strings.NewReader(text)); err != nil {
			t.Fatalf("AddCSV %s: %v", model, err)
		}
	}
	return tb
}

func itJob(model string, bs int) *job.Job {
	return &job.Job{ID: "j1", Model: model, BatchSize: bs, GPUs: 1, MinGPUs: 1, MaxGPUs: 64, Work: 1000, Unit: job.Iterations}
}

func near(a, b float64) bool { return math.Abs(a-b) <= 1e-12*math.Max(1, math.Abs(b)) }

func TestTableRate(t *testing.T) {
	tb := mustTable(t, "A100", map[string]string{"m": smallCSV, "late": from2CSV})
	cases := []struct {
		name    string
		model   string
		bs      int
		gpuType string
		perNode []int
		want    float64
	}{
		{"measured 1", "m", 32, "A100", []int{1}, 10},
		{"measured 4", "m", 32, "A100", []int{4}, 30},
		{"measured 8 over two nodes", "m", 32, "A100", []int{4, 4}, 40},
		// 3 GPUs: halfway between 2 (18) and 4 (30): 18 + 12/2 = 24.
		{"midpoint 3", "m", 32, "A100", []int{3}, 24},
		// 6 GPUs: halfway between 4 (30) and 8 (40): 35.
		{"midpoint 6", "m", 32, "A100", []int{2, 2, 2}, 35},
		// Beyond the largest column: the 8-GPU value, no extrapolation.
		{"beyond 16", "m", 32, "A100", []int{8, 8}, 40},
		{"beyond 1000", "m", 32, "A100", []int{1000}, 40},
		{"zero GPUs", "m", 32, "A100", nil, 0},
		// bs 64: 2 is empty, so 2 GPUs lie between 1 (6) and 4 (20):
		// 6 + 14*(1/3) = 10.666...
		{"skip empty cell", "m", 64, "A100", []int{2}, 6 + 14.0/3},
		// 3 GPUs: 6 + 14*(2/3).
		{"skip empty cell 3", "m", 64, "A100", []int{3}, 6 + 28.0/3},
		// 8 is nan: the largest measured count is 4.
		{"nan is unmeasured", "m", 64, "A100", []int{8}, 20},
		{"case-insensitive type", "m", 32, "a100", []int{1}, 10},
		{"unknown GPU type", "m", 32, "T4", []int{1}, 0},
		{"batch size not in table", "m", 48, "A100", []int{1}, 0},
		{"unknown model", "zz", 32, "A100", []int{1}, 0},
		// Smallest measured count is 2: 1 GPU cannot run it.
		{"below smallest", "late", 16, "A100", []int{1}, 0},
		// Columns given as 4,2: sorted; 3 GPUs = (5+9)/2 = 7.
		{"unsorted columns", "late", 16, "A100", []int{3}, 7},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r, until := tb.Rate(itJob(c.model, c.bs), perf.Alloc{GPUType: c.gpuType, PerNode: c.perNode}, 0)
			if !near(r, c.want) {
				t.Errorf("rate = %v, want %v", r, c.want)
			}
			if !math.IsInf(until, 1) {
				t.Errorf("until = %v, want +Inf", until)
			}
		})
	}
}

func TestTableFloor(t *testing.T) {
	tb := mustTable(t, "A100", map[string]string{"m": smallCSV})
	tb.Interp = Floor
	cases := []struct {
		bs, gpus int
		want     float64
	}{
		{32, 1, 10}, {32, 3, 18}, {32, 7, 30}, {32, 8, 40}, {32, 9, 40},
		{64, 2, 6}, {64, 3, 6}, {64, 5, 20},
	}
	for _, c := range cases {
		if got := tb.Throughput("m", "A100", c.bs, c.gpus); got != c.want {
			t.Errorf("floor bs %d on %d GPUs = %v, want %v", c.bs, c.gpus, got, c.want)
		}
	}
	if Floor.String() != "floor" || Linear.String() != "linear" {
		t.Errorf("Interpolation strings: %v %v", Floor, Linear)
	}
}

func TestTableParseErrors(t *testing.T) {
	cases := []struct {
		name   string
		text   string
		line   int
		column string
		msg    string
	}{
		{"bad number", "global_batch_size,1,2,4\n32,1,2,3\n64,1,2,x1\n", 3, "4", `"x1" is not a number`},
		{"negative", "global_batch_size,1,2\n32,1,-2\n", 2, "2", "negative"},
		{"infinite", "global_batch_size,1,2\n32,1,inf\n", 2, "2", "finite"},
		{"bad batch size", "global_batch_size,1\nabc,1\n", 2, "global_batch_size", `batch size "abc"`},
		{"zero batch size", "global_batch_size,1\n0,1\n", 2, "global_batch_size", "integer >= 1"},
		{"duplicate batch size", "global_batch_size,1\n32,1\n32,2\n", 3, "global_batch_size", "already given on line 2"},
		{"wrong first header", "batch,1,2\n32,1,2\n", 1, "batch", `"global_batch_size"`},
		{"bad GPU count", "global_batch_size,1,two\n32,1,2\n", 1, "two", "GPU count"},
		{"zero GPU count", "global_batch_size,0,1\n32,1,2\n", 1, "0", "GPU count"},
		{"duplicate GPU count", "global_batch_size,1,1\n32,1,2\n", 1, "1", "twice"},
		{"no GPU columns", "global_batch_size\n32\n", 1, "", "no GPU-count columns"},
		{"short row", "global_batch_size,1,2\n32,1\n", 2, "", "2 fields, the header has 3"},
		{"long row", "global_batch_size,1,2\n32,1,2,3\n", 2, "", "4 fields"},
		{"csv quote error", "global_batch_size,1\n32,\"1\"x\n", 2, "", "column"},
		{"empty file", "", 0, "", "empty file"},
		{"header only", "global_batch_size,1,2\n", 0, "", "no rows"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := NewTable().AddCSV("A100", "m", "m.csv", strings.NewReader(c.text))
			if err == nil {
				t.Fatal("no error")
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *ParseError", err, err)
			}
			if pe.File != "m.csv" || pe.Line != c.line || pe.Column != c.column {
				t.Errorf("error at %s line %d column %q, want line %d column %q (%v)", pe.File, pe.Line, pe.Column, c.line, c.column, err)
			}
			if !strings.Contains(err.Error(), c.msg) || !strings.HasPrefix(err.Error(), "throughputs m.csv") {
				t.Errorf("error %q does not start with the file or mention %q", err, c.msg)
			}
			if c.line > 0 && c.column != "" {
				want := `line ` + strconv.Itoa(c.line) + ` column "` + c.column + `"`
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %s", err, want)
				}
			}
		})
	}
}

func TestTableAcceptsQuirks(t *testing.T) {
	// BOM, spaces, CRLF, no final newline, an all-unmeasured row, "NaN", 0.
	text := "\ufeffglobal_batch_size, 1, 2 ,4\r\n 32 , 1.5 ,NaN, 0\r\n64,,nan,0"
	tb := mustTable(t, "T4", map[string]string{"m": text})
	if got := tb.BatchSizes("m", "t4"); len(got) != 2 || got[0] != 32 || got[1] != 64 {
		t.Fatalf("batch sizes %v", got)
	}
	gpus, rates := tb.Measured("m", "T4", 32)
	if len(gpus) != 1 || gpus[0] != 1 || rates[0] != 1.5 {
		t.Errorf("measured %v %v, want [1] [1.5]", gpus, rates)
	}
	if r := tb.Throughput("m", "T4", 32, 4); r != 1.5 {
		t.Errorf("rate on 4 = %v, want 1.5 (the only measured count)", r)
	}
	// A row with nothing measured cannot run anywhere, and Check says so.
	if r := tb.Throughput("m", "T4", 64, 4); r != 0 {
		t.Errorf("unmeasured row rate %v, want 0", r)
	}
	err := tb.Check(itJob("m", 64))
	if err == nil || !strings.Contains(err.Error(), "batch size 64") {
		t.Errorf("Check of an unmeasured row: %v", err)
	}
}

func TestTableCheck(t *testing.T) {
	a100 := mustTable(t, "A100", map[string]string{"bert": "global_batch_size,1,2\n64,1,2\n128,0.5,1\n", "solo": "global_batch_size,1\n256,3\n"})
	t4 := mustTable(t, "T4", map[string]string{"bert": "global_batch_size,1,2\n384,0.1,0.2\n"})
	if err := a100.Add(t4); err != nil {
		t.Fatal(err)
	}
	tb := a100
	mod := func(f func(j *job.Job)) *job.Job {
		j := itJob("bert", 64)
		f(j)
		return j
	}
	cases := []struct {
		name string
		j    *job.Job
		want []string // substrings of the error; nil = no error
	}{
		{"ok", mod(func(j *job.Job) {}), nil},
		{"ok on type", mod(func(j *job.Job) { j.GPUType = "a100" }), nil},
		{"ok other type", mod(func(j *job.Job) { j.BatchSize = 384 }), nil},
		{"samples", mod(func(j *job.Job) { j.Unit = job.Samples }), nil},
		{"missing batch size", mod(func(j *job.Job) { j.BatchSize = 48 }),
			[]string{"job j1", `model "bert"`, "batch size 48", "A100: 64, 128; T4: 384"}},
		{"batch size on the wrong type", mod(func(j *job.Job) { j.BatchSize = 384; j.GPUType = "A100" }),
			[]string{"batch size 384", "A100 table", "64, 128"}},
		{"unknown GPU type", mod(func(j *job.Job) { j.GPUType = "V100" }),
			[]string{"job j1", `"V100"`, "A100, T4"}},
		{"unknown model", mod(func(j *job.Job) { j.Model = "gpt9" }),
			[]string{`"gpt9"`, "unknown model", "bert, solo"}},
		{"no model", mod(func(j *job.Job) { j.Model = "" }), []string{"model: missing"}},
		{"epochs", mod(func(j *job.Job) { j.Unit = job.Epochs }), []string{`"epochs"`}},
		{"seconds", mod(func(j *job.Job) { j.Unit = job.Seconds }), []string{`"seconds"`}},
		{"ambiguous default batch", mod(func(j *job.Job) { j.BatchSize = 0 }),
			[]string{"batch size: missing", "A100: 64, 128; T4: 384"}},
		{"single default batch", &job.Job{ID: "s", Model: "solo", GPUs: 1, Work: 1, Unit: job.Iterations}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := tb.Check(c.j)
			if c.want == nil {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("no error")
			}
			for _, w := range c.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
	if err := tb.Check(mod(func(j *job.Job) { j.Model = "gpt9" })); !errors.Is(err, perf.ErrUnknownModel) {
		t.Errorf("unknown model error %v does not wrap perf.ErrUnknownModel", err)
	}
	// Default batch: solo has only 256 => 3 it/s on 1 GPU.
	if r, _ := tb.Rate(&job.Job{Model: "solo"}, perf.Packed("A100", 1, 8), 0); r != 3 {
		t.Errorf("default-batch rate %v, want 3", r)
	}
	// Ambiguous default batch: rate 0.
	if r, _ := tb.Rate(&job.Job{Model: "bert"}, perf.Packed("A100", 1, 8), 0); r != 0 {
		t.Errorf("ambiguous default-batch rate %v, want 0", r)
	}
	if got := tb.GPUTypes(); len(got) != 2 || got[0] != "A100" || got[1] != "T4" {
		t.Errorf("GPU types %v", got)
	}
	if got := tb.Models(); len(got) != 2 || got[0] != "bert" || got[1] != "solo" {
		t.Errorf("models %v", got)
	}
}

func TestTableWork(t *testing.T) {
	tb := mustTable(t, "A100", map[string]string{"m": smallCSV, "solo": "global_batch_size,1\n256,3\n"})
	cases := []struct {
		j    *job.Job
		want float64
	}{
		{&job.Job{Model: "m", BatchSize: 32, Work: 640, Unit: job.Iterations}, 640},
		// 640 samples at batch 32 = 20 iterations.
		{&job.Job{Model: "m", BatchSize: 32, Work: 640, Unit: job.Samples}, 20},
		// Default batch 256: 1024 samples = 4 iterations.
		{&job.Job{Model: "solo", Work: 1024, Unit: job.Samples}, 4},
	}
	for _, c := range cases {
		if got := tb.Work(c.j); got != c.want {
			t.Errorf("Work(%+v) = %v, want %v", c.j, got, c.want)
		}
	}
	// Remaining: 640 iterations at 40 it/s on 8 GPUs = 16 s.
	j := &job.Job{Model: "m", BatchSize: 32, Work: 640, Unit: job.Iterations}
	if got := perf.Remaining(tb, j, perf.Packed("A100", 8, 8), 0); got != 16 {
		t.Errorf("Remaining = %v, want 16", got)
	}
}

func TestTableAdd(t *testing.T) {
	a := mustTable(t, "A100", map[string]string{"m": smallCSV})
	b := mustTable(t, "T4", map[string]string{"m": from2CSV})
	if err := a.Add(b); err != nil {
		t.Fatal(err)
	}
	if r := a.Throughput("m", "T4", 16, 2); r != 5 {
		t.Errorf("merged T4 rate %v, want 5", r)
	}
	if r := a.Throughput("m", "A100", 32, 2); r != 18 {
		t.Errorf("merged A100 rate %v, want 18", r)
	}
	c := mustTable(t, "a100", map[string]string{"m": from2CSV})
	err := a.Add(c)
	if err == nil || !strings.Contains(err.Error(), `model "m" on a100`) {
		t.Errorf("duplicate merge: %v", err)
	}
	if err := a.AddCSV("A100", "m", "again.csv", strings.NewReader(smallCSV)); err == nil || !strings.Contains(err.Error(), "already loaded from m.csv") {
		t.Errorf("duplicate AddCSV: %v", err)
	}
	if err := a.AddCSV("", "x", "x.csv", strings.NewReader(smallCSV)); err == nil {
		t.Error("AddCSV with no GPU type: no error")
	}
	if err := a.AddCSV("A100", "", "x.csv", strings.NewReader(smallCSV)); err == nil {
		t.Error("AddCSV with no model: no error")
	}
}

func TestLoadElasticFlowFS(t *testing.T) {
	fsys := fstest.MapFS{
		"tp/a.csv":       {Data: []byte(smallCSV)},
		"tp/b.csv":       {Data: []byte(from2CSV)},
		"tp/README.md":   {Data: []byte("not a table")},
		"tp/sub/c.csv":   {Data: []byte(smallCSV)},
		"bad/a.csv":      {Data: []byte("global_batch_size,1\n32,oops\n")},
		"empty/notes.md": {Data: []byte("")},
	}
	tb, err := LoadElasticFlowFS(fsys, "tp", "A100")
	if err != nil {
		t.Fatal(err)
	}
	if got := tb.Models(); len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("models %v, want [a b]", got)
	}
	if r := tb.Throughput("b", "A100", 16, 4); r != 9 {
		t.Errorf("rate %v, want 9", r)
	}
	_, err = LoadElasticFlowFS(fsys, "bad", "A100")
	if err == nil || !strings.Contains(err.Error(), `throughputs bad/a.csv line 2 column "1"`) {
		t.Errorf("bad dir: %v", err)
	}
	if _, err := LoadElasticFlowFS(fsys, "empty", "A100"); err == nil || !strings.Contains(err.Error(), "no .csv files") {
		t.Errorf("empty dir: %v", err)
	}
	if _, err := LoadElasticFlowFS(fsys, "nowhere", "A100"); err == nil {
		t.Error("missing dir: no error")
	}
	if _, err := LoadElasticFlowDir("/nonexistent/dir", "A100"); err == nil {
		t.Error("missing OS dir: no error")
	}
	// AddFS fails atomically: a bad file leaves the table as it was.
	if err := tb.AddFS(fsys, "bad", "T4"); err == nil {
		t.Error("AddFS bad: no error")
	}
	if got := tb.GPUTypes(); len(got) != 1 {
		t.Errorf("GPU types after failed AddFS: %v", got)
	}
}

func TestTablePeakGPUs(t *testing.T) {
	tb := mustTable(t, "A100", map[string]string{"m": "global_batch_size,1,2,4,8\n32,1,3,3,2\n"})
	if got := tb.PeakGPUs("m", "A100", 32); got != 2 {
		t.Errorf("peak %d, want 2 (first of the tie 2 and 4)", got)
	}
	if got := tb.PeakGPUs("m", "A100", 64); got != 0 {
		t.Errorf("peak of a missing row %d, want 0", got)
	}
	if g, r := tb.Measured("m", "T4", 32); g != nil || r != nil {
		t.Errorf("Measured on a missing type: %v %v", g, r)
	}
	if got := tb.BatchSizes("m", "T4"); got != nil {
		t.Errorf("BatchSizes on a missing type: %v", got)
	}
}

func TestTableCosts(t *testing.T) {
	tb := mustTable(t, "A100", map[string]string{"m": smallCSV})
	tb.Cost = perf.CostTable{Default: perf.Costs{Start: 1, Restart: 2, Resize: 3}, PerKey: map[string]perf.Costs{"m": {Start: 10}}}
	if c := tb.Costs(itJob("m", 32)); c.Start != 10 {
		t.Errorf("per-model costs %+v", c)
	}
	if c := tb.Costs(itJob("other", 32)); c.Restart != 2 {
		t.Errorf("default costs %+v", c)
	}
	tb.CostsByGPUs = ElasticFlowCosts
	j := itJob("m", 32)
	j.GPUs = 8
	// 8 GPUs: restart 2 + 27 + 2*(3+1) = 37; start/resize 2 + 8 = 10.
	if c := tb.Costs(j); c != (perf.Costs{Start: 10, Restart: 37, Resize: 10}) {
		t.Errorf("ElasticFlow costs on 8 GPUs: %+v", c)
	}
	if tb.Name() == "" {
		t.Error("empty name")
	}
}
