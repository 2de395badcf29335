package table

import (
	"errors"
	"math"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// smallGavel: on v100, A runs at 10 it/s alone on 1 GPU and 18 on 2; sharing
// a GPU with B, A gets 6 and B 3. Spread over servers, A on 2 GPUs gets 12.
// On k80 the keys are spelt oddly (double quotes, spaces) and B's cannot run
// (0); the A/B's pair is given only from A's side.
const smallGavel = `{
 "v100": {
  "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 3.0]},
  "('B', 1)": {"null": 5.0, "('A', 1)": [3.0, 6.0]},
  "('A', 2)": {"null": 18.0},
  "('LM (batch size 20)', 1)": {"null": 2.0}
 },
 "v100_unconsolidated": {
  "('A', 2)": {"null": 12.0}
 },
 "k80": {
  "(\"B's\", 1)": {"null": 0.0},
  "( 'A' ,1 )": {"null": 4, "(\"B's\", 1)": [1.0, 0.5]}
 }
}`

func mustGavel(t *testing.T, text string) *Gavel {
	t.Helper()
	g, err := ParseGavel("small.json", []byte(text))
	if err != nil {
		t.Fatal(err)
	}
	return g
}

func gJob(model string, sf int) *job.Job {
	return &job.Job{ID: "g1", Model: model, GPUs: sf, MinGPUs: sf, MaxGPUs: sf, Work: 100, Unit: job.Iterations}
}

func TestGavelRate(t *testing.T) {
	g := mustGavel(t, smallGavel)
	cases := []struct {
		name   string
		model  string
		sf     int
		a      perf.Alloc
		always bool
		want   float64
	}{
		{"isolated 1", "A", 1, perf.Alloc{GPUType: "v100", PerNode: []int{1}}, false, 10},
		{"isolated 2 one node", "A", 2, perf.Alloc{GPUType: "v100", PerNode: []int{2}}, false, 18},
		{"spread uses unconsolidated", "A", 2, perf.Alloc{GPUType: "v100", PerNode: []int{1, 1}}, false, 12},
		{"spread, always consolidated", "A", 2, perf.Alloc{GPUType: "v100", PerNode: []int{1, 1}}, true, 18},
		{"too few GPUs", "A", 2, perf.Alloc{GPUType: "v100", PerNode: []int{1}}, false, 0},
		{"extra GPUs add nothing", "A", 2, perf.Alloc{GPUType: "v100", PerNode: []int{4}}, false, 18},
		{"upper-case type", "A", 1, perf.Alloc{GPUType: "V100", PerNode: []int{1}}, false, 10},
		{"odd key spelling", "A", 1, perf.Alloc{GPUType: "k80", PerNode: []int{1}}, false, 4},
		{"quote in name, cannot run", "B's", 1, perf.Alloc{GPUType: "k80", PerNode: []int{1}}, false, 0},
		// No k80_unconsolidated table: the consolidated entry, which k80 lacks for A at 2.
		{"spread, no unconsolidated table", "A", 2, perf.Alloc{GPUType: "k80", PerNode: []int{1, 1}}, false, 0},
		// v100_unconsolidated lacks B: fall back to consolidated.
		{"spread, unconsolidated lacks job", "B", 1, perf.Alloc{GPUType: "v100", PerNode: []int{1, 1}}, false, 5},
		{"unknown GPU type", "A", 1, perf.Alloc{GPUType: "p100", PerNode: []int{1}}, false, 0},
		{"unknown job type", "C", 1, perf.Alloc{GPUType: "v100", PerNode: []int{1}}, false, 0},
		{"no GPUs", "A", 1, perf.Alloc{GPUType: "v100"}, false, 0},
		{"scale factor 0", "A", 0, perf.Alloc{GPUType: "v100", PerNode: []int{1}}, false, 0},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			g.AlwaysConsolidated = c.always
			r, until := g.Rate(gJob(c.model, c.sf), c.a, 0)
			if r != c.want {
				t.Errorf("rate = %v, want %v", r, c.want)
			}
			if !math.IsInf(until, 1) {
				t.Errorf("until = %v, want +Inf", until)
			}
		})
	}
}

func TestGavelPairRate(t *testing.T) {
	g := mustGavel(t, smallGavel)
	cases := []struct {
		t1      string
		sf1     int
		t2      string
		sf2     int
		gpu     string
		r1, r2  float64
		present bool
	}{
		{"A", 1, "B", 1, "v100", 6, 3, true},
		{"B", 1, "A", 1, "v100", 3, 6, true},
		{"A", 1, "B", 1, "V100", 6, 3, true},
		{"A", 1, "B's", 1, "k80", 1, 0.5, true},
		// Only recorded from A's side: swapped.
		{"B's", 1, "A", 1, "k80", 0.5, 1, true},
		{"A", 2, "B", 1, "v100", 0, 0, false},
		{"A", 1, "B", 1, "p100", 0, 0, false},
		{"A", 1, "LM (batch size 20)", 1, "v100", 0, 0, false},
	}
	for _, c := range cases {
		r1, r2, ok := g.PairRate(c.t1, c.sf1, c.t2, c.sf2, c.gpu)
		if r1 != c.r1 || r2 != c.r2 || ok != c.present {
			t.Errorf("PairRate(%q,%d,%q,%d,%s) = %v, %v, %v; want %v, %v, %v", c.t1, c.sf1, c.t2, c.sf2, c.gpu, r1, r2, ok, c.r1, c.r2, c.present)
		}
	}
	if v, ok := g.Isolated("A", 2, "v100_unconsolidated"); v != 12 || !ok {
		t.Errorf("Isolated unconsolidated = %v, %v", v, ok)
	}
	if _, ok := g.Isolated("A", 4, "v100"); ok {
		t.Error("Isolated of a missing scale factor: ok")
	}
	if got := g.GPUTypes(); strings.Join(got, ",") != "k80,v100,v100_unconsolidated" {
		t.Errorf("GPU types %v", got)
	}
	var jts []string
	for _, jt := range g.JobTypes() {
		jts = append(jts, jt.String())
	}
	if got := strings.Join(jts, " "); got != `("A", 1) ("A", 2) ("B", 1) ("B's", 1) ("LM (batch size 20)", 1)` {
		t.Errorf("job types %s", got)
	}
}

func TestGavelCheckAndWork(t *testing.T) {
	g := mustGavel(t, smallGavel)
	mod := func(model string, sf int, f func(j *job.Job)) *job.Job {
		j := gJob(model, sf)
		f(j)
		return j
	}
	none := func(*job.Job) {}
	cases := []struct {
		name string
		j    *job.Job
		want []string
	}{
		{"ok", gJob("A", 1), nil},
		{"ok on type", mod("A", 2, func(j *job.Job) { j.GPUType = "V100" }), nil},
		{"unknown job type", gJob("C", 1), []string{"job g1", `"C"`, "unknown model", `A; B; B's; LM (batch size 20)`}},
		{"missing scale factor", gJob("A", 4), []string{"scale factor (GPUs) 4", "have 1, 2"}},
		{"cannot run anywhere", gJob("B's", 1), []string{`"B's"`, "no throughput > 0"}},
		{"cannot run on type", mod("B's", 1, func(j *job.Job) { j.GPUType = "k80" }), []string{"cannot run on k80"}},
		{"not on type", mod("A", 2, func(j *job.Job) { j.GPUType = "k80" }), []string{"no throughput on k80"}},
		{"unknown GPU type", mod("A", 1, func(j *job.Job) { j.GPUType = "p100" }), []string{`"p100"`, "have k80, v100"}},
		{"unconsolidated is not a type", mod("A", 2, func(j *job.Job) { j.GPUType = "v100_unconsolidated" }), []string{"no Gavel throughputs"}},
		{"epochs", mod("A", 1, func(j *job.Job) { j.Unit = job.Epochs }), []string{`"epochs"`}},
		{"samples without batch", mod("A", 1, func(j *job.Job) { j.Unit = job.Samples }), []string{"needs a batch size"}},
		{"samples, batch in name", mod("LM (batch size 20)", 1, func(j *job.Job) { j.Unit = job.Samples }), nil},
		{"samples, batch given", mod("A", 1, func(j *job.Job) { j.Unit = job.Samples; j.BatchSize = 8 }), nil},
		{"no model", mod("", 1, none), []string{"model: missing"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			err := g.Check(c.j)
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
	if err := g.Check(gJob("C", 1)); !errors.Is(err, perf.ErrUnknownModel) {
		t.Errorf("unknown job type error %v does not wrap perf.ErrUnknownModel", err)
	}
	// Work: 100 iterations; 100 samples at batch 20 = 5 iterations; at a
	// given batch 8 = 12.5.
	if w := g.Work(gJob("A", 1)); w != 100 {
		t.Errorf("work %v", w)
	}
	if w := g.Work(mod("LM (batch size 20)", 1, func(j *job.Job) { j.Unit = job.Samples })); w != 5 {
		t.Errorf("samples work %v, want 5", w)
	}
	if w := g.Work(mod("LM (batch size 20)", 1, func(j *job.Job) { j.Unit = job.Samples; j.BatchSize = 8 })); w != 12.5 {
		t.Errorf("samples work with batch size %v, want 12.5", w)
	}
	// 100 iterations at 10 it/s = 10 s.
	if got := perf.Remaining(g, gJob("A", 1), perf.Packed("v100", 1, 4), 0); got != 10 {
		t.Errorf("Remaining = %v, want 10", got)
	}
	g.Cost = perf.CostTable{Default: perf.Costs{Restart: 7}}
	if c := g.Costs(gJob("A", 1)); c.Restart != 7 {
		t.Errorf("costs %+v", c)
	}
	if g.Name() == "" {
		t.Error("empty name")
	}
}

func TestParseJobTypeKey(t *testing.T) {
	good := []struct {
		key  string
		name string
		sf   int
	}{
		{"('ResNet-18 (batch size 64)', 1)", "ResNet-18 (batch size 64)", 1},
		{`("B's", 8)`, "B's", 8},
		{"  ( 'A3C' ,  4 )  ", "A3C", 4},
		{`('a, b', 2)`, "a, b", 2},
		{`('it\'s', 1)`, "it's", 1},
		{`('tab\there\\', 1)`, "tab\there\\", 1},
		{`('\xe9\u00e9', 1)`, "éé", 1},
	}
	for _, c := range good {
		jt, err := ParseJobTypeKey(c.key)
		if err != nil || jt.Name != c.name || jt.ScaleFactor != c.sf {
			t.Errorf("ParseJobTypeKey(%q) = %+v, %v; want %q, %d", c.key, jt, err, c.name, c.sf)
		}
	}
	bad := []struct{ key, msg string }{
		{"A, 1", "want a tuple"},
		{"('A' 1)", "no comma"},
		{"('A', x)", `scale factor "x"`},
		{"('A', 0)", "integer >= 1"},
		{"('A', -1)", "integer >= 1"},
		{"(A, 1)", "quoted string"},
		{"('A\", 1)", "quoted string"},
		{"('', 1)", "empty"},
		{"('a'b', 1)", "unescaped quote"},
		{`('a\', 1)`, "ends in a backslash"},
		{`('a\q', 1)`, `unknown escape \q`},
		{`('a\x4', 1)`, `short \x`},
		{`('a\xzz', 1)`, `bad \x`},
		{"", "want a tuple"},
	}
	for _, c := range bad {
		_, err := ParseJobTypeKey(c.key)
		if err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("ParseJobTypeKey(%q) error %v, want one mentioning %q", c.key, err, c.msg)
		}
	}
}

func TestGavelParseErrors(t *testing.T) {
	cases := []struct {
		name string
		text string
		want []string
	}{
		{"syntax error with position", "{\n \"v100\": {\n  \"('A', 1)\": {\"null\": 1.0,}\n }\n}",
			[]string{"gavel throughputs small.json line 3 column", "invalid character"}},
		{"wrong shape", `{"v100": [1, 2]}`, []string{"small.json line 1 column", "cannot unmarshal array"}},
		{"null file", `null`, []string{"got null"}},
		{"no GPU types", `{}`, []string{"no GPU types"}},
		{"bad key", `{"v100": {"A, 1": {"null": 1}}}`, []string{`GPU type "v100" key "A, 1"`, "want a tuple"}},
		{"missing null", `{"v100": {"('A', 1)": {"('B', 1)": [1, 2]}}}`, []string{`key "('A', 1)"`, `no "null"`}},
		{"null isolated", `{"v100": {"('A', 1)": {"null": null}}}`, []string{`"null": want a throughput, got null`}},
		{"string isolated", `{"v100": {"('A', 1)": {"null": "fast"}}}`, []string{`got "fast"`}},
		{"negative isolated", `{"v100": {"('A', 1)": {"null": -1}}}`, []string{"finite throughput >= 0"}},
		{"entry null", `{"v100": {"('A', 1)": null}}`, []string{"want an object, got null"}},
		{"pair of three", `{"v100": {"('A', 1)": {"null": 1, "('B', 1)": [1, 2, 3]}}}`, []string{`co-located key "('B', 1)"`, "got 3 values"}},
		{"pair not a list", `{"v100": {"('A', 1)": {"null": 1, "('B', 1)": 4}}}`, []string{"want [this, other]"}},
		{"pair with null", `{"v100": {"('A', 1)": {"null": 1, "('B', 1)": [1, null]}}}`, []string{"value 2", "got null"}},
		{"pair bad key", `{"v100": {"('A', 1)": {"null": 1, "B": [1, 2]}}}`, []string{`co-located key "B"`}},
		{"duplicate job type", `{"v100": {"('A', 1)": {"null": 1}, "('A',1)": {"null": 2}}}`, []string{"same job type"}},
		{"duplicate pair", `{"v100": {"('A', 1)": {"null": 1, "('B', 1)": [1, 2], "('B',1)": [1, 2]}}}`, []string{"same job type"}},
		{"duplicate GPU type", `{"v100": {"('A', 1)": {"null": 1}}, "V100": {"('A', 1)": {"null": 1}}}`, []string{"same as"}},
		{"empty GPU type", `{" ": {"('A', 1)": {"null": 1}}}`, []string{"empty name"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseGavel("small.json", []byte(c.text))
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
}

func TestLoadGavelFS(t *testing.T) {
	fsys := fstest.MapFS{"g.json": {Data: []byte(smallGavel)}}
	g, err := LoadGavelFS(fsys, "g.json")
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := g.Isolated("A", 1, "v100"); v != 10 {
		t.Errorf("isolated %v", v)
	}
	if _, err := LoadGavelFS(fsys, "missing.json"); err == nil {
		t.Error("missing file: no error")
	}
	if _, err := LoadGavel("/nonexistent/g.json"); err == nil {
		t.Error("missing OS file: no error")
	}
	g2, err := ReadGavel("r.json", strings.NewReader(smallGavel))
	if err != nil || len(g2.GPUTypes()) != 3 {
		t.Errorf("ReadGavel: %v", err)
	}
}

func TestGavelShared(t *testing.T) {
	g := mustGavel(t, smallGavel)
	a, b := gJob("A", 1), gJob("B", 1)
	v100 := perf.Alloc{GPUType: "v100", PerNode: []int{1}}
	// smallGavel: sharing a v100, A gets 6 it/s and B 3 (alone: 10 and 5).
	if r1, r2, ok := g.Shared(a, b, v100); !ok || r1 != 6 || r2 != 3 {
		t.Errorf("A with B on v100: %v %v %v, want 6 3 true", r1, r2, ok)
	}
	if r1, r2, ok := g.Shared(b, a, v100); !ok || r1 != 3 || r2 != 6 {
		t.Errorf("B with A on v100: %v %v %v, want 3 6 true", r1, r2, ok)
	}
	// On k80 the pair is recorded from A's side only, with B's.
	if r1, r2, ok := g.Shared(gJob("B's", 1), a, perf.Alloc{GPUType: "k80", PerNode: []int{1}}); !ok || r1 != 0.5 || r2 != 1 {
		t.Errorf("B's with A on k80: %v %v %v, want 0.5 1 true", r1, r2, ok)
	}
	if _, _, ok := g.Shared(a, gJob("A", 2), v100); ok {
		t.Error("jobs of different scale factors are paired")
	}
	if _, _, ok := g.Shared(a, b, perf.Alloc{GPUType: "p100", PerNode: []int{1}}); ok {
		t.Error("a pair on a GPU type without table is reported")
	}
	if _, _, ok := g.Shared(a, b, perf.Alloc{GPUType: "v100"}); ok {
		t.Error("a pair on no GPUs is reported")
	}
}
