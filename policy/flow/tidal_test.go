package flow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	capacitypkg "github.com/tide-sched/tide/capacity"
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
