package flow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	capacitypkg "github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// tidalWorld is policytest.LoanCluster with inference demand repeating the same day
// (0 GPUs at midnight, 4 at noon, steps every 600 s) for days days, and
// elastic jobs arriving all along. It returns the capacity changes, the
// realised capacity series of the inference site (GPUs left to training)
// and the jobs.
func tidalWorld(seed uint64, days int) ([]capacitypkg.Change, forecast.Series, []*job.Job) {
	r := rand.New(rand.NewPCG(seed, 5))
	var changes []capacitypkg.Change
	var fut forecast.Series
	for k := 0; k < days*144; k++ {
		t := float64(k * 600)
		d := int(math.Round(2 - 2*math.Cos(2*math.Pi*float64(k)/144)))
		changes = append(changes, capacitypkg.Change{T: t, Site: "infer", Available: -1, Inference: d})
		fut = append(fut, forecast.Point{T: t, V: float64(4 - d)})
	}
	var jobs []*job.Job
	for i := range 120 * days {
		jobs = append(jobs, enginetest.Job(fmt.Sprintf("j%03d", i)).At(float64(r.IntN(days*86400-20000))).
			Elastic(1, 1, 1+r.IntN(4)).Seconds(float64(600+r.IntN(6000))).Obj())
	}
	return changes, fut, jobs
}

func runTidal(t *testing.T, spec string, seed uint64) *report.Run {
	t.Helper()
	changes, fut, jobs := tidalWorld(seed, 3)
	return fam.Loaning(t, spec, seed, contract.Context{Future: map[string]forecast.Series{"infer": fut}}, changes, jobs)
}

// TestTidalGivesBackBeforeReclaim: with the realised future as its
// forecast, tidal checkpoints jobs off loaned GPUs in the round before
// inference takes them, so inference never waits for a reclaim; planning
// on the present alone (forecast=off), it does wait. The plans never
// exceed what is up (checkedPolicy) and every job finishes.
func TestTidalGivesBackBeforeReclaim(t *testing.T) {
	for seed := range uint64(3) {
		oracle := runTidal(t, "tidal:forecast=oracle", seed)
		off := runTidal(t, "tidal:forecast=off", seed)
		if oracle.InferenceWaits != 0 {
			t.Errorf("seed %d: with the realised future, inference waited %d times", seed, oracle.InferenceWaits)
		}
		if off.InferenceWaits == 0 {
			t.Errorf("seed %d: reactive tidal never made inference wait: the test shows nothing", seed)
		}
	}
}

// TestTidalOnlineLearns: the online forecaster, which learns the repeating
// day from the first one, makes inference wait less than planning on the
// present does.
func TestTidalOnlineLearns(t *testing.T) {
	online, off := 0, 0
	for seed := range uint64(3) {
		online += runTidal(t, "tidal", seed).InferenceWaits
		off += runTidal(t, "tidal:forecast=off", seed).InferenceWaits
	}
	if !(online < off) {
		t.Errorf("online forecast: %d inference waits, reactive %d: want fewer", online, off)
	}
}

func TestTidalKnobs(t *testing.T) {
	for _, tc := range []struct {
		spec string
		ctx  contract.Context
		want string
	}{
		{"tidal:quantile=1", contract.Context{}, "quantile"},
		{"tidal:later_quantile=0", contract.Context{}, "later_quantile"},
		{"tidal:vacate_quantile=1.5", contract.Context{}, "vacate_quantile"},
		{"tidal:offload_quantile=0", contract.Context{}, "offload_quantile"},
		{"tidal:park_hold=-1", contract.Context{}, "park_hold"},
		{"tidal:park=maybe", contract.Context{}, "park"},
		{"tidal:hold=maybe", contract.Context{}, "hold"},
		{"tidal:hold_reserve=-2", contract.Context{}, "hold_reserve"},
		{"tidal:hold_reserve=1.5", contract.Context{}, "hold_reserve"},
		{"tidal:hold_quantile=0", contract.Context{}, "hold_quantile"},
		{"tidal:hold_strict=maybe", contract.Context{}, "hold_strict"},
		{"tidal:hold_yield=maybe", contract.Context{}, "hold_yield"},
		{"tidal:hold_keep=maybe", contract.Context{}, "hold_keep"},
		{"tidal:admit_cloud=max", contract.Context{}, "admit_cloud"},
		{"tidal:hold_safe=maybe", contract.Context{}, "hold_safe"},
		{"tidal:hold_cloud=max", contract.Context{}, "hold_cloud"},
		{"tidal:lead=-1", contract.Context{}, "lead"},
		{"tidal:forecast=crystal", contract.Context{}, "forecast"},
		{"tidal:forecast=oracle", contract.Context{}, "oracle"},
		{"tidal:wrong=always", contract.Context{}, "wrong"},
		{"tidal:restart_penalty=-2", contract.Context{}, "restart_penalty"},
		{"tidal:offload=never", contract.Context{}, "offload"},
		{"tidal:nosuch=1", contract.Context{}, "nosuch"},
	} {
		if _, err := fam(tc.spec, tc.ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one naming %s", tc.spec, err, tc.want)
		}
	}
	p := fam.Parse(t, "tidal:wrong=shift:quantile=0.2:later_quantile=0.5", contract.Context{})
	if p.Name() != "tidal:later_quantile=0.5:quantile=0.2:wrong=shift" {
		t.Errorf("name %q", p.Name())
	}
}

// TestTidalParks: an admitted job waiting for its cloud share runs on an
// idle edge server meanwhile, and gives the server up to a newcomer that
// meets its deadline only there.
func TestTidalParks(t *testing.T) {
	// a holds all 8 cloud GPUs until 1000 s. b (4000 s of work) is planned
	// on them after a, ending at 1500 s for its 1800 s deadline; on the
	// edge server alone (half speed) it would take 8000 s. c arrives at
	// 200 s with 100 s of work due at 600 s: only the edge server (200 s
	// at half speed) finishes it in time.
	jobs := []*job.Job{flowJob("a", 0, 8000, 1000), flowJob("b", 0, 4000, 1800), flowJob("c", 200, 100, 600)}
	c := flowCluster(t, 1, 1)
	parked := flowRun(t, "tidal:park=true", c, slowEdge(), jobs)
	waited := flowRun(t, "tidal", c, slowEdge(), jobs)
	for _, r := range []*report.Run{parked, waited} {
		if got := states(r); got != "a:met b:met c:met " {
			t.Errorf("%s: %s", r.Policy, got)
		}
	}
	if parked.Jobs[1].EdgeGPUSeconds <= 0 || waited.Jobs[1].EdgeGPUSeconds != 0 {
		t.Errorf("b's edge GPU-seconds: %v parked, %v without: want some, then none", parked.Jobs[1].EdgeGPUSeconds, waited.Jobs[1].EdgeGPUSeconds)
	}
	if !(parked.Jobs[1].Finish < waited.Jobs[1].Finish) {
		t.Errorf("b ends at %v parked, %v waiting: want earlier parked", parked.Jobs[1].Finish, waited.Jobs[1].Finish)
	}
}

// TestTidalPrefixMatchesFullPasses: Tidal plans its deadline jobs through
// the same admission (EdgeFlow's, with its forecast's hooks on the edge):
// with and without the kept prefix it decides the same, on a loaning
// cluster whose inference site comes and goes, with deadline jobs arriving
// a few at a time.
func TestTidalPrefixMatchesFullPasses(t *testing.T) {
	for seed := range uint64(3) {
		changes, fut, jobs := tidalWorld(seed, 2)
		rng := rand.New(rand.NewPCG(seed, 11))
		for _, j := range jobs {
			j.Submit = math.Floor(j.Submit/3600) * 3600 // several arrive at once: admission tries them in turn
			if rng.IntN(3) > 0 {
				j.Deadline = j.Submit + j.Work/float64(1+rng.IntN(3)) + float64(rng.IntN(40))*60
			}
		}
		var got [2]string
		for k, full := range []bool{false, true} {
			tl := fam.Parse(t, "tidal:forecast=oracle", contract.Context{Future: map[string]forecast.Series{"infer": fut}}).(*Tidal)
			tl.flow.fullPasses = full
			pack, err := place.Lookup("pack")
			if err != nil {
				t.Fatal(err)
			}
			r, err := sim.Run(sim.Config{Cluster: policytest.LoanCluster(t), Model: policytest.SqrtModel{Restart: 5}, Policy: tl,
				Placer: pack, Round: 60, OnEvents: true, Sites: &sim.Sites{Changes: changes}}, jobs)
			if err != nil {
				t.Fatal(err)
			}
			got[k] = fmt.Sprintf("%+v\n%+v", r.Jobs, r.Timeline)
		}
		if got[0] != got[1] {
			t.Errorf("seed %d: the runs differ", seed)
		}
	}
}

// TestTidalHoldsInsteadOfDeclining: a newcomer that admission would decline
// now, but that the whole cloud could still finish in time, waits and is
// tried again; once an admitted job ends early on spare GPUs, it is
// admitted and meets its deadline. EdgeFlow (and tidal:hold=false)
// declines it at arrival. A job no cloud could finish in time is declined
// at once.
func TestTidalHoldsInsteadOfDeclining(t *testing.T) {
	// 8 cloud GPUs. a (1600 s of work on one GPU, due at 800 s) needs a
	// share of 2 GPUs; spare GPUs run it on 8, ending at about 200 s. b
	// arrives at 10 s with 4000 s of work due at 850 s: next to a's 2
	// reserved GPUs it gets 4 until about 790 s and would end at about
	// 900 s, so admission declines it; on the whole cloud from 200 s it
	// ends at about 700 s. c (100000 s due at 500 s) no cloud can finish.
	jobs := []*job.Job{flowJob("a", 0, 1600, 800), flowJob("b", 10, 4000, 850), flowJob("c", 20, 100000, 500)}
	c := flowCluster(t, 1, 0)
	for _, tc := range []struct{ spec, want string }{
		{"edgeflow", "a:met b:declined c:declined "},
		{"tidal:hold=false", "a:met b:declined c:declined "},
		{"tidal", "a:met b:met c:declined "},
		{"tidal:forecast=off", "a:met b:met c:declined "},
		// A reserve of a GPU leaves b too few in the hold re-trial.
		{"tidal:hold_reserve=1", "a:met b:declined c:declined "},
	} {
		r := flowRun(t, tc.spec, c, perf.Duration{}, jobs)
		if got := states(r); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.spec, got, tc.want)
		}
		if tc.spec == "tidal" {
			if b := r.Jobs[1]; !(b.Start > 100) {
				t.Errorf("tidal: b started at %v: want it held until a ends (about 200 s)", b.Start)
			}
		}
	}
}

// holdWorld is TestTidalHoldsInsteadOfDeclining's a and b on a cloud of two
// 4-GPU nodes, one of which goes down at 300 s for good: b, held at
// arrival, has room on 8 GPUs once a ends (about 200 s), but on the 4
// left from 300 s it ends at about 1100 s, past its 850 s deadline. It
// returns the capacity changes, the cloud's realised capacity and the jobs.
func holdWorld() ([]capacitypkg.Change, forecast.Series, []*job.Job) {
	changes := []capacitypkg.Change{{T: 300, Site: "cloud", Available: 1, Inference: -1}}
	fut := forecast.Series{{T: 0, V: 8}, {T: 300, V: 4}}
	return changes, fut, []*job.Job{flowJob("a", 0, 1600, 800), flowJob("b", 10, 4000, 850)}
}

func holdRun(t *testing.T, spec string) *report.Run {
	t.Helper()
	changes, fut, jobs := holdWorld()
	p := fam.Parse(t, spec, contract.Context{Future: map[string]forecast.Series{"cloud": fut}})
	r, err := sim.Run(sim.Config{Cluster: enginetest.MultiSite(2, 4, 0, 0), Model: perf.Duration{}, Policy: p, Placer: place.Pack{},
		OnEvents: true, Sites: &sim.Sites{Changes: changes}}, jobs)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// TestTidalHoldSafePlansOnTheForecast: a held job is admitted again only if
// it meets on the cloud the forecast keeps until its deadline, less one
// node. Told that half the cloud goes at 300 s (the oracle), tidal never
// admits b, which would miss, and declines it once even the whole cloud
// could not end it in time; planning on the present (forecast=off, or
// hold_safe=false) with no reserve, it admits b at about 200 s and b
// misses; with the default reserve of one node it does not.
func TestTidalHoldSafePlansOnTheForecast(t *testing.T) {
	for _, tc := range []struct{ spec, want string }{
		{"tidal:forecast=oracle:hold_reserve=0", "a:met b:declined "},
		{"tidal:forecast=oracle:hold_reserve=0:hold_safe=false", "a:met b:miss "},
		{"tidal:forecast=off:hold_reserve=0", "a:met b:miss "},
		// The default reserve, one node (N-1), covers the node the
		// forecast does not see going.
		{"tidal:forecast=off", "a:met b:declined "},
	} {
		r := holdRun(t, tc.spec)
		if got := states(r); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.spec, got, tc.want)
		}
	}
}

// pendingStatus is a pending elastic deadline job submitted at 0 s that
// has never run: work seconds on one GPU, due at deadline, in slot.
func pendingStatus(id string, work, deadline float64, slot int) *engine.Status {
	j := enginetest.Job(id).At(0).Elastic(1, 1, 64).Seconds(work).Deadline(deadline).Obj()
	return &engine.Status{Job: j, State: job.Pending, Work: work, FirstStart: -1, LastStart: -1, Finish: -1, Slot: slot}
}

// swapSnapshot is a round at t=1000 on one cloud node of 8 GPUs: x (4000 s
// of work on one GPU, due at 1590 s) and y (2000 s, due at 1700 s) were
// admitted, and x's share leaves y missing; j (800 s, due at 1550 s) was
// held. With j, planned first (earliest deadline), x misses and y meets:
// as many admitted jobs miss as without j, so EdgeFlow's count admits it.
func swapSnapshot() *engine.Snapshot {
	st := func(id string, work, deadline float64, slot int) *engine.Status {
		s := pendingStatus(id, work, deadline, slot)
		s.Memo[efAdmitted] = 1
		return s
	}
	x, y, j := st("x", 4000, 1590, 0), st("y", 2000, 1700, 1), st("j", 800, 1550, 2)
	j.Memo[efAdmitted], j.Memo[efHeld] = 0, 1
	return &engine.Snapshot{Now: 1000, Cluster: enginetest.MultiSite(1, 8, 0, 0), Model: perf.Duration{},
		GPUsPerNode: map[string]int{"a100": 8}, Jobs: []*engine.Status{x, y, j}}
}

// TestTidalHoldStrictNoSwap: a held job is not admitted at the price of an
// admitted job that meets its deadline, even when another admitted job
// would meet in its place (hold_strict, the default); EdgeFlow's count
// allows the swap.
func TestTidalHoldStrictNoSwap(t *testing.T) {
	for _, tc := range []struct {
		spec string
		runs bool
	}{{"tidal:hold_reserve=0", false}, {"tidal:hold_reserve=0:hold_strict=false", true}} {
		s := swapSnapshot()
		plan := fam.Parse(t, tc.spec, contract.Context{}).Schedule(s)
		runs := false
		for _, a := range plan.Run {
			runs = runs || a.Job == "j"
		}
		if runs != tc.runs || slices.Contains(plan.Decline, "j") {
			t.Errorf("%s: j runs %v (declined %v), want runs %v and held: %+v", tc.spec, runs, plan.Decline, tc.runs, plan.Reasons["j"])
		}
	}
}

// TestTidalHoldKeep: with hold_keep a held job is not admitted at the
// price of an admitted job that meets on EdgeFlow's own plan (x in
// swapSnapshot), even with no pessimistic plan to ask (hold_safe=false),
// where EdgeFlow's count alone would let it in.
func TestTidalHoldKeep(t *testing.T) {
	for _, tc := range []struct {
		spec string
		runs bool
	}{{"tidal:hold_safe=false", true}, {"tidal:hold_safe=false:hold_keep=true", false}, {"tidal:hold_reserve=0:hold_strict=false:hold_keep=true", false}} {
		s := swapSnapshot()
		plan := fam.Parse(t, tc.spec, contract.Context{}).Schedule(s)
		runs := false
		for _, a := range plan.Run {
			runs = runs || a.Job == "j"
		}
		if runs != tc.runs || slices.Contains(plan.Decline, "j") {
			t.Errorf("%s: j runs %v (declined %v), want runs %v and held: %+v", tc.spec, runs, plan.Decline, tc.runs, plan.Reasons["j"])
		}
	}
}

// TestTidalHoldYields: a job admitted after being held gives way to a
// newcomer (hold_yield): TestTidalHoldsInsteadOfDeclining's b, admitted at
// about 200 s on all 8 GPUs, and c, arriving at 300 s with 1200 s of work
// due at 500 s, which only all 8 GPUs end in time. EdgeFlow, which declined
// b, admits c. With hold_yield (the default) tidal admits c too, and b
// misses; without it, c would make b miss, so c is declined.
func TestTidalHoldYields(t *testing.T) {
	jobs := []*job.Job{flowJob("a", 0, 1600, 800), flowJob("b", 10, 4000, 850), flowJob("c", 300, 1200, 500)}
	c := flowCluster(t, 1, 0)
	for _, tc := range []struct{ spec, want string }{
		{"edgeflow", "a:met b:declined c:met "},
		{"tidal:hold_reserve=0", "a:met b:miss c:met "},
		{"tidal:hold_reserve=0:hold_yield=false:swap=off", "a:met b:met c:declined "},
		// swap=mh (the default) lets c in anyway: b, with more work left, goes out
		// for it, held again, and misses.
		{"tidal:hold_reserve=0:hold_yield=false:swap=mh", "a:met b:miss c:met "},
	} {
		if got := states(flowRun(t, tc.spec, c, perf.Duration{}, jobs)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.spec, got, tc.want)
		}
	}
}

// TestTidalHoldCloud: the re-trial's cloud on three 8-GPU nodes when the
// forecast (the oracle here) says one node goes at 300 s: the forecast
// less one node (hold_cloud=sum) is 8 GPUs; the lower of the forecast and
// the cloud less one node (min) is 16, the loss counted once.
func TestTidalHoldCloud(t *testing.T) {
	fut := forecast.Series{{T: 0, V: 24}, {T: 300, V: 16}}
	s := &engine.Snapshot{Now: 100, Cluster: enginetest.MultiSite(3, 8, 0, 0), Model: perf.Duration{}, GPUsPerNode: map[string]int{"a100": 8}}
	for _, tc := range []struct {
		spec string
		want int
	}{{"tidal:forecast=oracle", 8}, {"tidal:forecast=oracle:hold_cloud=min", 16}, {"tidal:forecast=off:hold_cloud=min", 16}, {"tidal:forecast=off", 16}} {
		tl := fam.Parse(t, tc.spec, contract.Context{Future: map[string]forecast.Series{"cloud": fut}}).(*Tidal)
		tl.observe(s)
		c, _ := tl.flow.cloudOf(s)
		if got := tl.holdCap(s, c, &fjob{deadline: 2000}); got != tc.want {
			t.Errorf("%s: the re-trial plans %d cloud GPUs, want %d", tc.spec, got, tc.want)
		}
	}
}

// TestTidalMeanCap: admit_cloud=mean plans the admission test on the
// cloud's GPUs less the share of GPU-time the rounds saw down. Two 4-GPU
// nodes observed at 0, 100, 200 and 400 s, node 0 down from 100 to 200 s:
// 4 x 100 GPU-seconds down of 8 x 400, so 8 x (1 - 1/8) = 7 GPUs, and the
// cloud's 8 before any GPU was seen down.
func TestTidalMeanCap(t *testing.T) {
	tl := fam.Parse(t, "tidal:admit_cloud=mean", contract.Context{}).(*Tidal)
	cl := enginetest.MultiSite(2, 4, 0, 0)
	snap := func(now float64, down bool) *engine.Snapshot {
		s := &engine.Snapshot{Now: now, Cluster: cl, Model: perf.Duration{}, GPUsPerNode: map[string]int{"a100": 4}}
		if down {
			s.Down = make([]bool, cl.TotalGPUs())
			for i := range 4 {
				s.Down[cl.Nodes[0].First+cluster.GPUID(i)] = true
			}
		}
		return s
	}
	for _, tc := range []struct {
		now  float64
		down bool
		want int
	}{{0, false, 8}, {100, true, 8}, {200, false, 6}, {400, false, 7}} {
		s := snap(tc.now, tc.down)
		tl.observe(s)
		c, _ := tl.flow.cloudOf(s)
		if got := tl.meanCap(s, c); got != tc.want {
			t.Errorf("t=%v: the admission test plans %d cloud GPUs, want %d", tc.now, got, tc.want)
		}
	}
	if tl.flow.testCap == nil || fam.Parse(t, "tidal", contract.Context{}).(*Tidal).flow.testCap != nil {
		t.Error("admit_cloud=mean must set the admission test's cloud, and the default must not")
	}
}

// TestTidalHeldReasonSteady: a held job's reason says it is held, never
// that it was declined, and names the latest admission that ends it in
// time, which stays the same while it waits (a live executor rewrites a
// job's status whenever its reason changes).
func TestTidalHeldReasonSteady(t *testing.T) {
	p := fam.Parse(t, "tidal", contract.Context{})
	var texts []string
	for _, now := range []float64{1000, 1010, 1030} {
		s := swapSnapshot()
		s.Now = now
		plan := p.Schedule(s)
		r, ok := plan.Reasons["j"]
		if !ok || slices.Contains(plan.Decline, "j") {
			t.Fatalf("t=%v: j declined %v, reason %+v; want it held", now, plan.Decline, r)
		}
		if !strings.HasPrefix(r.Text, "held, not declined: ") || strings.Contains(r.Text, "declined;") {
			t.Errorf("t=%v: j's reason %q: want it held, without EdgeFlow's \"declined\"", now, r.Text)
		}
		m := regexp.MustCompile(`admitted by t=(\d+) s`).FindStringSubmatch(r.Text)
		if m == nil {
			t.Fatalf("t=%v: j's reason %q does not name the latest admission", now, r.Text)
		}
		if latest, _ := strconv.ParseFloat(m[1], 64); latest < now || latest > 1550 {
			t.Errorf("t=%v: latest admission %v, want between now and j's deadline (1550 s)", now, latest)
		}
		texts = append(texts, r.Text)
	}
	if texts[0] != texts[1] || texts[1] != texts[2] {
		t.Errorf("j's reason moved while it waited: %q", texts)
	}
}

// TestTidalSwapMooreHodgson: e (8000 s of work on one GPU, due at 1100 s)
// holds all 8 GPUs until 1000 s. x (14000 s, due at 3000 s) is admitted at
// 10 s: 8 GPUs from 1000 s end it at 2750 s. j and k (4000 s each, due at
// 2000 and 2500 s) arrive at 20 and 30 s: with either, x gets 4 GPUs from
// 1000 to 2000 s and misses, so EdgeFlow declines both, and tidal holds
// them until even the whole cloud would end them too late. With swap=mh,
// j takes the place of x, which has not started and has more work left;
// then k fits beside j; x, held, never fits again: three met instead of
// two.
func TestTidalSwapMooreHodgson(t *testing.T) {
	jobs := []*job.Job{flowJob("e", 0, 8000, 1100), flowJob("x", 10, 14000, 3000), flowJob("j", 20, 4000, 2000), flowJob("k", 30, 4000, 2500)}
	wantStates(t, jobs,
		[2]string{"edgeflow", "e:met x:met j:declined k:declined "},
		[2]string{"tidal:swap=off", "e:met x:met j:declined k:declined "},
		[2]string{"tidal", "e:met x:declined j:met k:met "}, // swap=mh is the default
		// x has not started, so even swap_age=-1 lets it go.
		[2]string{"tidal:swap=mh:swap_age=-1:swap_tries=1", "e:met x:declined j:met k:met "})
	// swap_age: e (4000 s, due at 1100 s) takes a share of 4 GPUs; x
	// (14000 s, due at 2700 s) starts at 10 s on the other 4 and then has
	// all 8 from 1000 s, ending at about 2255 s. j (4000 s, due at 2000 s)
	// arrives at 20 s: planned ahead of x on 4 GPUs until 1020 s, it
	// leaves x to end at about 2770 s, late, so it is turned away. x has
	// run 10 s: within swap_age's default it goes out for j, and it
	// ends too late to meet once it is back; with swap_age=-1 (only jobs
	// that never ran) it stays and j is declined.
	jobs = []*job.Job{flowJob("e", 0, 4000, 1100), flowJob("x", 10, 14000, 2700), flowJob("j", 20, 4000, 2000)}
	wantStates(t, jobs,
		[2]string{"tidal:swap=mh", "e:met x:miss j:met "},
		[2]string{"tidal:swap=mh:swap_age=-1", "e:met x:met j:declined "},
		[2]string{"tidal:swap=mh:swap_age=5", "e:met x:met j:declined "})
	for _, bad := range []string{"swap=yes", "swap_tries=0", "swap_tries=1.5", "swap_age=-2"} {
		if _, err := fam("tidal:"+bad, contract.Context{}); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("tidal:%s: got error %v, want one naming the knob", bad, err)
		}
	}
}

// wantStates runs jobs under each case's spec on one 8-GPU cloud node
// (linear scaling) and compares the jobs' states with the case's.
func wantStates(t *testing.T, jobs []*job.Job, cases ...[2]string) {
	t.Helper()
	for _, tc := range cases {
		if got := states(flowRun(t, tc[0], flowCluster(t, 1, 0), perf.Duration{}, jobs)); got != tc[1] {
			t.Errorf("%s: %s, want %s", tc[0], got, tc[1])
		}
	}
}

// TestTidalAdmitPath: one of two 4-GPU cloud nodes is down at t=1000 s.
// x (admitted, 8,000 s of work on one GPU, due at 4000 s) waits for the 4
// GPUs up now; j (6,000 s, due at 3000 s) arrives. Planned in deadline
// order on the GPUs up now, j takes them until 2500 s and x then ends at
// 4500 s, late: EdgeFlow's test turns j away. With admit_cloud=path the
// test plans the cloud as its forecast gives it, here the node back at
// 1600 s: x runs on it from then and ends at 3600 s, so j is admitted.
// With no forecast of the cloud the test is EdgeFlow's.
func TestTidalAdmitPath(t *testing.T) {
	cl := enginetest.MultiSite(2, 4, 0, 0)
	snap := func() *engine.Snapshot {
		st := func(id string, work, deadline float64, slot int) *engine.Status {
			j := enginetest.Job(id).At(1000).Elastic(1, 1, 64).Seconds(work).Deadline(deadline).Obj()
			return &engine.Status{Job: j, State: job.Pending, Work: work, FirstStart: -1, LastStart: -1, Finish: -1, Slot: slot}
		}
		x, j := st("x", 8000, 4000, 0), st("j", 6000, 3000, 1)
		x.Memo[efAdmitted] = 1
		s := &engine.Snapshot{Now: 1000, Cluster: cl, Model: perf.Duration{}, GPUsPerNode: map[string]int{"a100": 4},
			Jobs: []*engine.Status{x, j}, Down: make([]bool, cl.TotalGPUs())}
		for i := range 4 {
			s.Down[cl.Nodes[0].First+cluster.GPUID(i)] = true
		}
		return s
	}
	admitted := func(plan engine.Plan) bool {
		m, ok := plan.Memo["j"]
		return ok && m[efAdmitted] == 1
	}
	for _, tc := range []struct {
		spec string
		path bool // the cloud's forecast brings the node back at 1600 s
		want bool
	}{
		{"edgeflow", false, false},
		{"tidal:admit_cloud=now:swap=off", false, false},
		{"tidal:admit_cloud=now:swap=off", true, false}, // the hook unused
		// admit_cloud=path is the default. swap=off: with swap=mh, j
		// would take the place of x, which has more work and has not
		// started, on either cloud.
		{"tidal:swap=off", false, false}, // no forecast yet: EdgeFlow's test
		{"tidal:swap=off", true, true},
	} {
		p := fam.Parse(t, tc.spec, contract.Context{})
		if tl, ok := p.(*Tidal); ok && tc.path && tl.flow.testPath != nil {
			tl.flow.testPath = func(s *engine.Snapshot, c cloud) ([]float64, []int) {
				return []float64{1600}, []int{8}
			}
		}
		if got := admitted(p.Schedule(snap())); got != tc.want {
			t.Errorf("%s (path %v): j admitted %v, want %v", tc.spec, tc.path, got, tc.want)
		}
	}
	// The hook itself: once the cloud has been seen to change, the path
	// is the forecast's, bin by bin after now, never above the cloud's GPUs.
	tl := fam.Parse(t, "tidal", contract.Context{}).(*Tidal)
	if tl.flow.testPath == nil || fam.Parse(t, "tidal:admit_cloud=now", contract.Context{}).(*Tidal).flow.testPath != nil {
		t.Fatal("admit_cloud=path (the default) must set the admission test's path, and admit_cloud=now must not")
	}
	for _, now := range []float64{0, 600, 1200, 1800} {
		s := snap()
		s.Now = now
		if now != 1200 {
			s.Down = nil
		}
		tl.observe(s)
	}
	s := snap()
	s.Now = 2400
	s.Down = nil
	tl.observe(s)
	c, _ := tl.flow.cloudOf(s)
	ts, caps := tl.admitPath(s, c)
	if len(ts) == 0 || len(ts) != len(caps) {
		t.Fatalf("path %v %v: want one capacity per bin", ts, caps)
	}
	for k := range ts {
		if ts[k] <= s.Now || (k > 0 && ts[k] <= ts[k-1]) || caps[k] < 4 || caps[k] > 8 {
			t.Fatalf("bin %d: t=%v, %d GPUs: want ascending times after now and 4-8 GPUs (never below the 4 seen at t=1200 s)", k, ts[k], caps[k])
		}
	}
	// A forecast that says the cloud collapses on day 2 (wrong=collapse)
	// plans no fewer GPUs than the cloud has been seen with (4): without
	// that floor the test would see 0 on day 2 and turn every newcomer
	// away (docs/tidal.md, eighth pass).
	wrong := fam.Parse(t, "tidal:wrong=collapse", contract.Context{}).(*Tidal)
	for _, now := range []float64{0, 600, 1200, 1800, 2400} {
		s := snap()
		s.Now = now
		if now != 1200 {
			s.Down = nil
		}
		wrong.observe(s)
	}
	ts, caps = wrong.admitPath(s, c)
	day2 := 0
	for k := range ts {
		if ts[k] >= 86400 && ts[k] < 2*86400 {
			day2++
			if caps[k] != 4 {
				t.Fatalf("wrong=collapse, bin at t=%v: %d GPUs, want the least seen, 4", ts[k], caps[k])
			}
		}
	}
	if day2 == 0 {
		t.Fatal("the path does not reach day 2")
	}
	// The floor survives a restart: a tidal loaded from the saved state
	// (tide kube's leader, tide serve) plans day 2 at 4 GPUs too.
	b, err := wrong.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	back := fam.Parse(t, "tidal:wrong=collapse", contract.Context{}).(*Tidal)
	if err := back.LoadState(b); err != nil {
		t.Fatal(err)
	}
	ts, caps = back.admitPath(s, c)
	for k := range ts {
		if ts[k] >= 86400 && ts[k] < 2*86400 && caps[k] != 4 {
			t.Fatalf("after a restart, wrong=collapse, bin at t=%v: %d GPUs, want the least seen, 4", ts[k], caps[k])
		}
	}
}

// TestTidalAdmitWindow: admit_cloud=window plans the admission test on the
// cloud forecaster's WindowPath (the quantile of the mean over a job's
// window), which only that setting makes the cloud's forecaster learn,
// and keeps it across a restart. The cloud (2 nodes of 4 GPUs) loses a
// node for an hour every 5 h for two and a half days.
func TestTidalAdmitWindow(t *testing.T) {
	cl := enginetest.MultiSite(2, 4, 0, 0)
	feed := func(tl *Tidal) *engine.Snapshot {
		var s *engine.Snapshot
		for now := 0.0; now <= 2.5*86400; now += 600 {
			s = &engine.Snapshot{Now: now, Cluster: cl, Model: perf.Duration{}, GPUsPerNode: map[string]int{"a100": 4},
				Down: make([]bool, cl.TotalGPUs())}
			if math.Mod(now, 5*3600) < 3600 {
				for i := range 4 {
					s.Down[cl.Nodes[0].First+cluster.GPUID(i)] = true
				}
			}
			tl.observe(s)
		}
		return s
	}
	win := fam.Parse(t, "tidal:admit_cloud=window", contract.Context{}).(*Tidal)
	path := fam.Parse(t, "tidal", contract.Context{}).(*Tidal)
	s := feed(win)
	feed(path)
	c, _ := win.flow.cloudOf(s)
	v := win.views[c.site]
	if v == nil || !v.f.Config().Windows || path.views[c.site].f.Config().Windows {
		t.Fatal("the cloud's forecaster must learn window errors under admit_cloud=window, and only then")
	}
	_, wp := v.f.WindowPath(tideBins, win.AdmitQuantile)
	ts, caps := win.admitPath(s, c)
	pts, pcaps := path.admitPath(s, c)
	if len(ts) != len(wp)-1 || len(pts) != len(ts) {
		t.Fatalf("%d and %d bins planned, want %d", len(ts), len(pts), len(wp)-1)
	}
	differs := false
	for k := range ts {
		want := int(math.Floor(math.Max(math.Min(wp[k+1], 8), v.low) + 1e-9))
		if caps[k] != want || ts[k] != pts[k] {
			t.Fatalf("bin %d at t=%v: %d GPUs planned, want WindowPath's %d", k, ts[k], caps[k], want)
		}
		differs = differs || caps[k] != pcaps[k]
	}
	if !differs {
		t.Fatal("the window path equals the per-bin path here: the check would not see the wrong one used")
	}
	b, err := win.SaveState()
	if err != nil {
		t.Fatal(err)
	}
	back := fam.Parse(t, "tidal:admit_cloud=window", contract.Context{}).(*Tidal)
	if err := back.LoadState(b); err != nil {
		t.Fatal(err)
	}
	if _, again := back.admitPath(s, c); !slices.Equal(again, caps) {
		t.Fatalf("after a restart the window path plans %v, before %v", again, caps)
	}
}

// TestTidalSwapRoom: e (4000 s of work on one GPU, due at 1100 s) takes a
// share of 4 GPUs until about 1000 s; x (6000 s, at most 2 GPUs, due at
// 3100 s) is admitted at 10 s on 2 of the 4 left. j (3000 s, due at
// 1000 s) arrives at 20 s: planned before x (earlier deadline) it takes
// the 4 GPUs until about 780 s, and x, which cannot grow past 2, then
// ends at about 3780 s, late; so admission turns j away. x has more work
// left, so swap=mh (the default) puts it out for j; x never fits again
// and runs late. That exchange takes 4 GPUs now for x's 2: the cloud has
// fewer free GPU-seconds from the start, so swap_room=-1 (and any window)
// turns it down. The next try, e (4000 s left, more than j), frees room:
// j ends sooner on the same 4 GPUs, so e goes out instead and runs late.
// With one try only x is asked, and j is declined.
func TestTidalSwapRoom(t *testing.T) {
	x := enginetest.Job("x").At(10).Elastic(1, 1, 2).Seconds(6000).Deadline(3100).Obj()
	jobs := []*job.Job{flowJob("e", 0, 4000, 1100), x, flowJob("j", 20, 3000, 1000)}
	wantStates(t, jobs,
		[2]string{"tidal:swap=off", "e:met x:met j:declined "},
		[2]string{"tidal", "e:met x:miss j:met "},
		[2]string{"tidal:swap_room=-1", "e:miss x:met j:met "},
		[2]string{"tidal:swap_room=600", "e:miss x:met j:met "},
		[2]string{"tidal:swap_room=-1:swap_tries=1", "e:met x:met j:declined "},
		[2]string{"tidal:swap_tries=1", "e:met x:miss j:met "})
	for _, bad := range []string{"swap_room=-2", "swap_room=-0.5"} {
		if _, err := fam("tidal:"+bad, contract.Context{}); err == nil || !strings.Contains(err.Error(), "swap_room") {
			t.Errorf("tidal:%s: got error %v, want one naming the knob", bad, err)
		}
	}
}

// TestTidalSwapWaiting: swap_waiting tries more exchanges after the
// swap_tries, only with jobs that have never run. One 8-GPU node, linear
// scaling. First, b (8,000 s on one GPU, due at 1010 s) takes all 8 GPUs
// from 10 s, so c (2,000 s, due at 1020 s) is turned away. a (12,000 s,
// running since 0 s) has the most work left and is tried first; out, it
// frees nothing before 1010 s. A second try, b, makes room for c and then
// d; b has run, so swap_waiting does not try it. Second, d (10,000 s, due
// at 3530 s) is turned away: a, b and d together need 32,000 GPU-seconds
// by 3530 s, where the node has 28,240. c (12,000 s, due at 4520 s, never
// run) is tried first and frees nothing before 3530 s; b (11,000 s, never
// run: a holds the node) is tried next with swap_waiting and goes out for
// d.
func TestTidalSwapWaiting(t *testing.T) {
	jobs := []*job.Job{flowJob("a", 0, 12000, 4000), flowJob("b", 10, 8000, 1010), flowJob("c", 20, 2000, 1020), flowJob("d", 30, 4000, 1030)}
	wantStates(t, jobs,
		[2]string{"tidal:swap_tries=1:swap_waiting=0", "a:met b:met c:declined d:declined "},
		[2]string{"tidal:swap_tries=1:swap_waiting=1", "a:met b:met c:declined d:declined "},
		[2]string{"tidal:swap_tries=2", "a:met b:miss c:met d:met "})
	jobs = []*job.Job{flowJob("a", 0, 11000, 2000), flowJob("b", 10, 11000, 3010), flowJob("c", 20, 12000, 4520), flowJob("d", 30, 10000, 3530)}
	wantStates(t, jobs,
		[2]string{"tidal:swap_tries=1:swap_waiting=0", "a:met b:met c:met d:declined "},
		[2]string{"tidal:swap_tries=1:swap_waiting=1", "a:met b:declined c:met d:met "},
		[2]string{"tidal:swap_tries=1", "a:met b:declined c:met d:met "}, // swap_waiting=-1 is the default
		[2]string{"tidal:swap_tries=2", "a:met b:declined c:met d:met "})
	for _, bad := range []string{"swap_waiting=-2", "swap_waiting=1.5"} {
		if _, err := fam("tidal:"+bad, contract.Context{}); err == nil || !strings.Contains(err.Error(), "swap_waiting") {
			t.Errorf("tidal:%s: got error %v, want one naming the knob", bad, err)
		}
	}
}

// TestRoomAtLeast: cumulative free GPU-seconds from the common start,
// compared at every boundary within the span.
func TestRoomAtLeast(t *testing.T) {
	tl := func(ts []float64, free []int) *timeline { return &timeline{t: ts, free: free} }
	for _, tc := range []struct {
		name   string
		a, b   *timeline
		within float64
		want   bool
	}{
		{"equal", tl([]float64{0}, []int{8}), tl([]float64{0}, []int{8}), -1, true},
		{"more free throughout", tl([]float64{0, 100}, []int{4, 8}), tl([]float64{0, 200}, []int{2, 8}), -1, true},
		// a is 2 below b for 100 s, then 4 above from 100 s: 200 GPU-s
		// behind at 100 s, level at 150 s, ahead after.
		{"behind early", tl([]float64{0, 100}, []int{0, 8}), tl([]float64{0, 300}, []int{2, 4}), -1, false},
		{"behind early, window before", tl([]float64{0, 100}, []int{0, 8}), tl([]float64{0, 300}, []int{2, 4}), 50, false},
		{"never ahead where it counts", tl([]float64{0, 100}, []int{8, 0}), tl([]float64{0}, []int{4}), 200, true},
		{"behind once the window reaches far", tl([]float64{0, 100}, []int{8, 0}), tl([]float64{0}, []int{4}), 300, false},
		// From 1000 s on a has 2 GPUs fewer free for good: behind in time.
		{"later ends lower", tl([]float64{0, 1000}, []int{8, 6}), tl([]float64{0}, []int{8}), -1, false},
		{"later ends lower, window before", tl([]float64{0, 1000}, []int{8, 6}), tl([]float64{0}, []int{8}), 1000, true},
		{"later ends higher", tl([]float64{0, 1000}, []int{7, 8}), tl([]float64{0, 2000}, []int{7, 6}), -1, true},
	} {
		if got := roomAtLeast(tc.a, tc.b, tc.within); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestTidalHoldBusy: hold_busy=D plans the held job's re-trial on the
// cloud at hold_busy_quantile once the cloud has been seen down for at
// least D of its GPU-time. The cloud (2 nodes of 4 GPUs) loses a node
// for an hour every 3 h: a sixth of its GPU-time. The share is kept
// across a restart, and the re-trial's path follows the quantile.
func TestTidalHoldBusy(t *testing.T) {
	cl := enginetest.MultiSite(2, 4, 0, 0)
	var last *engine.Snapshot
	feed := func(tl *Tidal, from, to float64) {
		for now := from; now <= to; now += 600 {
			s := &engine.Snapshot{Now: now, Cluster: cl, Model: perf.Duration{}, GPUsPerNode: map[string]int{"a100": 4},
				Down: make([]bool, cl.TotalGPUs())}
			if math.Mod(now, 3*3600) < 3600 {
				for i := range 4 {
					s.Down[cl.Nodes[0].First+cluster.GPUID(i)] = true
				}
			}
			tl.observe(s)
			last = s
		}
	}
	site := func(tl *Tidal) *tideView {
		for _, v := range tl.views {
			if v.kind == cluster.SiteCloud {
				return v
			}
		}
		t.Fatal("no cloud view")
		return nil
	}
	for _, c := range []struct {
		spec string
		want float64
	}{
		{"tidal:hold_busy=0", 0.02},
		{"tidal", 0.5}, // hold_busy=0.15, the default since 29 Nov 2026
		{"tidal:hold_busy=0.15", 0.5},
		{"tidal:hold_busy=0.15:hold_busy_quantile=0.3", 0.3},
		{"tidal:hold_busy=0.2", 0.02}, // a sixth is under a fifth
	} {
		tl := fam.Parse(t, c.spec, contract.Context{}).(*Tidal)
		feed(tl, 0, 86400)
		v := site(tl)
		if share := v.down / (float64(v.gpus) * v.obs); share < 0.15 || share > 0.2 {
			t.Fatalf("%s: share seen down %.3f, want about 1/6 (the check would not tell the settings apart)", c.spec, share)
		}
		if got := tl.holdQuantile(v); got != c.want {
			t.Errorf("%s: re-trial quantile %v, want %v", c.spec, got, c.want)
		}
		// The path the re-trial plans on is the forecast's at that
		// quantile.
		tl.plan(last, v)
		if _, want := tl.path(last, v, c.want); !slices.Equal(v.hold, want) {
			t.Errorf("%s: the re-trial's path is not the forecast's at %v", c.spec, c.want)
		}
		b, err := tl.SaveState()
		if err != nil {
			t.Fatal(err)
		}
		back := fam.Parse(t, c.spec, contract.Context{}).(*Tidal)
		if err := back.LoadState(b); err != nil {
			t.Fatal(err)
		}
		feed(back, 86400+600, 86400+3600)
		feed(tl, 86400+600, 86400+3600)
		if bv, tv := site(back), site(tl); bv.down != tv.down || bv.obs != tv.obs || back.holdQuantile(bv) != c.want {
			t.Errorf("%s: after a restart down %v / %v s, want %v / %v s as without one", c.spec, bv.down, bv.obs, tv.down, tv.obs)
		}
	}
	for _, bad := range []string{"hold_busy=1", "hold_busy=-0.1", "hold_busy_quantile=0", "hold_busy_quantile=1"} {
		if _, err := fam("tidal:"+bad, contract.Context{}); err == nil || !strings.Contains(err.Error(), strings.SplitN(bad, "=", 2)[0]) {
			t.Errorf("tidal:%s: got error %v, want one naming the knob", bad, err)
		}
	}
}

// TestTidalSwapBatch: swap_batch lets a burst of newcomers take the place
// of an admitted job that swap=mh may not put out. One node of 8 GPUs; a
// (24,000 GPU-seconds, due at 3,100 s) holds all of it from 0 s. b and c
// (3,200 GPU-seconds each, due at 1,850 s) arrive at 1,000 s: each meets
// on 4 GPUs, both only if a gives up its GPUs, and then a misses. a has
// run, so swap=mh with swap_age=0 cannot put it out for one newcomer
// (nor would one newcomer for one job gain anything): with swap_batch=0
// b and c are held, then declined. swap_batch=1 (the default) puts a out
// for both: two met instead of one.
func TestTidalSwapBatch(t *testing.T) {
	jobs := []*job.Job{flowJob("a", 0, 24000, 3100), flowJob("b", 1000, 3200, 1850), flowJob("c", 1000, 3200, 1850)}
	c := flowCluster(t, 1, 0)
	for _, tc := range []struct{ spec, want string }{
		{"edgeflow", "a:met b:declined c:declined "},
		{"tidal:hold_reserve=0:swap_age=0:swap_batch=0", "a:met b:declined c:declined "},
		{"tidal:hold_reserve=0:swap_age=0", "a:miss b:met c:met "},        // swap_batch=1, the default
		{"tidal:hold_reserve=0:swap=off", "a:met b:declined c:declined "}, // no exchange of either kind
	} {
		if got := states(flowRun(t, tc.spec, c, perf.Duration{}, jobs)); got != tc.want {
			t.Errorf("%s: %s, want %s", tc.spec, got, tc.want)
		}
	}
	// The round at 1,000 s: a goes out, held again with the reason, and b
	// and c run.
	st := func(id string, work, deadline float64, slot int, ran bool) *engine.Status {
		s := pendingStatus(id, work, deadline, slot)
		if ran {
			s.FirstStart, s.LastStart, s.Memo[efAdmitted] = 0, 0, 1
		}
		return s
	}
	s := &engine.Snapshot{Now: 1000, Cluster: enginetest.MultiSite(1, 8, 0, 0), Model: perf.Duration{},
		GPUsPerNode: map[string]int{"a100": 8}, Jobs: []*engine.Status{st("a", 16000, 3100, 0, true), st("b", 3200, 1850, 1, false), st("c", 3200, 1850, 2, false)}}
	plan := fam.Parse(t, "tidal:hold_reserve=0:swap_age=0", contract.Context{}).Schedule(s)
	var runs []string
	for _, a := range plan.Run {
		runs = append(runs, a.Job)
	}
	slices.Sort(runs)
	if fmt.Sprint(runs) != "[b c]" || len(plan.Decline) > 0 {
		t.Errorf("at 1000 s: runs %v, declines %v; want b and c to run, a held", runs, plan.Decline)
	}
	if r := plan.Reasons["a"].Text; !strings.HasPrefix(r, "held again: newcomers that meet took its place") {
		t.Errorf("a's reason %q: want it held again for the newcomers", r)
	}
}
