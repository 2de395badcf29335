package harvest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
)

// fam builds this family's policies in its tests.
var fam = policytest.Family(Policies)

// loanSnap is policytest.LoanSnapshot.
var loanSnap = policytest.LoanSnapshot

func sitePlan(p engine.Plan) []string {
	var out []string
	for _, a := range p.Run {
		out = append(out, fmt.Sprintf("%s:%d@%s", a.Job, a.GPUs, a.Site))
	}
	return out
}

// TestDeepBootPlans: ATS-T then ATS-I by hand. Speedup(n) = sqrt(n); every
// job is new (age 600 s, no restarts: factor 600/610 for all, so it does
// not change the choice).
func TestDeepBootPlans(t *testing.T) {
	cases := []struct {
		name string
		spec string
		down int
		jobs int
		want []string
	}{
		// Two jobs, 4 training GPUs: 2+2 (2 sqrt 2 = 2.83) beats 3+1
		// (2.73) and 4+0 (2). The idle inference node then has no job.
		{"two jobs split the training node", "deepboot", 0, 2, []string{"j0:2@train", "j1:2@train"}},
		// Four jobs: one GPU each on training (4) beats any doubling.
		// Loaning has nothing to add.
		{"four jobs one each", "deepboot", 0, 4, []string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train"}},
		// Six jobs: four on training, the two left share the 4 idle
		// inference GPUs, 2 + 2.
		{"ATS-I lends idle inference GPUs", "deepboot", 0, 6,
			[]string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train", "j4:2@infer", "j5:2@infer"}},
		// Inference holds 3 of its 4 GPUs: one left to lend.
		{"only what inference leaves", "deepboot", 3, 6,
			[]string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train", "j4:1@infer"}},
		{"loan=false keeps to training", "deepboot:loan=false", 0, 6, []string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := fam.Parse(t, tc.spec, contract.Context{})
			works := make([]float64, tc.jobs)
			for i := range works {
				works[i] = 1000
			}
			got := sitePlan(p.Schedule(loanSnap(t, 600, tc.down, works...)))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("plan %v, want %v", got, tc.want)
			}
		})
	}
}

// TestDeepBootProtect: an inference GPU released at t=100 is protected for
// 30 s (first release, no reuse) and lent from 130 on; taken back while
// protected, it is protected 45 s the next time (one reuse).
func TestDeepBootProtect(t *testing.T) {
	p := fam.Parse(t, "deepboot", contract.Context{}).(*DeepBoot)
	lent := func(now float64, down int) int {
		s := loanSnap(t, now, down, 1000, 1000, 1000, 1000, 1000, 1000, 1000, 1000)
		n := 0
		for _, a := range p.Schedule(s).Run {
			if a.Site == "infer" {
				n += a.GPUs
			}
		}
		return n
	}
	steps := []struct {
		now  float64
		down int
		want int
		why  string
	}{
		{0, 4, 0, "inference holds every GPU"},
		{100, 3, 0, "GPU 7 released: protected until 130"},
		{129, 3, 0, "still protected"},
		{130, 3, 1, "sleeping: lent"},
		{200, 4, 0, "inference takes it back (it was lent: no reuse)"},
		{300, 3, 0, "released again: protected until 330"},
		{310, 4, 0, "inference reuses it while protected: reuse 1"},
		{400, 3, 0, "released: protected 30 + 15 = 45 s, until 445"},
		{444, 3, 0, "still protected"},
		{445, 3, 1, "lent"},
	}
	for _, st := range steps {
		if got := lent(st.now, st.down); got != st.want {
			t.Fatalf("t=%v (%s): %d inference GPUs lent, want %d", st.now, st.why, got, st.want)
		}
	}
}

// TestDeepBootClusterChanges: DeepBoot planning on a cluster larger than
// the last round's, or than a restored state's, starts its
// protect timers afresh. tide kube rebuilds its engine on a new cluster
// when nodes come and go and keeps the policy: the timers, indexed by the
// old cluster's GPUs, panicked the round (random operations in kube,
// seeds 60, 207, 270, 459).
func TestDeepBootClusterChanges(t *testing.T) {
	small, err := cluster.New([]cluster.Node{
		{Name: "train-0", Site: "train", GPUType: "a100", GPUs: 2},
		{Name: "infer-0", Site: "infer", SiteKind: cluster.SiteInference, GPUType: "a100", GPUs: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := fam.Parse(t, "deepboot", contract.Context{}).(*DeepBoot)
	s := loanSnap(t, 0, 0, 1000, 1000)
	big := s.Cluster
	s.Cluster = small
	p.Schedule(s)
	state, err := p.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	s.Cluster, s.Now = big, 10 // 8 GPUs where there were 4
	if plan := p.Schedule(s); len(plan.Run) == 0 {
		t.Errorf("nothing planned on the larger cluster")
	}
	s.Now = 20
	q := fam.Parse(t, "deepboot", contract.Context{}).(*DeepBoot)
	if err := q.LoadState(state); err != nil {
		t.Fatal(err)
	}
	if plan := q.Schedule(s); len(plan.Run) == 0 {
		t.Errorf("nothing planned after restoring another cluster's state")
	}
}

// TestArylPlans: base workers shortest first, extra workers by JCT
// reduction, loaned whole servers only.
func TestArylPlans(t *testing.T) {
	cases := []struct {
		name  string
		spec  string
		down  int
		works []float64
		want  []string
	}{
		// Two jobs on 4 training GPUs, each at least 1: the extra 2 GPUs go
		// where they save most. Job 0 (1000 s) on n GPUs takes 1000/sqrt(n):
		// 2 -> 293 s saved, 3 -> 423; job 1 (400 s): 2 -> 117, 3 -> 169.
		// Best split of 2 extra: j0 +2 (423) vs j0 +1, j1 +1 (410) vs j1 +2 (169).
		{"extra workers by JCT reduction", "aryl", 0, []float64{1000, 400}, []string{"j0:3@train", "j1:1@train"}},
		// Six jobs: four shortest on training (one each), the two longest on
		// the idle inference server, which then splits 2 + 2.
		{"loaned server", "aryl", 0, []float64{100, 200, 300, 400, 500, 600},
			[]string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train", "j4:2@infer", "j5:2@infer"}},
		// Inference uses one GPU of the server: not wholly idle, not lent.
		{"busy server not lent", "aryl", 1, []float64{100, 200, 300, 400, 500, 600},
			[]string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train"}},
		// Not elastic: each job runs on the one GPU it asked for, the spare
		// training GPUs and the loaned server's rest stay idle.
		{"elastic=false", "aryl:elastic=false", 0, []float64{1000, 400}, []string{"j0:1@train", "j1:1@train"}},
		{"elastic=false on a loaned server", "aryl:elastic=false", 0, []float64{100, 200, 300, 400, 500, 600},
			[]string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train", "j4:1@infer", "j5:1@infer"}},
		{"whole=false lends idle GPUs", "aryl:whole=false", 1, []float64{100, 200, 300, 400, 500, 600},
			[]string{"j0:1@train", "j1:1@train", "j2:1@train", "j3:1@train", "j4:1@infer", "j5:2@infer"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := fam.Parse(t, tc.spec, contract.Context{})
			got := sitePlan(p.Schedule(loanSnap(t, 600, tc.down, tc.works...)))
			slices.Sort(got)
			if !slices.Equal(got, tc.want) {
				t.Errorf("plan %v, want %v", got, tc.want)
			}
		})
	}
}

// TestLoanProperties: DeepBoot and Aryl on random workloads against an
// inference demand that rises and falls: no plan exceeds what is up, no
// job keeps a GPU inference took back, every job finishes, and training
// did borrow inference GPUs.
func TestLoanProperties(t *testing.T) {
	for _, spec := range []string{"deepboot", "aryl", "aryl:whole=false"} {
		for seed := range uint64(4) {
			jobs, changes := policytest.RandomLoanLoad(rand.New(rand.NewPCG(seed, 3)), 25, 4)
			fam.Loaning(t, spec, seed, contract.Context{}, changes, jobs)
		}
	}
}

// TestDeepBootGoodput: a job that has reported a fitted goodput model is
// valued by its goodput speedup, not by the throughput model. With the
// snapshot's model every job has speedup sqrt(n), so on 4 training GPUs
// two jobs split 2+2. Job j0 reports a model whose statistical efficiency
// falls steeply with the batch (gradient noise tiny next to its gradient
// norm), so more GPUs add throughput but almost no goodput; j1 reports a
// model that scales (huge noise). ATS-T then gives j1 more GPUs than j0.
func TestDeepBootGoodput(t *testing.T) {
	s := loanSnap(t, 600, 4, 1000, 1000) // inference holds its whole node: no loans
	hints := func(gradVar float64) *goodput.Hints {
		return &goodput.Hints{
			Perf:        goodput.Params{AlphaC: 0.05, BetaC: 0.002, AlphaN: 1e-3, BetaN: 1e-4, AlphaR: 1e-3, BetaR: 1e-4, Gamma: 1.5},
			Grad:        goodput.Grad{Sqr: 1, Var: gradVar},
			Limits:      goodput.Limits{InitBatch: 64, MinLocal: 16, MaxLocal: 256, MaxBatch: 4096},
			MaxReplicas: 4, Fitted: true,
		}
	}
	s.Jobs[0].Hints = hints(1e-3)
	s.Jobs[1].Hints = hints(1e5)
	for _, i := range []int{0, 1} {
		f := s.Jobs[i].Hints.Function()
		t.Logf("j%d goodput speedup on 1..4 GPUs: %.2f %.2f %.2f %.2f", i, f.Speedup(1, 1), f.Speedup(1, 2), f.Speedup(1, 3), f.Speedup(1, 4))
	}
	got := map[string]int{}
	for _, a := range fam.Parse(t, "deepboot", contract.Context{}).Schedule(s).Run {
		got[a.Job] = a.GPUs
	}
	if got["j1"] <= got["j0"] || got["j0"] < 1 {
		t.Errorf("plan %v: want j1 (scales in goodput) on more GPUs than j0, j0 still running", got)
	}
}

// TestPoolsPerGPUType: on sites of two GPU types, DeepBoot and Aryl (with
// and without loans) never ask a site for more GPUs of a type than it has,
// and use both types. A site was one pool of its first node's type
// counting every GPU: on 8x4 T4 + 8x4 V100, Aryl asked for 64 T4 GPUs.
func TestPoolsPerGPUType(t *testing.T) {
	c, err := cluster.New([]cluster.Node{
		{Name: "train-0", Site: "train", GPUType: "t4", GPUs: 4},
		{Name: "train-1", Site: "train", GPUType: "v100", GPUs: 4},
		{Name: "infer-0", Site: "infer", SiteKind: cluster.SiteInference, GPUType: "t4", GPUs: 4},
		{Name: "infer-1", Site: "infer", SiteKind: cluster.SiteInference, GPUType: "v100", GPUs: 4},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, spec := range []string{"aryl", "aryl:loan=false", "deepboot", "deepboot:loan=false"} {
		t.Run(spec, func(t *testing.T) {
			s := &engine.Snapshot{Now: 600, Cluster: c, Model: policytest.SqrtModel{}, GPUsPerNode: map[string]int{"t4": 4, "v100": 4}}
			for i := range 16 {
				j := enginetest.Job(fmt.Sprintf("j%d", i)).At(0).Elastic(1, 1, 4).Seconds(3600 * float64(i+1)).Obj()
				s.Jobs = append(s.Jobs, &engine.Status{Job: j, State: job.Pending, Work: j.Work, FirstStart: -1, LastStart: -1, Finish: -1})
			}
			plan := fam.Parse(t, spec, contract.Context{}).Schedule(s)
			asked := map[string]int{}
			for _, a := range plan.Run {
				asked[a.Site+"/"+a.GPUType] += a.GPUs
			}
			for key, n := range asked {
				site, typ, _ := strings.Cut(key, "/")
				if have := s.Available(site, typ); n > have {
					t.Errorf("plan asks %s for %d %s GPUs, it has %d (plan %v)", site, n, typ, have, sitePlan(plan))
				}
			}
			if asked["train/t4"] == 0 || asked["train/v100"] == 0 {
				t.Errorf("training GPUs asked by type %v: want both types used", asked)
			}
			if loans := !strings.Contains(spec, "loan=false"); loans && (asked["infer/t4"] == 0 || asked["infer/v100"] == 0) {
				t.Errorf("inference GPUs asked by type %v: want both types lent", asked)
			}
		})
	}
}
