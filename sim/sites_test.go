package sim

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/report"
)

// multiSite builds a cluster of cloud nodes x 4 a100, edge servers of one
// v100 each and inference nodes x 4 a100.
func multiSite(_ testing.TB, cloud, edge, infer int) *cluster.Cluster {
	return enginetest.MultiSite(cloud, 4, edge, infer)
}

// watcher wraps a policy and checks, at every round, the invariants of a
// multi-site run: no running job holds a GPU that is down, spans sites, or
// uses two edge servers.
type watcher struct {
	engine.Policy
	t      testing.TB
	rounds int
}

func (w *watcher) Schedule(s *engine.Snapshot) engine.Plan {
	w.rounds++
	c := s.Cluster
	for _, st := range s.Jobs {
		if len(st.GPUs) == 0 {
			continue
		}
		first := c.NodeOf(st.GPUs[0])
		for _, g := range st.GPUs {
			n := c.NodeOf(g)
			if !s.Up(g) {
				w.t.Errorf("t=%v: job %s holds GPU %d, which is down", s.Now, st.Job.ID, g)
			}
			if n.Site != first.Site {
				w.t.Errorf("t=%v: job %s spans sites %s and %s", s.Now, st.Job.ID, first.Site, n.Site)
			}
			if n.SiteKind == cluster.SiteEdge && n.ID != first.ID {
				w.t.Errorf("t=%v: job %s uses two edge servers", s.Now, st.Job.ID)
			}
		}
	}
	return w.Policy.Schedule(s)
}

func run(t *testing.T, c *cluster.Cluster, pol engine.Policy, sites *Sites, jobs []*job.Job) *report.Run {
	t.Helper()
	w := &watcher{Policy: pol, t: t}
	r, err := Run(Config{Cluster: c, Model: perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Restart: 10, Resize: 5}}},
		Policy: w, Placer: place.Pack{}, OnEvents: true, Sites: sites}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// sitePolicy runs every waiting job on its requested count at a fixed site.
type sitePolicy struct {
	site func(st *engine.Status, now float64) string
}

func (sitePolicy) Name() string { return "site" }
func (p sitePolicy) Schedule(s *engine.Snapshot) engine.Plan {
	var plan engine.Plan
	for _, st := range s.Jobs {
		plan.Run = append(plan.Run, engine.Assignment{Job: st.Job.ID, GPUs: st.Job.GPUs, Site: p.site(st, s.Now)})
	}
	return plan
}

func TestSitesMovesAndReclaims(t *testing.T) {
	c := multiSite(t, 1, 2, 1)
	mig := Migration{RemoteGiBps: 0.5, MemoryGiBps: 10, LocalGiBps: 2, Size: func(*job.Job) float64 { return 4 }}
	tests := []struct {
		name     string
		changes  []capacity.Change
		site     func(st *engine.Status, now float64) string
		jobs     []*job.Job
		cross    int
		reclaims int
		waits    int
		waitSec  float64
		finish   float64
	}{
		{
			name: "edge then cloud: one remote move",
			site: func(st *engine.Status, now float64) string {
				return map[bool]string{true: "edge", false: "cloud"}[now < 100]
			},
			jobs:   []*job.Job{enginetest.Job("a").GPUs(1).Seconds(1000).Obj()},
			cross:  1,
			finish: 1000 + 2*4/0.5 + 5, // the move through remote storage and the resize cost
		},
		{
			name: "edge server taken back: reclaimed, restarted on cloud",
			changes: []capacity.Change{
				{T: 0, Site: "edge", Available: 2, Inference: -1},
				{T: 300, Site: "edge", Available: 0, Inference: -1},
			},
			site: func(st *engine.Status, now float64) string {
				return map[bool]string{true: "edge", false: "cloud"}[now < 300]
			},
			jobs:     []*job.Job{enginetest.Job("a").GPUs(1).Seconds(1000).Obj()},
			cross:    1,
			reclaims: 1,
			waits:    1,
			waitSec:  4.0 / 2,
			finish:   1000 + 2*4/0.5 + 10,
		},
		{
			name: "inference needs 6 GPUs of 4+4: idle GPUs go first, then the job",
			changes: []capacity.Change{
				{T: 200, Site: "infer", Available: -1, Inference: 2},
				{T: 400, Site: "infer", Available: -1, Inference: 4},
				{T: 500, Site: "infer", Available: -1, Inference: 0},
			},
			site: func(st *engine.Status, now float64) string { return "infer" },
			jobs: []*job.Job{enginetest.Job("a").GPUs(2).Seconds(1000).Obj()},
			// At 200 the two idle GPUs go; at 400 the job's GPUs, so it waits
			// until 500 and restarts (10 s).
			reclaims: 1,
			waits:    1,
			waitSec:  2,
			finish:   1000 + 100 + 10,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := run(t, c, sitePolicy{site: tc.site}, &Sites{Changes: tc.changes, Migration: mig}, tc.jobs)
			rec := r.Jobs[0]
			if rec.CrossSiteMoves != tc.cross || rec.Reclaims != tc.reclaims || r.InferenceWaits != tc.waits {
				t.Errorf("cross %d reclaims %d waits %d, want %d %d %d", rec.CrossSiteMoves, rec.Reclaims, r.InferenceWaits, tc.cross, tc.reclaims, tc.waits)
			}
			if math.Abs(r.InferenceWaitSeconds-tc.waitSec) > 1e-9 {
				t.Errorf("inference waited %v s, want %v", r.InferenceWaitSeconds, tc.waitSec)
			}
			if math.Abs(rec.Finish-tc.finish) > 1e-6 {
				t.Errorf("finished at %v, want %v", rec.Finish, tc.finish)
			}
		})
	}
}

func TestSitesIntraSiteMove(t *testing.T) {
	c := multiSite(t, 2, 0, 0)
	j := enginetest.Job("a").Elastic(1, 2, 4).Seconds(1000).Obj()
	// Two GPUs until t=100, then four.
	pol := resizer{}
	mig := Migration{MemoryGiBps: 2, Size: func(*job.Job) float64 { return 4 }}
	r := run(t, c, pol, &Sites{Migration: mig}, []*job.Job{j})
	rec := r.Jobs[0]
	if rec.IntraSiteMoves != 1 || rec.CrossSiteMoves != 0 {
		t.Fatalf("moves intra %d cross %d, want 1 0", rec.IntraSiteMoves, rec.CrossSiteMoves)
	}
	// Until the round at 120 s at speed 1, then 5 (resize) + 2 (memory) s,
	// then 880 s of work at speed 2.
	if want := 120 + 7 + 440.0; math.Abs(rec.Finish-want) > 1e-6 {
		t.Fatalf("finish %v, want %v", rec.Finish, want)
	}
}

type resizer struct{}

func (resizer) Name() string { return "resizer" }
func (resizer) Schedule(s *engine.Snapshot) engine.Plan {
	n := 2
	if s.Now >= 100 {
		n = 4
	}
	return engine.Plan{Run: []engine.Assignment{{Job: s.Jobs[0].Job.ID, GPUs: n}}}
}

// TestSitesProperties replays random jobs on random multi-site clusters
// whose capacity changes at random, under several policies, and checks that
// no job ever holds a down GPU or spans sites (the watcher), that every job
// ends, and that work is conserved across moves and reclaims: a finished
// rigid job made progress for exactly its work.
func TestSitesProperties(t *testing.T) {
	for seed := uint64(1); seed <= 12; seed++ {
		rng := rand.New(rand.NewPCG(seed, 7))
		c := multiSite(t, 1+rng.IntN(3), rng.IntN(5), rng.IntN(3))
		var changes []capacity.Change
		tm := 0.0
		for k := 0; k < 30; k++ {
			tm += rng.Float64() * 400
			s := c.Sites()[rng.IntN(len(c.Sites()))]
			ch := capacity.Change{T: tm, Site: s.Name, Available: -1, Inference: -1}
			if s.Kind == cluster.SiteInference {
				ch.Inference = rng.IntN(s.GPUs + 1)
			} else {
				ch.Available = rng.IntN(len(s.Nodes) + 1)
			}
			changes = append(changes, ch)
		}
		// Everything comes back in the end, or jobs could wait forever.
		for _, s := range c.Sites() {
			ch := capacity.Change{T: tm + 1, Site: s.Name, Available: len(s.Nodes), Inference: -1}
			if s.Kind == cluster.SiteInference {
				ch.Available, ch.Inference = -1, 0
			}
			changes = append(changes, ch)
		}
		var jobs []*job.Job
		for i := 0; i < 25; i++ {
			jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%02d", i)).At(float64(i)*150*rng.Float64()).
				GPUs(1+rng.IntN(4)).Seconds(100+rng.Float64()*2000).Deadline(3000+rng.Float64()*5000).Obj())
		}
		sortBySubmit(jobs)
		for _, name := range []string{"fifo:backfill=true", "edf", "srtf"} {
			t.Run(fmt.Sprintf("seed%d/%s", seed, name), func(t *testing.T) {
				pol, err := policy.Parse(name, policy.Context{})
				if err != nil {
					t.Fatal(err)
				}
				r := run(t, c, pol, &Sites{Changes: changes}, jobs)
				for i, rec := range r.Jobs {
					if rec.State != string(job.Finished) {
						t.Fatalf("job %s ended %s", rec.ID, rec.State)
					}
					if got := rec.UsefulGPUSeconds / float64(rec.GPUs); math.Abs(got-jobs[i].Work) > 1e-6*jobs[i].Work {
						t.Errorf("job %s made %v s of progress, its work is %v", rec.ID, got, jobs[i].Work)
					}
				}
				var alloc float64
				for _, su := range r.Sites {
					if su.AllocGPUSeconds > su.UpGPUSeconds+1e-6 {
						t.Errorf("site %s: %v GPU-s allocated, only %v up", su.Name, su.AllocGPUSeconds, su.UpGPUSeconds)
					}
					alloc += su.AllocGPUSeconds
				}
				var held float64
				for _, rec := range r.Jobs {
					held += rec.GPUSeconds
				}
				if math.Abs(alloc-held) > 1e-6*held {
					t.Errorf("sites hold %v GPU-s, jobs %v", alloc, held)
				}
			})
		}
	}
}

func sortBySubmit(jobs []*job.Job) {
	for i := 1; i < len(jobs); i++ {
		for k := i; k > 0 && jobs[k].Submit < jobs[k-1].Submit; k-- {
			jobs[k], jobs[k-1] = jobs[k-1], jobs[k]
		}
	}
}

func TestSitesFaultsLoseWorkSinceCheckpoint(t *testing.T) {
	c := multiSite(t, 1, 0, 0)
	// One fault of the only node: find its time from the same stream.
	f := capacity.Faults{Site: "cloud", MTBF: 2000, MTTR: 100, Seed: 3}
	if err := f.Validate(); err != nil {
		t.Fatal(err)
	}
	fail, _ := f.Node(0)()
	j := enginetest.Job("a").GPUs(4).Seconds(fail + 500).Obj()
	r := run(t, c, sitePolicy{site: func(*engine.Status, float64) string { return "" }}, &Sites{Faults: []capacity.Faults{f}, CheckpointInterval: 300}, []*job.Job{j})
	rec := r.Jobs[0]
	if rec.Faults < 1 {
		t.Fatalf("no fault hit the job (fault at %v)", fail)
	}
	lost := math.Mod(fail, 300)
	// Progress-making seconds exceed the work by what was lost (first fault).
	if got := rec.UsefulGPUSeconds/4 - j.Work; rec.Faults == 1 && math.Abs(got-lost) > 1e-6 {
		t.Errorf("lost %v s of progress to the fault at %v, want %v", got, fail, lost)
	}
}

func TestSitesErrors(t *testing.T) {
	c := multiSite(t, 1, 2, 1)
	jobs := []*job.Job{enginetest.Job("a").GPUs(1).Seconds(10).Obj()}
	for _, tc := range []struct {
		sites Sites
		want  string
	}{
		{Sites{Changes: []capacity.Change{{Site: "mars", Available: 1, Inference: -1, Source: "f.csv", Line: 3}}}, `availability f.csv line 3 field "site": no site "mars"`},
		{Sites{Changes: []capacity.Change{{Site: "edge", Available: 3, Inference: -1, Source: "f.csv", Line: 2}}}, `availability f.csv line 2 field "available": 3 servers, site edge has 2`},
		{Sites{Changes: []capacity.Change{{Site: "infer", Available: -1, Inference: 5, Source: "f.csv", Line: 2}}}, `field "inference": 5 GPUs, site infer has 4`},
		{Sites{Diurnal: []capacity.Diurnal{{Site: "edge", Measure: "servers"}}}, `diurnal edge: measure: "servers": want available or inference`},
		{Sites{Faults: []capacity.Faults{{Site: "edge"}}}, `mtbf`},
		{Sites{Migration: Migration{RemoteGiBps: -1}}, `remote_gibps`},
	} {
		_, err := Run(Config{Cluster: c, Model: perf.Duration{}, Policy: &classic.FIFO{}, Placer: place.Pack{}, Sites: &tc.sites}, jobs)
		if err == nil || !contains(err.Error(), tc.want) {
			t.Errorf("error %v, want it to contain %q", err, tc.want)
		}
	}
}

func contains(s, sub string) bool {
	for i := 0; i+len(sub) <= len(s); i++ {
		if s[i:i+len(sub)] == sub {
			return true
		}
	}
	return false
}

func TestSitesDiurnalDeterministic(t *testing.T) {
	c := multiSite(t, 1, 4, 0)
	d := capacity.Diurnal{Site: "edge", Measure: "available", Period: 7200, Trough: 0, Peak: 4, Noise: 0.5, Step: 300, Seed: 9}
	var jobs []*job.Job
	for i := 0; i < 10; i++ {
		jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%d", i)).At(float64(i*200)).GPUs(1).Seconds(3000).Obj())
	}
	a := run(t, c, &classic.FIFO{Backfill: true}, &Sites{Diurnal: []capacity.Diurnal{d}}, jobs)
	b := run(t, c, &classic.FIFO{Backfill: true}, &Sites{Diurnal: []capacity.Diurnal{d}}, jobs)
	if fmt.Sprint(a.Jobs) != fmt.Sprint(b.Jobs) || fmt.Sprint(a.Sites) != fmt.Sprint(b.Sites) {
		t.Fatal("two runs with the same seed differ")
	}
	if a.Sites[1].UpGPUSeconds <= 0 || a.Sites[1].UpGPUSeconds >= 4*a.Jobs[9].Finish {
		t.Errorf("edge up %v GPU-s: the wave should keep it between empty and full", a.Sites[1].UpGPUSeconds)
	}
}
