package flow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// flowJob is an elastic job of work seconds on one GPU (linear scaling
// under the duration model) with an absolute deadline (0: none).
// fam builds this family's policies in its tests, and EDF (classic) that
// ElasticFlow is compared with.
var fam = policytest.Family(Policies, classic.Policies)

func flowJob(id string, at, work, deadline float64) *job.Job {
	return enginetest.Job(id).At(at).Elastic(1, 1, 64).Seconds(work).Deadline(deadline).Obj()
}

func flowCluster(_ *testing.T, cloudNodes, edge int) *cluster.Cluster {
	return enginetest.MultiSite(cloudNodes, 8, edge, 0)
}

func flowRun(t *testing.T, spec string, c *cluster.Cluster, m perf.Model, jobs []*job.Job) *report.Run {
	t.Helper()
	p := fam.Parse(t, spec, contract.Context{})
	r, err := sim.Run(sim.Config{Cluster: c, Model: m, Policy: p, Placer: place.Pack{}, OnEvents: true, Sites: &sim.Sites{}}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func states(r *report.Run) string {
	s := ""
	for _, j := range r.Jobs {
		met := "miss"
		if j.Finish >= 0 && (j.Deadline == 0 || j.Finish <= j.Deadline) {
			met = "met"
		}
		if j.State == string(job.Declined) {
			met = "declined"
		}
		s += fmt.Sprintf("%s:%s ", j.ID, met)
	}
	return s
}

func TestElasticFlowAdmission(t *testing.T) {
	free := perf.Duration{}
	tests := []struct {
		name string
		spec string
		jobs []*job.Job
		want string
	}{
		{
			// 8 GPUs. a and b each need 4 GPUs for 300 s; c, arriving at the
			// same time with the same deadline, cannot fit: declined.
			name: "third job declined",
			jobs: []*job.Job{flowJob("a", 0, 1200, 300), flowJob("b", 0, 1200, 300), flowJob("c", 0, 1200, 300)},
			want: "a:met b:met c:declined ",
		},
		{
			name: "impossible deadline declined, best effort kept",
			jobs: []*job.Job{flowJob("a", 0, 100000, 100), flowJob("b", 0, 500, 0)},
			want: "a:declined b:met ",
		},
		{
			// a needs all 8 GPUs until 100 (reserved to the 120 s slot); b
			// fits after it: 800 s of work on 8 GPUs from 120 ends at 220.
			name: "later deadline planned after the earlier job",
			jobs: []*job.Job{flowJob("a", 0, 800, 100), flowJob("b", 0, 800, 300)},
			want: "a:met b:met ",
		},
		{
			// a and b hold all 8 GPUs until 400 s (slot 420); c, arriving
			// later with a later deadline, would end at 545 s after them.
			name: "a newcomer that cannot fit after admitted jobs",
			jobs: []*job.Job{flowJob("a", 0, 1600, 400), flowJob("b", 0, 1600, 400), flowJob("c", 10, 1000, 500)},
			want: "a:met b:met c:declined ",
		},
		{
			// Without admission control c runs and misses.
			name: "admit=false", spec: "elasticflow:admit=false",
			jobs: []*job.Job{flowJob("a", 0, 1600, 400), flowJob("b", 0, 1600, 400), flowJob("c", 10, 1000, 500)},
			want: "a:met b:met c:miss ",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spec := tc.spec
			if spec == "" {
				spec = "elasticflow"
			}
			r := flowRun(t, spec, flowCluster(t, 1, 0), free, tc.jobs)
			if got := states(r); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

// TestElasticFlowBeatsEDF: on an overloaded cluster, admission control and
// elastic shares meet more deadlines than EDF on the requested counts.
func TestElasticFlowBeatsEDF(t *testing.T) {
	var jobs []*job.Job
	for i := 0; i < 40; i++ {
		at := float64(i * 50)
		jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).Elastic(1, 2, 16).Seconds(600+float64(i%5)*300).Deadline(at+900+float64(i%3)*600).Obj())
	}
	c := flowCluster(t, 1, 0)
	met := func(r *report.Run) float64 { return *report.Summarize(r).DeadlineMetFrac }
	ef := flowRun(t, "elasticflow", c, perf.Duration{}, jobs)
	edf := flowRun(t, "edf", c, perf.Duration{}, jobs)
	if met(ef) <= met(edf) {
		t.Errorf("elasticflow met %.2f, edf %.2f", met(ef), met(edf))
	}
}

// slowEdge runs v100 at half the a100 speed.
func slowEdge() perf.Model {
	return perf.Scaled{Model: perf.Duration{}, Type: "v100", Ref: "a100", Lambda: 0.5}
}

func TestEdgeFlowOffloads(t *testing.T) {
	// One cloud node of 8 GPUs busy with a and b until 300 s; c (100 s of
	// work) would end at 312.5 s in the cloud after them, past its 310 s
	// deadline, but meets it on an edge server at half speed (200 s).
	jobs := []*job.Job{flowJob("a", 0, 1200, 300), flowJob("b", 0, 1200, 300), flowJob("c", 0, 100, 310)}
	c := flowCluster(t, 1, 2)
	ef := flowRun(t, "elasticflow", c, slowEdge(), jobs)
	edge := flowRun(t, "edgeflow", c, slowEdge(), jobs)
	if got := states(ef); got != "a:met b:met c:declined " {
		t.Errorf("elasticflow: %s", got)
	}
	if got := states(edge); got != "a:met b:met c:met " {
		t.Errorf("edgeflow: %s", got)
	}
	if edge.Jobs[2].EdgeGPUSeconds <= 0 {
		t.Errorf("c never ran on the edge")
	}
	if ef.Jobs[0].EdgeGPUSeconds+ef.Jobs[1].EdgeGPUSeconds > 0 {
		t.Errorf("elasticflow used the edge")
	}
}

// TestEdgeFlowAdmitsOnEdge: a newcomer the cloud could take only by making
// an admitted job miss goes to an idle edge server instead of being declined.
func TestEdgeFlowAdmitsOnEdge(t *testing.T) {
	// a needs all 8 cloud GPUs until 300 s for its 310 s deadline. c arrives
	// at 10 s with an earlier deadline (250 s): in the cloud it would come
	// first and push a past its deadline; on an edge server at half speed
	// its 100 s of work end at 210 s.
	jobs := []*job.Job{flowJob("a", 0, 2400, 310), flowJob("c", 10, 100, 250)}
	c := flowCluster(t, 1, 1)
	if got := states(flowRun(t, "elasticflow", c, slowEdge(), jobs)); got != "a:met c:declined " {
		t.Errorf("elasticflow: %s", got)
	}
	r := flowRun(t, "edgeflow", c, slowEdge(), jobs)
	if got := states(r); got != "a:met c:met " {
		t.Errorf("edgeflow: %s", got)
	}
	if r.Jobs[1].EdgeGPUSeconds <= 0 || r.Jobs[0].EdgeGPUSeconds > 0 {
		t.Errorf("edge GPU-seconds a %v c %v: want only c on the edge", r.Jobs[0].EdgeGPUSeconds, r.Jobs[1].EdgeGPUSeconds)
	}
}

// TestFlowProperties: random loads under both policies never break the
// engine's rules (the run fails if they do), every job ends, jobs ElasticFlow
// declines never ran, and EdgeFlow meets at least as many deadlines as
// ElasticFlow once edge servers exist.
func TestFlowProperties(t *testing.T) {
	worse := 0
	for seed := 0; seed < 8; seed++ {
		var jobs []*job.Job
		at := 0.0
		for i := 0; i < 30; i++ {
			at += float64((seed*7+i*13)%97) * 3
			work := 200 + float64((seed*31+i*17)%23)*150
			jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).Elastic(1, 1+(i%4), 32).Seconds(work).
				Deadline(at+work/float64(1+i%3)+float64((i*11+seed)%9)*100).Obj())
		}
		c := flowCluster(t, 2, 4)
		var fr [2]float64
		for k, spec := range []string{"elasticflow", "edgeflow"} {
			r := flowRun(t, spec, c, slowEdge(), jobs)
			for _, j := range r.Jobs {
				if j.State == string(job.Declined) && (j.Start >= 0 || j.GPUSeconds > 0) {
					t.Errorf("seed %d %s: declined job %s ran", seed, spec, j.ID)
				}
				if j.State != string(job.Declined) && j.State != string(job.Finished) {
					t.Errorf("seed %d %s: job %s ended %s", seed, spec, j.ID, j.State)
				}
			}
			fr[k] = *report.Summarize(r).DeadlineMetFrac
		}
		if fr[1] < fr[0]-1e-9 {
			worse++
			t.Logf("seed %d: edgeflow %.3f < elasticflow %.3f", seed, fr[1], fr[0])
		}
	}
	if worse > 1 {
		t.Errorf("edgeflow met fewer deadlines than elasticflow on %d of 8 loads", worse)
	}
}

var _ = math.Inf
var _ engine.Policy = (*Flow)(nil)

// TestFlowCountsResizes: a share's predicted end keeps one resize of slack
// before the deadline, and a running job given another count pays the
// resize. Without them the plan shrank jobs to shares that met their
// deadline by seconds, and the resizes made them miss (docs/deadlines.md).
func TestFlowCountsResizes(t *testing.T) {
	f := &Flow{Slot: 60, Reserve: "early"}
	mk := func(rem, deadline float64, cur int) *fjob {
		return &fjob{st: &engine.Status{Job: &job.Job{}}, rem: rem, deadline: deadline, edge: -1, pin: -1,
			levels: []int{1, 2, 4, 8}, rates: []float64{1, 2, 4, 8}, cur: cur, margin: 10}
	}
	tests := []struct {
		name      string
		j         *fjob
		wantShare int
	}{
		// 4 GPUs end it at 480 s, but the resize from 8 ends it at 490 s
		// and the slack asks for 500 s <= 485: it keeps 8.
		{"running job keeps its count", mk(1920, 485, 8), 8},
		{"running job, room for the resize", mk(1920, 500, 8), 4},
		// 400 s on one GPU, with 10 s of slack asked for: 2 GPUs.
		{"waiting job keeps a resize of slack", mk(400, 405, 0), 2},
		{"waiting job with slack", mk(400, 410, 0), 1},
		// 10 s left on 4 GPUs, 15 s to its deadline: no count keeps 10 s
		// of slack, and any other count pays the resize: it keeps 4.
		{"running job near its deadline keeps its count", mk(40, 15, 4), 4},
	}
	for _, tc := range tests {
		f.pass(0, 8, []*fjob{tc.j})
		if tc.j.share != tc.wantShare || !tc.j.meets {
			t.Errorf("%s: share %d meets %v, want %d", tc.name, tc.j.share, tc.j.meets, tc.wantShare)
		}
	}
}

// TestFlowPrefixMatchesFullPasses: admission that plans each trial from
// the kept prefix (passPrefix) and tests the admitted set once per change
// decides as the one that planned every trial and the admitted set from
// scratch before each newcomer (fullPasses, the code before passPrefix):
// the same per-job records and timeline, bit for bit, for ElasticFlow and
// EdgeFlow under each reserve and offload knob, on random loads with
// priority classes, best-effort jobs and several arrivals at once.
func TestFlowPrefixMatchesFullPasses(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	type build func() (*Flow, error)
	policies := map[string]build{
		"elasticflow":              func() (*Flow, error) { return NewElasticFlow(DefaultFlow) },
		"elasticflow:reserve=late": func() (*Flow, error) { k := DefaultFlow; k.Reserve = "late"; return NewElasticFlow(k) },
		"elasticflow:spare=gputime": func() (*Flow, error) {
			k := DefaultFlow
			k.Spare = "gputime"
			return NewElasticFlow(k)
		},
		"edgeflow":                 func() (*Flow, error) { return NewEdgeFlow(DefaultEdge) },
		"edgeflow:offload=missing": func() (*Flow, error) { k := DefaultEdge; k.Offload = "missing"; return NewEdgeFlow(k) },
		"edgeflow:reserve=late":    func() (*Flow, error) { k := DefaultEdge; k.Reserve = "late"; return NewEdgeFlow(k) },
	}
	for seed := range 6 {
		jobs := randomFlowJobs(rng)
		c := flowCluster(t, 2, 3)
		for name, mk := range policies {
			var got [2]string
			for k, full := range []bool{false, true} {
				f, err := mk()
				if err != nil {
					t.Fatal(err)
				}
				f.fullPasses = full
				r, err := sim.Run(sim.Config{Cluster: c, Model: slowEdge(), Policy: f, Placer: place.Pack{}, OnEvents: true, Sites: &sim.Sites{}}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				got[k] = fmt.Sprintf("%+v\n%+v", r.Jobs, r.Timeline)
			}
			if got[0] != got[1] {
				t.Errorf("seed %d %s: the runs differ:\nprefix %s\nfull   %s", seed, name, got[0], got[1])
			}
		}
	}
}

// TestFlowForcedDecisions: the diagnostic knobs of the oracle of one
// decision (docs/tidal.md) change exactly the decision they name. On 8
// GPUs a, b and c each need 1,200 GPU-seconds by t=300: the test admits a
// and b and declines c.
func TestFlowForcedDecisions(t *testing.T) {
	jobs := func() []*job.Job {
		return []*job.Job{flowJob("a", 0, 1200, 300), flowJob("b", 0, 1200, 300), flowJob("c", 0, 1200, 300)}
	}
	tests := []struct {
		spec, want string
	}{
		{"elasticflow", "a:met b:met c:declined "},
		// Declining a at arrival leaves 4 GPUs each to b and c.
		{"elasticflow:force_decline=a", "a:declined b:met c:met "},
		// c waits untried until t=100, then is admitted: a and b hold
		// every GPU until 300, planned before it, so it misses.
		{"elasticflow:force_admit=c@100", "a:met b:met c:miss "},
		{"edgeflow:force_admit=c@100", "a:met b:met c:miss "},
	}
	for _, tc := range tests {
		t.Run(tc.spec, func(t *testing.T) {
			r := flowRun(t, tc.spec, flowCluster(t, 1, 0), perf.Duration{}, jobs())
			if got := states(r); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
	// Admitted at arrival whatever the test says: the three share the 8
	// GPUs and at least one misses, none is declined.
	r := flowRun(t, "elasticflow:force_admit=c@0", flowCluster(t, 1, 0), perf.Duration{}, jobs())
	if got := states(r); strings.Contains(got, "declined") || !strings.Contains(got, "miss") {
		t.Errorf("force_admit=c@0: got %s, want no job declined and one missing", got)
	}
	for _, bad := range []string{"c", "@5", "c@", "c@x", "c@-1", "c@+Inf"} {
		if _, err := fam("elasticflow:force_admit="+bad, contract.Context{}); err == nil || !strings.Contains(err.Error(), "force_admit") {
			t.Errorf("force_admit=%s: got error %v, want one naming force_admit", bad, err)
		}
	}
}

// randomFlowJobs draws 60 elastic jobs (1 to 4 GPUs at least, up to 16 at
// most), most of them with a deadline and a third of them with priority,
// arriving in bursts: the runs that compare two ways of computing one
// plan (TestFlowPrefixMatchesFullPasses, TestFlowSpareHeapMatchesScanRuns)
// use them.
func randomFlowJobs(rng *rand.Rand) []*job.Job {
	var jobs []*job.Job
	at := 0.0
	for i := range 60 {
		if rng.IntN(3) > 0 {
			at += float64(rng.IntN(200))
		}
		work := 300 + float64(rng.IntN(40))*120
		n := 1 + rng.IntN(4)
		b := enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).Elastic(1, n, n<<rng.IntN(4)).Seconds(work)
		if rng.IntN(6) > 0 {
			b.Deadline(at + work/float64(1+rng.IntN(8)) + float64(rng.IntN(20))*60)
		}
		j := b.Obj()
		j.Priority = rng.IntN(3) / 2
		jobs = append(jobs, j)
	}
	return jobs
}

// TestFlowNoPowerOfTwo: a job whose GPU range holds no power of two (a
// rigid 3 GPUs, as tide serve and tide kube take jobs) runs on its
// minimum under every flow policy. Its levels were the powers of two in
// its range, so it had none: never planned, it waited for ever on idle
// GPUs, with a deadline or without.
func TestFlowNoPowerOfTwo(t *testing.T) {
	rigid := func(id string, n int, deadline float64) *job.Job {
		j := enginetest.Job(id).GPUs(n).Seconds(600).Obj()
		j.Deadline = deadline
		return j
	}
	for _, spec := range []string{"elasticflow", "edgeflow", "tidal"} {
		recs := fam.Starts(t, spec, []*job.Job{rigid("three", 3, 0), rigid("due", 3, 4000), rigid("one", 1, 0)})
		for _, id := range []string{"three", "due", "one"} {
			if r := recs[id]; r.State != "finished" {
				t.Errorf("%s: job %s %s (start %v), want finished", spec, id, r.State, r.Start)
			}
		}
	}
}

// TestOddSize: a range without a power of two runs on its minimum; one
// with a power of two, or empty, has no odd size.
func TestOddSize(t *testing.T) {
	for _, tc := range []struct{ lo, hi, want int }{
		{3, 3, 3}, {5, 7, 5}, {3, 8, 0}, {1, 1, 0}, {4, 4, 0}, {3, 2, 0}, {0, 3, 0}, {9, 15, 9}, {6, 6, 6},
	} {
		if got := oddSize(tc.lo, tc.hi); got != tc.want {
			t.Errorf("oddSize(%d, %d) = %d, want %d", tc.lo, tc.hi, got, tc.want)
		}
	}
}
