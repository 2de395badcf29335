package policy

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// specs builds the registry's policies from their specs in tests.
var specs = policytest.Builder(Parse)

// ---------------------------------------------------------------------------
// Registry and spec parsing.
// ---------------------------------------------------------------------------

func TestAllListsEveryPolicySorted(t *testing.T) {
	infos := All()
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
		if i.Summary == "" {
			t.Errorf("policy %s has no summary", i.Name)
		}
		if i.Build == nil {
			t.Errorf("policy %s has no builder", i.Name)
		}
	}
	if !sort.StringsAreSorted(names) {
		t.Errorf("All() = %v, want sorted by name", names)
	}
	for _, want := range []string{"edf", "fifo", "srtf", "tiresias", "tiresias-gittins"} {
		if !slices.Contains(names, want) {
			t.Errorf("All() = %v, missing %s", names, want)
		}
	}
	// Of these, only EDF needs deadlines.
	needs := map[string]bool{"edf": true, "fifo": false, "srtf": false, "tiresias": false, "tiresias-gittins": false}
	for _, i := range infos {
		if want, ok := needs[i.Name]; ok && i.NeedsDeadlines != want {
			t.Errorf("%s: NeedsDeadlines = %v, want %v", i.Name, i.NeedsDeadlines, want)
		}
	}
	// All returns a copy: reordering it must not touch the registry.
	infos[0], infos[len(infos)-1] = infos[len(infos)-1], infos[0]
	if again := All(); again[0].Name != names[0] {
		t.Errorf("All() shares its slice with the registry")
	}
}

func TestParseBuildsNamedPolicy(t *testing.T) {
	ctx := Context{Jobs: []*job.Job{enginetest.Job("a").Seconds(100).Obj()}}
	for _, tc := range []struct {
		spec, name string
	}{
		{"fifo", "fifo"},
		{"  fifo  ", "fifo"}, // surrounding blanks are ignored
		{"fifo:backfill=true", "fifo"},
		{"fifo:backfill=false", "fifo"},
		{"srtf", "srtf"},
		{"edf", "edf"},
		{"tiresias", "tiresias"},
		{"tiresias:", "tiresias"}, // an empty option list is no option
		{"tiresias:preset=paper", "tiresias"},
		{"tiresias:preset=pollux", "tiresias:preset=pollux"},
		{"tiresias:limits=3600/7200:knob=2", "tiresias"},
		{"tiresias-gittins", "tiresias-gittins"},
		{"tiresias-gittins:preset=pollux:quantum=100", "tiresias-gittins:preset=pollux"},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			if got := specs.Parse(t, tc.spec, ctx).Name(); got != tc.name {
				t.Errorf("Name() = %q, want %q", got, tc.name)
			}
		})
	}
}

func TestParseKnobValues(t *testing.T) {
	ctx := Context{Jobs: []*job.Job{enginetest.Job("a").Seconds(100).Obj()}}
	if f := specs.Parse(t, "fifo", ctx).(*classic.FIFO); f.Backfill {
		t.Errorf("fifo: backfill on by default")
	}
	if f := specs.Parse(t, "fifo:backfill=true", ctx).(*classic.FIFO); !f.Backfill {
		t.Errorf("fifo:backfill=true: backfill off")
	}
	for _, tc := range []struct {
		spec    string
		limits  []float64
		knob    float64
		quantum float64 // 0: not a classic.Gittins policy
	}{
		// Tiresias' simulator: 3 limits (4 queues) of 3250, 7200, 18000 GPU-s.
		{"tiresias", []float64{3250, 7200, 18000}, 0, 0},
		{"tiresias:preset=paper", []float64{3250, 7200, 18000}, 0, 0},
		// The Pollux artifact: one limit of 16 GPU-hours, starvation knob off.
		{"tiresias:preset=pollux", []float64{57600}, 0, 0},
		// Explicit knobs override the preset.
		{"tiresias:preset=pollux:limits=3600", []float64{3600}, 0, 0},
		{"tiresias:limits=3600/7200:knob=2", []float64{3600, 7200}, 2, 0},
		{"tiresias:knob=0.5", []float64{3250, 7200, 18000}, 0.5, 0},
		{"tiresias-gittins", []float64{3250, 7200, 18000}, 0, 3250},
		{"tiresias-gittins:quantum=100:knob=4", []float64{3250, 7200, 18000}, 4, 100},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			p := specs.Parse(t, tc.spec, ctx).(*classic.Tiresias)
			if !slices.Equal(p.Limits, tc.limits) || p.Knob != tc.knob {
				t.Errorf("limits %v knob %v, want %v and %v", p.Limits, p.Knob, tc.limits, tc.knob)
			}
			switch {
			case tc.quantum == 0 && p.Gittins != nil:
				t.Errorf("2D-LAS built a classic.Gittins index")
			case tc.quantum != 0 && (p.Gittins == nil || p.Gittins.Quantum != tc.quantum):
				t.Errorf("classic.Gittins %+v, want quantum %v", p.Gittins, tc.quantum)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	ctx := Context{Jobs: []*job.Job{enginetest.Job("a").Seconds(100).Obj()}}
	for _, tc := range []struct {
		spec string
		ctx  *Context // nil: ctx above
		want []string // substrings of the error
	}{
		{spec: "nope", want: []string{`unknown policy "nope"`, "fifo", "tiresias-gittins"}},
		{spec: "", want: []string{`unknown policy ""`}},
		{spec: "FIFO", want: []string{`unknown policy "FIFO"`}}, // names are case-sensitive
		{spec: "fifo:backfill", want: []string{`"fifo:backfill"`, `option "backfill": want key=value`}},
		{spec: "fifo:=true", want: []string{`option "=true": want key=value`}},
		{spec: "fifo:backfill=true:", want: []string{`option "": want key=value`}},
		// Unknown keys are reported with the policy's knobs, sorted.
		{spec: "fifo:backfil=true", want: []string{"policy fifo: unknown option(s) backfil", "backfill=false"}},
		{spec: "srtf:z=1:a=2", want: []string{"policy srtf: unknown option(s) a, z"}},
		{spec: "edf:deadline=1", want: []string{"policy edf: unknown option(s) deadline"}},
		// quantum and dist belong to 2D-classic.Gittins only.
		{spec: "tiresias:quantum=5", want: []string{"policy tiresias: unknown option(s) quantum"}},
		{spec: "tiresias:dist=x.csv", want: []string{"policy tiresias: unknown option(s) dist"}},
		// Bad values name the policy, the key and the value.
		{spec: "fifo:backfill=maybe", want: []string{`policy fifo: backfill="maybe": want true or false`}},
		{spec: "tiresias:knob=abc", want: []string{`policy tiresias: knob="abc": want a number`}},
		{spec: "tiresias:knob=", want: []string{`policy tiresias: knob="": want a number`}},
		{spec: "tiresias:knob=NaN", want: []string{`policy tiresias: knob="NaN": want a number`}},
		{spec: "tiresias:knob=Inf", want: []string{`policy tiresias: knob="Inf": want a number`}},
		{spec: "tiresias:knob=-1", want: []string{"policy tiresias: knob must be >= 0, got -1"}},
		{spec: "tiresias:limits=100/x", want: []string{`policy tiresias: limits="100/x": want numbers separated by /`}},
		{spec: "tiresias:limits=100/", want: []string{`policy tiresias: limits="100/": want numbers`}},
		{spec: "tiresias:limits=100/Inf", want: []string{`policy tiresias: limits="100/Inf": want numbers`}},
		{spec: "tiresias:limits=200/100", want: []string{"policy tiresias: limits must be positive and ascending, got [200 100]"}},
		{spec: "tiresias:limits=100/100", want: []string{"limits must be positive and ascending"}},
		{spec: "tiresias:limits=0", want: []string{"limits must be positive and ascending"}},
		{spec: "tiresias:limits=-5/10", want: []string{"limits must be positive and ascending"}},
		{spec: "tiresias:preset=yarn", want: []string{`policy tiresias: preset="yarn": want paper or pollux`}},
		{spec: "tiresias-gittins:quantum=q", want: []string{`policy tiresias-gittins: quantum="q": want a number`}},
		{spec: "tiresias-gittins:quantum=0", want: []string{"policy tiresias-gittins: quantum must be > 0, got 0"}},
		{spec: "tiresias-gittins:quantum=-3250", want: []string{"quantum must be > 0"}},
		{spec: "tiresias-gittins:knob=-1", want: []string{"policy tiresias-gittins: knob must be >= 0"}},
		{spec: "tiresias-gittins:dist=/nonexistent/yarn.csv", want: []string{"gittins distribution", "/nonexistent/yarn.csv"}},
		// Without dist=, the samples come from the trace's jobs; jobs with no
		// duration give none.
		{spec: "tiresias-gittins", ctx: &Context{}, want: []string{"policy tiresias-gittins: no GPU-time samples", "dist=FILE"}},
		{spec: "tiresias-gittins", ctx: &Context{Jobs: []*job.Job{enginetest.Job("e").Epochs("cifar10", 10, 128).Obj()}},
			want: []string{"no GPU-time samples"}},
	} {
		t.Run(tc.spec, func(t *testing.T) {
			c := ctx
			if tc.ctx != nil {
				c = *tc.ctx
			}
			p, err := Parse(tc.spec, c)
			if err == nil {
				t.Fatalf("Parse(%q) = %s, want an error", tc.spec, p.Name())
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Parse(%q) error %q, want it to contain %q", tc.spec, err, w)
				}
			}
		})
	}
}

// ---------------------------------------------------------------------------
// greedy, the packing loop every policy here shares.
// ---------------------------------------------------------------------------

func TestGreedy(t *testing.T) {
	a := enginetest.Job("a").At(0).GPUs(2).Obj()
	big := enginetest.Job("big").At(1).GPUs(4).Obj()
	b := enginetest.Job("b").At(2).GPUs(1).Obj()
	c := enginetest.Job("c").At(3).GPUs(1).Obj()
	v := enginetest.Job("v").At(4).GPUs(2).Type("v100").Obj()
	t4 := enginetest.Job("t").At(5).GPUs(1).Type("t4").Obj()
	u := enginetest.Job("u").At(6).GPUs(2).Obj()
	w := enginetest.Job("w").At(7).GPUs(4).Type("v100").Obj()
	for _, tc := range []struct {
		name    string
		cluster string
		order   []*job.Job
		strict  bool
		want    []string
	}{
		// 4 GPUs: a takes 2, big (4) no longer fits; strict stops there.
		{"strict stops at the first misfit", "1x4:t4", []*job.Job{a, big, b, c}, true, []string{"a:2"}},
		// Not strict: b and c fill the 2 GPUs left behind big.
		{"lenient skips misfits", "1x4:t4", []*job.Job{a, big, b, c}, false, []string{"a:2", "b:1", "c:1"}},
		// Exactly full is a fit.
		{"exact fit", "1x4:t4", []*job.Job{big}, true, []string{"big:4"}},
		// The plan keeps the given order, not submission order.
		{"order is kept", "1x4:t4", []*job.Job{c, b, a}, true, []string{"c:1", "b:1", "a:2"}},
		// 2 t4 + 2 v100: v fits the v100s; a second typed-v100 demand would
		// not, whatever the total.
		{"typed jobs count their type", "1x2:t4,1x2:v100", []*job.Job{v, t4, b}, true, []string{"v:2:v100", "t:1:t4", "b:1:t4"}},
		{"typed job does not fit its type", "1x3:t4,1x1:v100", []*job.Job{v, b}, true, []string{}},
		// v (2 v100) cannot fit the single V100 and is skipped; b then takes
		// the tightest pool that holds one GPU: the V100.
		{"typed misfit skipped when lenient", "1x3:t4,1x1:v100", []*job.Job{v, b}, false, []string{"b:1:v100"}},
		// On a mixed cluster an any-type job is given the tightest type
		// that holds it: u (2) goes to the 2 T4, leaving the 4 V100 for w,
		// which needs them. Picking the bigger pool would leave w out and
		// two T4 idle.
		{"any-type job takes the best-fit type", "1x2:t4,1x4:v100", []*job.Job{u, w}, true, []string{"u:2:t4", "w:4:v100"}},
		// A type the cluster lacks never fits.
		{"missing type", "1x4:t4", []*job.Job{v, b}, false, []string{"b:1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var sts []policytest.JobState
			for _, j := range tc.order {
				sts = append(sts, policytest.JobState{Job: j})
			}
			s := policytest.Snap(t, 10, enginetest.Cluster(tc.cluster), sts...)
			// greedy takes the order as given: rebuild it from the test's order.
			order := make([]*engine.Status, len(tc.order))
			for i, j := range tc.order {
				for _, st := range s.Jobs {
					if st.Job == j {
						order[i] = st
					}
				}
			}
			if got := policytest.Runs(alloc.Greedy(s, order, tc.strict)); !slices.Equal(got, tc.want) {
				t.Errorf("greedy = %v, want %v", got, tc.want)
			}
		})
	}
}
