// Package policytest builds what the policy families' tests share:
// hand-built snapshots (Snap), plans written as text (Runs), policies
// built from specs (Builder, Family), table tests of plans
// (Builder.CheckPlans) and scenarios run through a real engine
// (Builder.Play) or the simulator (Builder.Starts).
package policytest

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"slices"
	"sort"
	"strings"
	"testing"

	capacitypkg "github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/trace"
)

// JobState is one job's state in a hand-built snapshot (Snap).
type JobState struct {
	Job      *job.Job
	Held     int     // GPUs held now; 0 = waiting
	Attained float64 // GPU-seconds held so far
	Executed float64 // seconds holding GPUs so far
	Progress float64 // work done, model units (seconds for perf.Duration)
	LastStop float64 // last preemption; ignored (= submission) when starts == 0
	Starts   int     // launches so far; a held job counts at least one
	Memo     engine.Memo
}

// Snap builds the snapshot a policy would see at now on cluster c, with the
// duration model and the jobs ordered like the engine orders them (submit,
// then ID).
func Snap(t *testing.T, now float64, c *cluster.Cluster, jobs ...JobState) *engine.Snapshot {
	t.Helper()
	s := &engine.Snapshot{Now: now, Cluster: c, Model: perf.Duration{}, GPUsPerNode: map[string]int{}}
	for _, n := range c.Nodes {
		s.GPUsPerNode[n.GPUType] = max(s.GPUsPerNode[n.GPUType], n.GPUs)
	}
	next := 0
	for _, x := range jobs {
		if err := x.Job.Validate(); err != nil {
			t.Fatalf("bad test job: %v", err)
		}
		st := &engine.Status{Job: x.Job, State: job.Pending, Work: x.Job.Work, Progress: x.Progress,
			Attained: x.Attained, Executed: x.Executed, FirstStart: -1, LastStart: -1,
			LastStop: x.Job.Submit, Finish: -1, Starts: x.Starts, Memo: x.Memo}
		if x.Starts > 0 {
			st.State, st.LastStop = job.Preempted, x.LastStop
		}
		if x.Held > 0 {
			st.State = job.Running
			st.Starts = max(st.Starts, 1)
			for range x.Held {
				st.GPUs = append(st.GPUs, cluster.GPUID(next))
				next++
			}
			typ := c.NodeOf(st.GPUs[0]).GPUType
			st.Alloc = perf.Packed(typ, x.Held, s.GPUsPerNode[typ])
		}
		s.Jobs = append(s.Jobs, st)
	}
	if next > c.TotalGPUs() {
		t.Fatalf("bad test: jobs hold %d GPUs, the cluster has %d", next, c.TotalGPUs())
	}
	sort.SliceStable(s.Jobs, func(a, b int) bool {
		ja, jb := s.Jobs[a].Job, s.Jobs[b].Job
		if ja.Submit != jb.Submit {
			return ja.Submit < jb.Submit
		}
		return ja.ID < jb.ID
	})
	return s
}

// Runs writes a plan's assignments as "id:gpus" (":type" added when typed),
// in plan order (most important first).
func Runs(p engine.Plan) []string {
	out := []string{}
	for _, a := range p.Run {
		s := fmt.Sprintf("%s:%d", a.Job, a.GPUs)
		if a.GPUType != "" {
			s += ":" + a.GPUType
		}
		out = append(out, s)
	}
	return out
}

// Builder builds a policy from its spec: the registry's policy.Parse, or
// one family's policies (Family).
type Builder func(spec string, ctx contract.Context) (engine.Policy, error)

// Family builds the policies the families register (contract.Info values
// passed to register; a test that compares with another family's policy
// names that family too) from their specs, refusing unknown knobs as the
// registry does.
func Family(families ...func(register func(contract.Info))) Builder {
	return func(spec string, ctx contract.Context) (engine.Policy, error) {
		name, kv, err := contract.Split(spec)
		if err != nil {
			return nil, err
		}
		var info *contract.Info
		for _, policies := range families {
			policies(func(i contract.Info) {
				if i.Name == name && info == nil {
					info = &i
				}
			})
		}
		if info == nil {
			return nil, fmt.Errorf("no family given registers a policy %q", name)
		}
		return info.New(ctx, kv)
	}
}

// Parse builds spec or fails the test.
func (f Builder) Parse(t testing.TB, spec string, ctx contract.Context) engine.Policy {
	t.Helper()
	p, err := f(spec, ctx)
	if err != nil {
		t.Fatalf("Parse(%q): %v", spec, err)
	}
	return p
}

// Clock is a settable engine.Clock: Now returns T.
type Clock struct{ T float64 }

// Now implements engine.Clock.
func (c *Clock) Now() float64 { return c.T }

// FirstFree is a minimal placer for the engine-driven tests: a job whose
// count did not change keeps its GPUs; others take the lowest free GPUs of
// their type, in plan order. It keeps these tests independent of package place.
type FirstFree struct{}

// Name implements engine.Placer.
func (FirstFree) Name() string { return "first-free" }

// Place implements engine.Placer.
func (FirstFree) Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	used := make([]bool, c.TotalGPUs())
	out := map[string][]cluster.GPUID{}
	for _, a := range run {
		if h := held[a.Job]; len(h) == a.GPUs {
			out[a.Job] = h
			for _, g := range h {
				used[g] = true
			}
		}
	}
	for _, a := range run {
		if _, ok := out[a.Job]; ok {
			continue
		}
		var got []cluster.GPUID
		for g := range used {
			if len(got) < a.GPUs && !used[g] && (a.GPUType == "" || c.NodeOf(cluster.GPUID(g)).GPUType == a.GPUType) {
				got = append(got, cluster.GPUID(g))
			}
		}
		if len(got) == a.GPUs {
			for _, g := range got {
				used[g] = true
			}
			out[a.Job] = got
		}
	}
	return out
}

// Step is one event time of an engine-driven scenario: at time at, jobs whose
// work is done finish, the jobs in submit arrive (their Submit must be at),
// one round runs, and running lists the jobs holding GPUs afterwards.
type Step struct {
	At      float64
	Submit  []*job.Job
	Running []string
}

// Play runs a scenario through a real engine with the duration model. It
// acts as a tiny executor: between steps each running job progresses at the
// model's rate, and a job whose work is done finishes at the next step.
func (f Builder) Play(t *testing.T, spec, shorthand string, steps []Step) {
	t.Helper()
	var all []*job.Job
	for _, s := range steps {
		all = append(all, s.Submit...)
	}
	model := perf.Duration{}
	clk := &Clock{}
	e, err := engine.New(engine.Config{Cluster: enginetest.Cluster(shorthand), Model: model,
		Policy: f.Parse(t, spec, contract.Context{Jobs: all}), Placer: FirstFree{}, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	last := 0.0
	for _, s := range steps {
		clk.T = s.At
		var done []string
		for _, st := range e.Active() {
			if len(st.GPUs) == 0 {
				continue
			}
			rate, _ := model.Rate(st.Job, st.Alloc, st.Progress)
			p := math.Min(st.Progress+(s.At-last)*rate, st.Work)
			if err := e.Report(st.Job.ID, p); err != nil {
				t.Fatal(err)
			}
			if p >= st.Work-1e-9 {
				done = append(done, st.Job.ID)
			}
		}
		for _, id := range done {
			if err := e.Finish(id); err != nil {
				t.Fatal(err)
			}
		}
		for _, j := range s.Submit {
			if j.Submit != s.At {
				t.Fatalf("bad test: job %s submitted at %v in the step at %v", j.ID, j.Submit, s.At)
			}
			if _, err := e.Submit(j); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := e.Schedule(); err != nil {
			t.Fatalf("t=%v: %v", s.At, err)
		}
		got := []string{}
		for _, st := range e.Active() {
			if len(st.GPUs) > 0 {
				got = append(got, st.Job.ID)
			}
		}
		sort.Strings(got)
		want := append([]string{}, s.Running...)
		sort.Strings(want)
		if !slices.Equal(got, want) {
			t.Errorf("%s at t=%v: running %v, want %v", spec, s.At, got, want)
		}
		last = s.At
	}
}

// Wait is a waiting rigid job of gpus GPUs and seconds of work.
func Wait(id string, submit float64, gpus int, seconds float64) JobState {
	return JobState{Job: enginetest.Job(id).At(submit).GPUs(gpus).Seconds(seconds).Obj()}
}

// Hold is a rigid job holding gpus GPUs.
func Hold(id string, submit float64, gpus int, seconds float64) JobState {
	return JobState{Job: enginetest.Job(id).At(submit).GPUs(gpus).Seconds(seconds).Obj(), Held: gpus}
}

// WithDeadline sets a job's absolute deadline.
func WithDeadline(x JobState, d float64) JobState { x.Job.Deadline = d; return x }

// WithProgress sets the seconds of work already done.
func WithProgress(x JobState, p float64) JobState { x.Progress = p; return x }

// PlanCase is one case of CheckPlans: the jobs, on the cluster
// enginetest.Cluster builds from its shorthand, and the plan wanted.
type PlanCase struct {
	Name    string
	Cluster string
	Jobs    []JobState
	Want    []string // plan.Run as "id:gpus", most important first
}

// CheckPlans builds spec once and checks each case's plan at t=1000, and
// that the same snapshot gives the same plan again.
func (f Builder) CheckPlans(t *testing.T, spec string, cases []PlanCase) {
	t.Helper()
	p := f.Parse(t, spec, contract.Context{})
	for _, tc := range cases {
		t.Run(tc.Name, func(t *testing.T) {
			s := Snap(t, 1000, enginetest.Cluster(tc.Cluster), tc.Jobs...)
			got := Runs(p.Schedule(s))
			if !slices.Equal(got, tc.Want) {
				t.Errorf("%s: plan %v, want %v", spec, got, tc.Want)
			}
			// Deterministic: the same snapshot gives the same plan.
			if again := Runs(p.Schedule(s)); !slices.Equal(again, got) {
				t.Errorf("%s: second plan %v differs from first %v", spec, again, got)
			}
		})
	}
}

// Starts runs jobs under the family's spec in the simulator on 4 T4 GPUs
// with the duration model and returns each job's record by ID.
func (f Builder) Starts(t *testing.T, spec string, jobs []*job.Job) map[string]report.JobRecord {
	t.Helper()
	p := f.Parse(t, spec, contract.Context{Jobs: jobs})
	r, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("1x4:t4"), Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, OnEvents: true}, jobs)
	if err != nil {
		t.Fatalf("%s: %v", spec, err)
	}
	out := map[string]report.JobRecord{}
	for _, j := range r.Jobs {
		out[j.ID] = j
	}
	return out
}

// FallbackCase is a policy whose fallback Fallbacks checks: Force makes its
// solver fail; Want is what the fallback's reason must say.
type FallbackCase struct {
	Spec  string
	Force func(engine.Policy)
	Want  string
}

// Fallbacks checks each case: the policy, its solver forced to fail, still
// runs twelve deadline jobs on 4 T4 GPUs, and the run's report counts the
// fallback with its reason (JSON summary and the text table); without the
// failure it counts none.
func (f Builder) Fallbacks(t *testing.T, cases []FallbackCase) {
	t.Helper()
	var jobs []*job.Job
	for i := 0; i < 12; i++ {
		at := float64(i * 40)
		jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).GPUs(1+i%3).Seconds(300+float64(i%4)*200).Deadline(at+2000).Obj())
	}
	c := enginetest.Cluster("1x4:t4")
	for _, tc := range cases {
		for _, force := range []bool{false, true} {
			p := f.Parse(t, tc.Spec, contract.Context{})
			if force {
				tc.Force(p)
			}
			r, err := sim.Run(sim.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}}, jobs)
			if err != nil {
				t.Fatalf("%s force=%v: %v", tc.Spec, force, err)
			}
			sum := report.Summarize(r)
			var table bytes.Buffer
			if err := report.WriteTable(&table, []report.Summary{sum}); err != nil {
				t.Fatal(err)
			}
			if !force {
				if sum.Fallbacks != 0 || strings.Contains(table.String(), "fallback") {
					t.Errorf("%s without a forced failure reports %d fallbacks: %+v", tc.Spec, sum.Fallbacks, sum.Warnings)
				}
				continue
			}
			if sum.Fallbacks == 0 || len(sum.Warnings) != 1 || !strings.Contains(sum.Warnings[0].Reason, tc.Want) ||
				!strings.Contains(sum.Warnings[0].Reason, "forced failure") || sum.Warnings[0].Kind != engine.WarnFallback {
				t.Errorf("%s forced: fallbacks %d, warnings %+v; want one fallback saying %q", tc.Spec, sum.Fallbacks, sum.Warnings, tc.Want)
			}
			if !strings.Contains(table.String(), "policy fallbacks (rounds)") || !strings.Contains(table.String(), tc.Want) {
				t.Errorf("%s forced: the table does not show the fallback:\n%s", tc.Spec, table.String())
			}
		}
	}
}

// PairTable is a Gavel throughput table of measured pairs: on one V100, A runs at 10 it/s alone and B at 5; sharing a
// GPU, A gets 6 and B 3 (6/10 + 3/5 = 1.2: packing helps). C and A packed
// get 4 and 2, C alone 8 (4/10 + 2/8 = 0.65: packing hurts).
const PairTable = `{"v100": {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 3.0], "('C', 1)": [4.0, 2.0]},
 "('B', 1)": {"null": 5.0},
 "('C', 1)": {"null": 8.0}
}}`

// PairJob is a one-GPU job of iters iterations of model (PairTable's A, B, C).
func PairJob(id, model string, iters float64) *job.Job {
	return &job.Job{ID: id, Model: model, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: iters, Unit: job.Iterations}
}

// NotSharer hides a model's pair throughputs: the simulator then runs one
// job per GPU, as tide serve and tide kube do. Its rate bound is the
// model's (perf.MaxRate).
type NotSharer struct{ perf.Model }

// MaxRate implements perf.Bounder: the model's bound, when it has one.
func (n NotSharer) MaxRate(j *job.Job, s perf.Span, p float64) (float64, float64, bool) {
	return perf.MaxRate(n.Model, j, s, p)
}

// JobsSnap is the snapshot at t=1000 of jobs all waiting on c under m
// (Sharing set when m measures pairs).
func JobsSnap(c *cluster.Cluster, m perf.Model, jobs []*job.Job) *engine.Snapshot {
	_, sharing := m.(perf.Sharer)
	s := &engine.Snapshot{Now: 1000, Cluster: c, Model: m, GPUsPerNode: map[string]int{}, Sharing: sharing}
	for _, n := range c.Nodes {
		s.GPUsPerNode[n.GPUType] = max(s.GPUsPerNode[n.GPUType], n.GPUs)
	}
	for _, j := range jobs {
		s.Jobs = append(s.Jobs, &engine.Status{Job: j, State: job.Pending, Work: m.Work(j), FirstStart: -1, LastStart: -1, Finish: -1})
	}
	return s
}

// Records replays jobs under spec on shorthand cluster c with rounds of
// round seconds (and at every arrival and completion when onEvents) and
// returns the job records by ID.
func (f Builder) Records(t *testing.T, spec, c string, m perf.Model, round float64, onEvents bool, jobs ...*job.Job) map[string]report.JobRecord {
	t.Helper()
	r, err := sim.Run(sim.Config{Cluster: enginetest.Cluster(c), Model: m, Policy: f.Parse(t, spec, contract.Context{}),
		Placer: place.Pack{}, Round: round, OnEvents: onEvents}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]report.JobRecord{}
	for _, rec := range r.Jobs {
		out[rec.ID] = rec
	}
	return out
}

// GavelTrace reads generated_seed<seed>_lam3600.trace and Gavel's
// throughputs, skipping without ../shared/data (SharedData).
func GavelTrace(tb testing.TB, seed int) ([]*job.Job, *table.Gavel) {
	tb.Helper()
	dir := enginetest.SharedData(tb) + "/gavel/"
	if _, err := os.Stat(dir); err != nil {
		tb.Skipf("Gavel data not here (%v)", err)
	}
	tr, err := trace.ReadFile(fmt.Sprintf("%sgenerated_seed%d_lam3600.trace", dir, seed), "", trace.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	m, err := table.LoadGavel(dir + "simulation_throughputs.json")
	if err != nil {
		tb.Fatal(err)
	}
	return tr.Jobs, m
}

// Started marks a held job's current stint as begun at t.
func Started(s *engine.Snapshot, id string, t float64) {
	for _, st := range s.Jobs {
		if st.Job.ID == id {
			st.LastStart = t
		}
	}
}

// SqrtModel is a performance model whose jobs speed up as sqrt(GPUs), so
// speedups are concave and the knapsacks have something to choose.
type SqrtModel struct{ Restart float64 }

// Name implements perf.Model.
func (SqrtModel) Name() string { return "sqrt" }

// Check implements perf.Model.
func (SqrtModel) Check(*job.Job) error { return nil }

// Work implements perf.Model.
func (SqrtModel) Work(j *job.Job) float64 { return j.Work }

// Costs implements perf.Model.
func (m SqrtModel) Costs(*job.Job) perf.Costs {
	return perf.Costs{Start: m.Restart, Restart: m.Restart, Resize: m.Restart}
}

// Rate implements perf.Model.
func (SqrtModel) Rate(j *job.Job, a perf.Alloc, _ float64) (float64, float64) {
	if a.GPUs() < j.MinGPUs || a.GPUs() == 0 {
		return 0, math.Inf(1)
	}
	return math.Sqrt(float64(a.GPUs())), math.Inf(1)
}

// LoanCluster is one training node and one inference node of 4 GPUs each.
func LoanCluster(t testing.TB) *cluster.Cluster {
	c, err := cluster.New([]cluster.Node{
		{Name: "train-0", Site: "train", GPUType: "a100", GPUs: 4},
		{Name: "infer-0", Site: "infer", SiteKind: cluster.SiteInference, GPUType: "a100", GPUs: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// LoanSnapshot is a snapshot at now on LoanCluster with SqrtModel and
// the first `down` inference GPUs taken by inference; its jobs (j0, j1,
// ...) are elastic 1..4, waiting, with the given seconds of work on one
// GPU.
func LoanSnapshot(t testing.TB, now float64, down int, works ...float64) *engine.Snapshot {
	c := LoanCluster(t)
	s := &engine.Snapshot{Now: now, Cluster: c, Model: SqrtModel{}, GPUsPerNode: map[string]int{"a100": 4}}
	if down > 0 {
		s.Down = make([]bool, c.TotalGPUs())
		for g := 4; g < 4+down; g++ {
			s.Down[g] = true
		}
	}
	for i, w := range works {
		j := enginetest.Job(fmt.Sprintf("j%d", i)).At(0).Elastic(1, 1, 4).Seconds(w).Obj()
		if err := j.Validate(); err != nil {
			t.Fatal(err)
		}
		s.Jobs = append(s.Jobs, &engine.Status{Job: j, State: job.Pending, Work: w, FirstStart: -1, LastStart: -1, Finish: -1})
	}
	return s
}

// checkedPolicy wraps a policy and checks every round: no job holds a GPU
// that is down (inference has it back), and no plan gives a site more GPUs
// than it has up.
type checkedPolicy struct {
	engine.Policy
	t      *testing.T
	rounds int
	lent   int // rounds in which some job ran on inference GPUs
}

func (c *checkedPolicy) Schedule(s *engine.Snapshot) engine.Plan {
	c.rounds++
	onInfer := false
	for _, st := range s.Jobs {
		for _, g := range st.GPUs {
			if !s.Up(g) {
				c.t.Fatalf("t=%v: job %s holds GPU %d, which inference has taken back", s.Now, st.Job.ID, g)
			}
			if s.Cluster.NodeOf(g).SiteKind == cluster.SiteInference {
				onInfer = true
			}
		}
	}
	if onInfer {
		c.lent++
	}
	p := c.Policy.Schedule(s)
	per := map[string]int{}
	for _, a := range p.Run {
		per[a.Site] += a.GPUs
	}
	for site, n := range per {
		if up := s.Available(site, ""); n > up {
			c.t.Fatalf("t=%v: plan gives site %s %d GPUs, %d are up", s.Now, site, n, up)
		}
	}
	return p
}

// RandomLoanLoad draws n elastic jobs (IDs j00, j01, ...) arriving in the
// first 3,000 s, each of 1 to 1+r.IntN(most) GPUs and 200-2,200 s of work,
// and 40 inference demands on site "infer", one every 150 s, of 0 to 4
// GPUs: a load for Loaning, drawn from r in that order.
func RandomLoanLoad(r *rand.Rand, n, most int) ([]*job.Job, []capacitypkg.Change) {
	var jobs []*job.Job
	for i := range n {
		jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(float64(r.IntN(3000))).
			Elastic(1, 1, 1+r.IntN(most)).Seconds(float64(200+r.IntN(2000))).Obj())
	}
	var changes []capacitypkg.Change
	for k := range 40 {
		changes = append(changes, capacitypkg.Change{T: float64(k * 150), Site: "infer", Available: -1, Inference: r.IntN(5)})
	}
	return jobs, changes
}

// Loaning runs jobs under spec on LoanCluster, SqrtModel (restarts of 5 s), with the inference
// changes, checking every plan (checkedPolicy), that every job finishes
// and that some round ran a job on inference GPUs.
func (f Builder) Loaning(t *testing.T, spec string, seed uint64, ctx contract.Context, changes []capacitypkg.Change, jobs []*job.Job) *report.Run {
	t.Helper()
	c := &checkedPolicy{Policy: f.Parse(t, spec, ctx), t: t}
	pack, err := place.Lookup("pack")
	if err != nil {
		t.Fatal(err)
	}
	run, err := sim.Run(sim.Config{Cluster: LoanCluster(t), Model: SqrtModel{Restart: 5}, Policy: c,
		Placer: pack, Round: 60, OnEvents: true, Sites: &sim.Sites{Changes: changes}}, jobs)
	if err != nil {
		t.Fatalf("%s seed %d: %v", spec, seed, err)
	}
	for _, j := range run.Jobs {
		if j.Finish < 0 {
			t.Errorf("%s seed %d: job %s never finished", spec, seed, j.ID)
		}
	}
	if c.lent == 0 {
		t.Errorf("%s seed %d: no round ran a job on inference GPUs", spec, seed)
	}
	return run
}

// Lookup finds the Info of the policy name among a family's policies.
func Lookup(policies func(register func(contract.Info)), name string) (contract.Info, bool) {
	var out contract.Info
	found := false
	policies(func(i contract.Info) {
		if i.Name == name && !found {
			out, found = i, true
		}
	})
	return out, found
}

// Unfinished lists the jobs of r that never finished, in r's order.
func Unfinished(r *report.Run) []string {
	var out []string
	for _, rec := range r.Jobs {
		if rec.Finish < 0 {
			out = append(out, rec.ID)
		}
	}
	return out
}
