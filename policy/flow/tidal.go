package flow

import (
	"cmp"
	"fmt"
	"hash/fnv"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/harvest"
	"github.com/tide-sched/tide/policy/internal/explain"
	"github.com/tide-sched/tide/policy/internal/kept"
	"github.com/tide-sched/tide/policy/internal/loan"
)

// tidalPolicies registers the policies this file defines; Policies calls it.
func tidalPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name:    "tidal",
		Presets: []string{"tidal:deadlines=false"},
		Summary: "tide's own: forecasts each edge and inference site's capacity online (package forecast, learned " +
			"from what each round observes) and plans over it. Deadline jobs: EdgeFlow's admission and shares, " +
			"offloaded only to edge servers the forecast keeps up through the next lead seconds, and admitted on " +
			"servers the forecast brings up later and keeps up until they would finish; a newcomer it cannot admit yet waits and is tried again while the whole cloud could still meet its deadline, admitted only if the forecast's low quantile of cloud and edge (the cloud's median once it has been seen down 15% of its GPU-time), less one cloud node, keeps every admitted job meeting, and giving way to later newcomers; a newcomer turned away takes the place of an admitted job of more work left when that meets more (Moore-Hodgson); where cloud nodes have gone down, the admission test plans the cloud on its forecast. Loaned inference GPUs: only as many as the forecast keeps idle through the " +
			"next round, so jobs are checkpointed before a predicted reclaim; elastic sizes by a knapsack of " +
			"goodput speedup per remaining hour (shortest first)",
		Knobs: "quantile=0.02: the capacity quantile planned on (lower is safer: fewer reclaims, fewer GPUs lent); " +
			"lead=60: seconds ahead a predicted drop makes GPUs go back (the round); " +
			"forecast=online: online, off (reactive: capacity stays as it is now), or oracle (the realised future, " +
			"simulator only: the upper bound); " +
			"wrong=: make the forecast wrong on purpose: shift (by shift_h hours), collapse (capacity 0 in day 2 " +
			"of the run), noise (its errors tripled); shift_h=6: hours wrong=shift moves the forecast by, in [-168, 168] (positive: it sees each change that many hours early; negative: late); " +
			"deadlines=true: plan deadline jobs by EdgeFlow's admission and shares (false: ignore deadlines, as the " +
			"harvest scenarios' DeepBoot and Aryl do); " +
			"edge_vacate=false: also move running jobs off an edge site in the round before a predicted drop (owners " +
			"wait far less; on edgeflow-diurnal it met 1 point fewer deadlines); " +
			"later=true: admit deadline jobs on edge servers the forecast brings up later; " +
			"later_quantile=quantile: the quantile that later admission plans on; " +
			"offload_quantile=0.5: the quantile that the look-ahead on offloads plans on; " +
			"park=false: run admitted deadline jobs that wait for their cloud share on idle edge servers meanwhile " +
			"(more deadlines met on average at arrival x2, fewer at some points); " +
			"park_hold=3600: seconds the forecast must keep a server up to park a job there; " +
			"hold=true: a newcomer that admission would decline waits instead, and admission tries it again each round, " +
			"while the whole cloud could still finish it by its deadline (false: declined at arrival, as EdgeFlow; " +
			"docs/tidal.md, section 4); " +
			"hold_safe=true: a held job is admitted again only if it also meets, and makes no admitted job miss, on the " +
			"pessimistic plan: the cloud at the hold_quantile of its forecast until the job's deadline less hold_reserve GPUs, " +
			"and the edge servers running jobs at that quantile until then; hold_quantile=quantile: the quantile of that plan; " +
			"hold_busy=0.15: a share of the cloud's GPU-time (0: off); once the cloud has been seen down for at least that share, " +
			"the pessimistic plan takes the cloud at hold_busy_quantile instead of hold_quantile (docs/tidal.md, fourteenth pass); hold_busy_quantile=0.5: the quantile it plans the cloud on then; " +
			"hold_reserve=-1: GPUs kept back in that plan (-1: one cloud node's, the N-1 rule; none on a one-node cloud); " +
			"hold_strict=true: in that plan no admitted job may stop meeting, even if another would meet in its place; " +
			"hold_yield=true: a job admitted after being held gives way: a newcomer may make it miss; " +
			"admit_cloud=path: the cloud the admission test plans on: now: the GPUs up now (EdgeFlow's), mean: at most " +
			"its GPUs less the share of GPU-time the rounds have seen down so far (newcomers only; docs/tidal.md, sixth pass), or path: " +
			"the GPUs up now until the next forecast bin, then the cloud forecast's admit_quantile bin by bin (a node down now comes back " +
			"when the forecast says, and it is never below the fewest GPUs the cloud has been seen with; docs/tidal.md, seventh and eighth passes; the same as now while the cloud has never changed), or window: path, but " +
			"calibrated for the mean over a job's window rather than bin by bin (docs/tidal.md, ninth pass); admit_quantile=0.2: the quantile of the cloud forecast that path and window plan on; " +
			"hold_keep=false: a held job is admitted again only if no job that meets on EdgeFlow's own plan without it stops " +
			"meeting with it (docs/tidal.md, sixth pass); " +
			"hold_cloud=sum: that plan's cloud is the forecast less hold_reserve (sum), or the lower of the two (min); " +
			"swap=mh: off, or mh (Moore-Hodgson: a newcomer turned away takes the place of an admitted job of its priority with more work " +
			"left (GPU-seconds on its fewest GPUs) that the whole cloud could still end in time, if then it meets and every job " +
			"that met still meets; the job out is held again (docs/tidal.md, fourth pass); swap_tries=5: how many such jobs are tried, most work first; " +
			"swap_waiting=-1: how many more are tried after them among those that never ran (-1: all; 0: none; docs/tidal.md, twelfth pass); " +
			"swap_age=7200: seconds a job may have run and still go out (-1: only jobs that never ran); " +
			"swap_batch=1: after admission, the newcomers it turned away are tried together, Moore-Hodgson's way, against up to " +
			"this many admitted jobs of their priority or below, whatever their age: the exchange is made if strictly more newcomers " +
			"then meet than jobs go out, and every other job that met still meets (0: off, as with swap=off; docs/tidal.md, fifteenth pass); " +
			"swap_room=0: seconds (0: off; -1: every horizon): an exchange is made only if, on admission's plan, the cloud's free " +
			"GPU-seconds from now to any time within them are no fewer with it than without it (docs/tidal.md, eleventh pass); " +
			"rollout=off: gate or replace: a held job that EdgeFlow's test would admit again is admitted only if a play of the " +
			"jobs known now, forward under EdgeFlow's own rule on the cloud forecast, meets strictly more deadlines with it than " +
			"without (gate: the pessimistic plan must let it in too; replace: the play instead of that plan; robust: the play, " +
			"and no fewer on the pessimistic cloud); with swap=mh an exchange needs the play too (docs/tidal.md, fifth pass); " +
			"rollout_quantile=0.5: the cloud forecast's quantile the play runs on; rollout_step=600: seconds between its steps " +
			"at most; rollout_arrivals=0: seconds of past arrivals the play expects again as newcomers (0: none); " +
			"rollout_faults=0: K plays with cloud nodes lost at the rate and for the time seen so far, at K phases (0: one play, " +
			"no faults); " +
			"vacate_quantile=quantile: the quantile that edge_vacate plans on; " +
			"restart_penalty=240: D of DeepBoot's restart factor on a changed allocation outside the deadline planner " +
			"(which takes EdgeFlow's knobs, the rest of this list); " + efKnobs + "; " + edgeKnobs,
		NeedsDeadlines: false,
		Elastic:        true,
		Build:          newTidal,
	})
}

// Tidal is tide's own policy (issue 18). Each round it records what the
// snapshot shows of every edge and inference site (GPUs available to
// training; whole servers on an edge site) into an online forecaster per
// site, and plans on the Quantile of the forecast:
//
//   - Deadline jobs go through EdgeFlow (Flow with Edge): admission,
//     minimum satisfactory shares, spare GPUs, offloading. Tidal changes
//     two things: a job goes to an edge server only when the forecast
//     keeps enough servers of that site up until the job's predicted end
//     (the simulator reclaims idle servers first, so k servers up keep k
//     jobs); and a newcomer that neither the cloud nor an edge server up
//     now can finish in time is admitted when an edge server the forecast
//     brings up later can (it waits until offloading moves it there). A
//     newcomer admission would still decline is not declined while the
//     whole cloud could finish it by its deadline (Hold): it waits, and
//     admission tries it again each round, as admitted jobs end early on
//     spare GPUs. Such a held job is admitted only if the plan also holds
//     with the cloud at the forecast's HoldQuantile until its deadline
//     (HoldBusyQuantile on a cloud seen down for HoldBusy of its
//     GPU-time), less one node (HoldSafe, HoldReserve), and the edge servers at the
//     same quantile, with no admitted job stopping to meet (HoldStrict);
//     once admitted it gives way to newcomers (HoldYield).
//   - Loaned inference GPUs: the jobs left without GPUs (all jobs when no
//     job has a deadline; training sites first) are sized by a
//     multiple-choice knapsack (DeepBoot's, with its restart factor)
//     whose value is a job's speedup per hour of remaining work, so short
//     jobs come first; an inference site lends only the GPUs the forecast
//     keeps idle until Lead seconds from now, so when inference is
//     predicted to come back within the next round the jobs on those
//     GPUs are checkpointed now instead of being reclaimed.
//
// Forecast "off" plans on the present only (reactive); "oracle" on the
// realised future (Context.Future, the simulator's), the upper bound of
// what a forecast can give.
type Tidal struct {
	Quantile float64
	// LaterQuantile is the quantile later admission plans on: whether an
	// edge server comes up later and stays up until a job that would
	// otherwise be declined ends. Such a job misses anyway when declined,
	// so it needs a likely path, not Quantile's nearly-sure one.
	LaterQuantile float64
	// VacateQuantile is the quantile EdgeVacate plans on: whether the
	// servers holding jobs now stay up through the next Lead seconds.
	// Moving a job off costs a checkpoint and its place on the edge, so
	// it needs a likely drop, not Quantile's merely possible one.
	VacateQuantile float64
	// OffloadQuantile is the quantile the look-ahead on offloads plans
	// on: whether the servers a job would go to stay up through the next
	// Lead seconds. At Quantile (0.02) the noise of the next bin alone
	// kept jobs off the last servers up, and it met fewer deadlines than
	// EdgeFlow (docs/tidal.md, section 4).
	OffloadQuantile float64
	Lead            float64
	Source          string // online, off, oracle
	Wrong           string // "", shift, collapse, noise
	ShiftH          float64
	Later           bool
	Deadlines       bool
	// EdgeVacate moves jobs off an edge site in the round before the
	// forecast says its servers drop (off: only new offloads look ahead).
	EdgeVacate bool
	// Park runs admitted deadline jobs that wait for their cloud share on
	// idle edge servers the forecast keeps up for ParkHold seconds: they
	// make progress there until the cloud plan starts them or another job
	// needs the server (admission and offloading see the server as idle).
	Park     bool
	ParkHold float64
	// Hold keeps a newcomer that admission would decline waiting instead,
	// and tries it again each round, while its deadline can still be met.
	Hold bool
	// HoldSafe makes a held job's re-trial stricter (Flow.holdCap): it is
	// admitted only if it also meets, and makes no admitted job miss
	// that meets without it, on the pessimistic plan: the cloud at the
	// HoldQuantile of its forecast up to the job's deadline, less
	// HoldReserve GPUs (-1: one cloud node's, the N-1 rule, or none on a
	// one-node cloud), and the edge
	// servers running jobs at the same quantile up to then. With
	// HoldStrict no admitted job may stop meeting there, even if another
	// would meet in its place (EdgeFlow's test counts them).
	HoldSafe     bool
	HoldQuantile float64
	// HoldBusy (hold_busy=, a share; default 0.15, 0: off): once the cloud has been
	// seen down for at least that share of its GPU-time, the re-trial
	// plans the cloud at HoldBusyQuantile instead of HoldQuantile. Under
	// frequent faults the low quantile of the cloud until a held job's
	// deadline, less a node, keeps held jobs from coming back
	// (docs/tidal.md, fourteenth pass).
	HoldBusy         float64
	HoldBusyQuantile float64
	HoldReserve      int
	HoldStrict       bool
	// HoldKeep: a held job is admitted again only if no deadline job
	// that meets on EdgeFlow's own plan without it stops meeting with it
	// (Flow.holdKeep; docs/tidal.md, sixth pass).
	HoldKeep bool
	// HoldMin plans the re-trial's cloud at the lower of the forecast's
	// HoldQuantile and the cloud less HoldReserve (N-1 or the forecast,
	// whichever is lower), instead of the forecast less HoldReserve.
	HoldMin bool
	// HoldYield makes a job admitted after being held give way: a
	// newcomer may make it miss (Flow.holdYield).
	HoldYield bool
	// Swap (swap=mh) is Moore-Hodgson's rule at admission (mhSwap): a
	// newcomer turned away takes the place of an admitted job of more
	// work left that has not run for more than SwapAge seconds (-1: that
	// has never run); SwapTries such jobs are tried, most work first.
	Swap      bool
	SwapTries int
	SwapAge   float64
	// SwapWaiting (swap_waiting=, default -1: all) tries up to that many
	// more jobs after the SwapTries, among those that have never run,
	// most work first (0: none): taking one of them out costs no
	// preemption and none of its progress, and under heavy arrivals
	// many admitted jobs wait (docs/tidal.md, twelfth pass).
	SwapWaiting int
	// SwapBatch (swap_batch=K, default 1; 0 or swap=off: off) lets the newcomers a round
	// declined take the places of up to K admitted jobs of their priority
	// or below, whatever their age, when strictly more of them then meet
	// than jobs go out and every other job that met still meets
	// (batchSwap). Moore and Hodgson's exchange weighs one newcomer
	// against one job; a burst of short jobs can outnumber the old jobs
	// whose shares keep it out.
	SwapBatch int
	batchOut  []*fjob
	// SwapRoom (swap_room=, seconds; 0: off) asks an exchange to leave
	// the cloud at least as much room as it takes: on admission's plan,
	// the free GPU-seconds from now to any time within SwapRoom seconds
	// (-1: any time) are no fewer with it than without it (roomAtLeast).
	// Moore and Hodgson count only the jobs known at the exchange; a
	// newcomer with less work than the job it puts out may still hold
	// more GPUs sooner, which the arrivals to come would have used.
	SwapRoom float64
	roomBase timeline // admission's plan without the exchange (mhSwap's memory)
	// RolloutMode (rollout=) plays tidal's choice and EdgeFlow's forward
	// where they differ (tidal_rollout.go): off; gate: a held job is
	// admitted again only if the pessimistic plan lets it in and the play
	// meets more with it; replace: the play alone decides (after
	// EdgeFlow's test). With Swap, an exchange needs the play too.
	RolloutMode  string
	RollQuantile float64 // the cloud forecast's quantile the play runs on
	RollStep     float64 // seconds between the play's steps at most
	// RollArrivals (rollout_arrivals=, seconds): the play expects the
	// arrivals of the last RollArrivals seconds again in the next (0:
	// none), so that a held job's admission is weighed against the
	// newcomers its room would turn away.
	RollArrivals float64
	// RollFaults (rollout_faults=K): where the cloud has lost nodes, the
	// play runs K times, each with a node lost at the rate and for the
	// time seen so far, at K phases of that rate, and sums the deadlines
	// met (0: one play on the forecast alone).
	RollFaults int
	arrivals   []arrival // every deadline job seen, as it arrived (RollArrivals)
	seen       map[string]bool
	rollNext   []arrival
	roll       []rollJob
	rollLive   []*fjob
	rollTL     timeline
	restart    harvest.DeepBoot // for its restart factor
	flow       *Flow
	future     map[string]forecast.Series
	views      map[string]*tideView
	promised   map[string]int   // edge servers promised later this round, by site
	snap       *engine.Snapshot // the round's snapshot while the deadline planner runs (mhSwap)
	cloudNow   cloud            // its cloud
	name       string

	// The memory of a round, kept from round to round (issue #19 point
	// 1: a round in which nothing changed allocates nothing): its jobs'
	// reasons and decisions, the plan's Run, the jobs left to the loans,
	// hold's job alone, and the loans' pools, counts and knapsacks.
	round    tideRound
	run      []engine.Assignment
	left     []*engine.Status
	alone    fjob
	aloneSet [1]*fjob
	lent     map[string]int
	unlent   map[string]int
	poolBuf  []loan.Pool
	pools    []loan.Pool
	speedups loan.Speedups
	explain  explain.Scratch
	// park's: the edge nodes used and jobs per edge site, the room left
	// per site, the jobs waiting to park, those left, and the parked
	// jobs' Nodes.
	parkUsed    map[int]bool
	parkPerSite map[string]int
	parkRoom    map[string]int
	parkWait    []*engine.Status
	parkLeft    []*engine.Status
	parkNodes   []engine.NodeGPUs

	// AdmitQuantile is the cloud forecast's quantile that admit_cloud=path
	// plans the admission test on.
	AdmitQuantile float64
	// admitWindow: admit_cloud=window, the path calibrated for the mean
	// over a job's window (forecast.WindowPath; docs/tidal.md, ninth
	// pass), whose window errors the cloud's forecaster then learns.
	admitWindow bool
	admTs       []float64
	admCaps     []int
	// The order park offers edge servers in, kept from round to round,
	// and its scratch (tidal_park_order.go).
	parkOrder  kept.Order[parkKeyed]
	parkKeyed  []parkKeyed
	parkSorted []parkKeyed
}

// tideBins is how far ahead a path is forecast: two days of 600 s bins.
const tideBins = 288

// tideView is one varying site as tidal sees it.
type tideView struct {
	name   string
	kind   string
	gpus   int
	perSrv float64 // mean GPUs per server
	f      *forecast.Forecaster
	seen   bool
	varies bool      // its capacity has changed at least once
	low    float64   // the least capacity observed (GPUs)
	cur    float64   // GPUs available now
	path   []float64 // planned capacity per bin at Quantile
	later  []float64 // the same at LaterQuantile, for later admission
	vacate []float64 // the same at VacateQuantile, for moving jobs off
	hold   []float64 // the same at HoldQuantile, for the hold re-trial
	offl   []float64 // the same at OffloadQuantile, for the look-ahead on offloads
	roll   []float64 // the same at RollQuantile, for the rollout's cloud
	pathAt float64   // Now of the cached path, NaN when none
	start  float64   // start of the path's bin 0
	bin    float64
	prefix []float64 // prefix[k]: least planned capacity over bins 1..k (prefix[0] = cur)
	// What the rounds have seen of drops (the rollout's faults): GPUs
	// lost in drops, GPU-seconds below the site's GPUs, seconds observed.
	lost, down, obs, lastAt float64
}

func newTidal(ctx contract.Context, o contract.Options) (engine.Policy, error) {
	t := &Tidal{views: map[string]*tideView{}, future: ctx.Future, name: "tidal"}
	var err error
	if t.Quantile, err = o.Float("quantile", 0.02); err != nil {
		return nil, err
	}
	if !(t.Quantile > 0 && t.Quantile < 1) {
		return nil, fmt.Errorf("policy tidal: quantile=%v: want a number in (0, 1)", t.Quantile)
	}
	if t.LaterQuantile, err = o.Float("later_quantile", t.Quantile); err != nil {
		return nil, err
	}
	if !(t.LaterQuantile > 0 && t.LaterQuantile < 1) {
		return nil, fmt.Errorf("policy tidal: later_quantile=%v: want a number in (0, 1)", t.LaterQuantile)
	}
	if t.VacateQuantile, err = o.Float("vacate_quantile", t.Quantile); err != nil {
		return nil, err
	}
	if !(t.VacateQuantile > 0 && t.VacateQuantile < 1) {
		return nil, fmt.Errorf("policy tidal: vacate_quantile=%v: want a number in (0, 1)", t.VacateQuantile)
	}
	if t.OffloadQuantile, err = o.Float("offload_quantile", 0.5); err != nil {
		return nil, err
	}
	if !(t.OffloadQuantile > 0 && t.OffloadQuantile < 1) {
		return nil, fmt.Errorf("policy tidal: offload_quantile=%v: want a number in (0, 1)", t.OffloadQuantile)
	}
	if t.Park, err = o.Bool("park", false); err != nil {
		return nil, err
	}
	if t.Hold, err = o.Bool("hold", true); err != nil {
		return nil, err
	}
	if t.HoldSafe, err = o.Bool("hold_safe", true); err != nil {
		return nil, err
	}
	if t.HoldQuantile, err = o.Float("hold_quantile", t.Quantile); err != nil {
		return nil, err
	}
	if !(t.HoldQuantile > 0 && t.HoldQuantile < 1) {
		return nil, fmt.Errorf("policy tidal: hold_quantile=%v: want a number in (0, 1)", t.HoldQuantile)
	}
	if t.HoldBusy, err = o.Float("hold_busy", 0.15); err != nil {
		return nil, err
	}
	if !(t.HoldBusy >= 0 && t.HoldBusy < 1) {
		return nil, fmt.Errorf("policy tidal: hold_busy=%v: want a share in [0, 1) (0: off)", t.HoldBusy)
	}
	if t.HoldBusyQuantile, err = o.Float("hold_busy_quantile", 0.5); err != nil {
		return nil, err
	}
	if !(t.HoldBusyQuantile > 0 && t.HoldBusyQuantile < 1) {
		return nil, fmt.Errorf("policy tidal: hold_busy_quantile=%v: want a number in (0, 1)", t.HoldBusyQuantile)
	}
	reserve, err := o.Float("hold_reserve", -1)
	if err != nil {
		return nil, err
	}
	if t.HoldReserve = int(reserve); float64(t.HoldReserve) != reserve || reserve < -1 {
		return nil, fmt.Errorf("policy tidal: hold_reserve=%v: want a whole number of GPUs >= 0, or -1 (one cloud node's)", reserve)
	}
	if t.ParkHold, err = o.Float("park_hold", 3600); err != nil {
		return nil, err
	}
	if t.ParkHold < 0 {
		return nil, fmt.Errorf("policy tidal: park_hold=%v: want seconds >= 0", t.ParkHold)
	}
	if t.Lead, err = o.Float("lead", 60); err != nil {
		return nil, err
	}
	if t.Lead < 0 {
		return nil, fmt.Errorf("policy tidal: lead=%v: want seconds >= 0", t.Lead)
	}
	t.Source = o.String("forecast", "online")
	switch t.Source {
	case "online", "off":
	case "oracle":
		if ctx.Future == nil {
			return nil, fmt.Errorf("policy tidal: forecast=oracle needs the realised capacity, which only tide sim --scenario gives")
		}
	default:
		return nil, fmt.Errorf("policy tidal: forecast=%q: want online, off or oracle", t.Source)
	}
	t.Wrong = o.String("wrong", "")
	switch t.Wrong {
	case "", "shift", "collapse", "noise":
	default:
		return nil, fmt.Errorf("policy tidal: wrong=%q: want shift, collapse or noise", t.Wrong)
	}
	if t.ShiftH, err = o.Float("shift_h", 6); err != nil {
		return nil, err
	}
	if !(math.Abs(t.ShiftH) <= 168) {
		return nil, fmt.Errorf("policy tidal: shift_h=%v: want hours in [-168, 168] (a week either way)", t.ShiftH)
	}
	if t.Later, err = o.Bool("later", true); err != nil {
		return nil, err
	}
	if t.Deadlines, err = o.Bool("deadlines", true); err != nil {
		return nil, err
	}
	if t.EdgeVacate, err = o.Bool("edge_vacate", false); err != nil {
		return nil, err
	}
	if t.restart.RestartDelay, err = o.Float("restart_penalty", 240); err != nil {
		return nil, err
	}
	if t.restart.RestartDelay < 0 {
		return nil, fmt.Errorf("policy tidal: restart_penalty=%v: want seconds >= 0", t.restart.RestartDelay)
	}
	// The deadline planner: EdgeFlow with the knobs given to tidal.
	ek := DefaultEdge
	if err := o.Decode(&ek); err != nil {
		return nil, err
	}
	if t.flow, err = newFlow(ek, true, "tidal"); err != nil {
		return nil, err
	}
	t.flow.edgeCap = t.edgeCap
	if t.Later {
		t.flow.edgeLater = t.edgeLater
	}
	t.flow.parks = t.Park
	t.flow.holds = t.Hold
	if t.Hold && t.HoldSafe {
		t.flow.holdCap = t.holdCap
	}
	if t.HoldStrict, err = o.Bool("hold_strict", true); err != nil {
		return nil, err
	}
	switch hc := o.String("hold_cloud", "sum"); hc {
	case "sum", "min":
		t.HoldMin = hc == "min"
	default:
		return nil, fmt.Errorf("policy tidal: hold_cloud=%q: want sum or min", hc)
	}
	if t.HoldYield, err = o.Bool("hold_yield", true); err != nil {
		return nil, err
	}
	switch sw := o.String("swap", "mh"); sw {
	case "off", "mh":
		t.Swap = sw == "mh"
	default:
		return nil, fmt.Errorf("policy tidal: swap=%q: want off or mh", sw)
	}
	tries, err := o.Float("swap_tries", 5)
	if err != nil {
		return nil, err
	}
	if t.SwapTries = int(tries); float64(t.SwapTries) != tries || tries < 1 {
		return nil, fmt.Errorf("policy tidal: swap_tries=%v: want a whole number >= 1", tries)
	}
	if t.SwapAge, err = o.Float("swap_age", 7200); err != nil {
		return nil, err
	}
	if t.SwapAge < -1 {
		return nil, fmt.Errorf("policy tidal: swap_age=%v: want seconds >= 0, or -1 (never ran)", t.SwapAge)
	}
	waiting, err := o.Float("swap_waiting", -1)
	if err != nil {
		return nil, err
	}
	if t.SwapWaiting = int(waiting); float64(t.SwapWaiting) != waiting || waiting < -1 {
		return nil, fmt.Errorf("policy tidal: swap_waiting=%v: want a whole number >= 0, or -1 (every job that never ran)", waiting)
	}
	batch, err := o.Float("swap_batch", 1)
	if err != nil {
		return nil, err
	}
	if t.SwapBatch = int(batch); float64(t.SwapBatch) != batch || batch < 0 {
		return nil, fmt.Errorf("policy tidal: swap_batch=%v: want a whole number >= 0 (0: off)", batch)
	}
	if t.SwapBatch > 0 && t.Swap && t.Hold {
		t.flow.batch = t.batchSwap // swap=off: no exchange of either kind
	}
	if t.SwapRoom, err = o.Float("swap_room", 0); err != nil {
		return nil, err
	}
	if t.SwapRoom < 0 && t.SwapRoom != -1 {
		return nil, fmt.Errorf("policy tidal: swap_room=%v: want seconds >= 0 (0: off), or -1 (every horizon)", t.SwapRoom)
	}
	if t.Swap && t.Hold {
		t.flow.swap = func(test func([]*fjob), base, trial []*fjob, j *fjob, meets []bool) []*fjob {
			return t.mhSwap(test, base, trial, j, meets)
		}
	}
	switch t.RolloutMode = o.String("rollout", "off"); t.RolloutMode {
	case "off":
	case "gate", "replace", "robust":
		if t.Hold {
			t.flow.heldTest = t.rollHeld
		}
	default:
		return nil, fmt.Errorf("policy tidal: rollout=%q: want off, gate, replace or robust", t.RolloutMode)
	}
	if t.RollQuantile, err = o.Float("rollout_quantile", 0.5); err != nil {
		return nil, err
	}
	if !(t.RollQuantile > 0 && t.RollQuantile < 1) {
		return nil, fmt.Errorf("policy tidal: rollout_quantile=%v: want a number in (0, 1)", t.RollQuantile)
	}
	if t.RollArrivals, err = o.Float("rollout_arrivals", 0); err != nil {
		return nil, err
	}
	if t.RollArrivals < 0 {
		return nil, fmt.Errorf("policy tidal: rollout_arrivals=%v: want seconds >= 0", t.RollArrivals)
	}
	t.seen = map[string]bool{}
	rf, err := o.Float("rollout_faults", 0)
	if err != nil {
		return nil, err
	}
	if t.RollFaults = int(rf); float64(t.RollFaults) != rf || rf < 0 {
		return nil, fmt.Errorf("policy tidal: rollout_faults=%v: want a whole number >= 0", rf)
	}
	if t.RollStep, err = o.Float("rollout_step", 600); err != nil {
		return nil, err
	}
	if !(t.RollStep > 0) {
		return nil, fmt.Errorf("policy tidal: rollout_step=%v: want seconds > 0", t.RollStep)
	}
	if t.HoldKeep, err = o.Bool("hold_keep", false); err != nil {
		return nil, err
	}
	if t.AdmitQuantile, err = o.Float("admit_quantile", 0.2); err != nil {
		return nil, err
	}
	if !(t.AdmitQuantile > 0 && t.AdmitQuantile < 1) {
		return nil, fmt.Errorf("policy tidal: admit_quantile=%v: want a number in (0, 1)", t.AdmitQuantile)
	}
	switch ac := o.String("admit_cloud", "path"); ac {
	case "now", "mean", "path", "window":
		if ac == "mean" && t.Hold {
			t.flow.testCap = t.meanCap
		}
		if ac == "path" || ac == "window" {
			t.flow.testPath = t.admitPath
		}
		t.admitWindow = ac == "window"
	default:
		return nil, fmt.Errorf("policy tidal: admit_cloud=%q: want now, mean, path or window", ac)
	}
	t.flow.holdStrict = t.HoldStrict
	t.flow.holdKeep = t.Hold && t.HoldKeep
	t.flow.holdYield = t.Hold && t.HoldYield
	var knobs []string
	for _, k := range []string{"quantile", "later_quantile", "vacate_quantile", "lead", "forecast", "wrong", "shift_h", "later", "deadlines", "edge_vacate", "restart_penalty", "park", "park_hold", "offload_quantile", "hold", "hold_safe", "hold_quantile", "hold_busy", "hold_busy_quantile", "hold_reserve", "hold_strict", "hold_keep", "admit_cloud", "admit_quantile", "hold_yield", "hold_cloud", "swap", "swap_tries", "swap_waiting", "swap_age", "swap_room", "swap_batch", "rollout", "rollout_quantile", "rollout_step", "rollout_arrivals", "rollout_faults"} {
		if v, ok := o.Lookup(k); ok {
			knobs = append(knobs, k+"="+v)
		}
	}
	slices.Sort(knobs)
	if len(knobs) > 0 {
		t.name += ":" + strings.Join(knobs, ":")
	}
	return t, nil
}

// Name implements engine.Policy.
func (t *Tidal) Name() string { return t.name }

// forecastConfig is the forecaster's configuration for a site of kind
// and gpus: window errors are learned on the cloud under
// admit_cloud=window only, where admitPath reads them.
func (t *Tidal) forecastConfig(kind string, gpus int) forecast.Config {
	return forecast.Config{Max: float64(gpus), Windows: t.admitWindow && kind == cluster.SiteCloud}
}

// observe records each edge and inference site's capacity now.
func (t *Tidal) observe(s *engine.Snapshot) {
	for _, site := range s.Cluster.Sites() {
		if site.Kind != cluster.SiteEdge && site.Kind != cluster.SiteInference && site.Kind != cluster.SiteCloud {
			continue
		}
		v := t.views[site.Name]
		if v == nil {
			f, err := forecast.New(t.forecastConfig(site.Kind, site.GPUs))
			if err != nil {
				continue // the default configuration is valid
			}
			v = &tideView{name: site.Name, kind: site.Kind, gpus: site.GPUs, f: f, pathAt: math.NaN(),
				perSrv: float64(site.GPUs) / float64(max(len(site.Nodes), 1)), bin: f.Config().Bin}
			t.views[site.Name] = v
		}
		now := float64(usable(s, &site))
		if v.seen && s.Now > v.lastAt {
			dt := s.Now - v.lastAt
			v.obs += dt
			v.down += (float64(v.gpus) - v.cur) * dt
		}
		if v.seen && now < v.cur {
			v.lost += v.cur - now
		}
		v.lastAt = s.Now
		v.varies = v.varies || (v.seen && now != v.cur)
		if !v.seen || now < v.low {
			v.low = now
		}
		v.seen, v.cur = true, now
		_ = v.f.Observe(s.Now, now) // rounds never go back in time
	}
}

// usable is the GPUs of site available to training now: on an edge site,
// those of servers wholly up (a job takes a whole server).
func usable(s *engine.Snapshot, site *cluster.Site) int {
	k := 0
	for _, id := range site.Nodes {
		n := &s.Cluster.Nodes[id]
		up := s.UpGPUs(n)
		if site.Kind == cluster.SiteEdge && up < n.GPUs {
			continue
		}
		k += up
	}
	return k
}

// plan computes, once per round, the site's planned capacity per bin
// ahead at Quantile and its running minimum, and the path at
// LaterQuantile that later admission plans on.
func (t *Tidal) plan(s *engine.Snapshot, v *tideView) {
	if v.pathAt == s.Now {
		return
	}
	v.pathAt = s.Now
	v.start, v.path = t.path(s, v, t.Quantile)
	v.later, v.vacate, v.offl, v.hold, v.roll = v.path, v.path, v.path, v.path, v.path
	if t.Source == "online" && v.varies {
		if t.RolloutMode != "off" && t.RollQuantile != t.Quantile {
			_, v.roll = t.path(s, v, t.RollQuantile)
		}
		if q := t.holdQuantile(v); t.HoldSafe && q != t.Quantile {
			_, v.hold = t.path(s, v, q)
		}
		if t.OffloadQuantile != t.Quantile {
			_, v.offl = t.path(s, v, t.OffloadQuantile)
		}
		if t.LaterQuantile != t.Quantile {
			_, v.later = t.path(s, v, t.LaterQuantile)
		}
		if t.VacateQuantile != t.Quantile {
			_, v.vacate = t.path(s, v, t.VacateQuantile)
		}
	}
	v.prefix = v.prefix[:0]
	m := v.cur
	v.prefix = append(v.prefix, m)
	for k := 1; k < len(v.path); k++ {
		m = math.Min(m, v.path[k])
		v.prefix = append(v.prefix, m)
	}
}

// holdQuantile is the quantile the held job's re-trial plans site v on:
// HoldBusyQuantile on a cloud seen down for at least HoldBusy of its
// GPU-time so far, HoldQuantile otherwise.
func (t *Tidal) holdQuantile(v *tideView) float64 {
	if t.HoldBusy > 0 && v.kind == cluster.SiteCloud && v.obs > 0 && v.gpus > 0 &&
		v.down/(float64(v.gpus)*v.obs) >= t.HoldBusy {
		return t.HoldBusyQuantile
	}
	return t.HoldQuantile
}

// path is the site's capacity per bin ahead at quantile q, from the start
// of bin 0 it returns (nil when planning on the present only), made wrong
// on purpose when Wrong says so.
func (t *Tidal) path(s *engine.Snapshot, v *tideView, q float64) (float64, []float64) {
	switch {
	case t.Source == "oracle":
		fut, ok := t.future[v.name]
		start := math.Floor(s.Now/v.bin) * v.bin
		path := make([]float64, tideBins)
		for k := range path {
			path[k] = v.cur
			if ok {
				path[k] = fut.Min(start+float64(k)*v.bin, start+float64(k+1)*v.bin)
			}
		}
		return start, path
	case t.Source == "off" || !v.varies:
		return s.Now, nil
	}
	extra := 0
	if t.Wrong == "shift" {
		extra = int(math.Round(t.ShiftH * 3600 / v.bin))
	}
	start, path := v.f.Path(tideBins+max(extra, 0), q)
	switch t.Wrong {
	case "shift":
		if extra >= 0 {
			path = path[extra:]
			break
		}
		// Seen late: the first bins repeat what the forecast says for now.
		late := make([]float64, len(path))
		for k := range late {
			late[k] = path[max(k+extra, 0)]
		}
		path = late
	case "collapse":
		for k := range path {
			if b := start + float64(k)*v.bin; b >= 86400 && b < 2*86400 {
				path[k] = 0
			}
		}
	case "noise":
		_, med := v.f.Path(tideBins, 0.5)
		z := math.Abs(normQuantile(q))
		h := fnv.New64a()
		h.Write([]byte(v.name))
		for k := range path {
			sigma := math.Abs(med[k]-path[k]) / math.Max(z, 0.1)
			r := rand.New(rand.NewPCG(h.Sum64(), uint64(math.Round((start+float64(k)*v.bin)/v.bin))))
			path[k] = math.Min(math.Max(path[k]+3*sigma*r.NormFloat64(), 0), float64(v.gpus))
		}
	}
	return start, path
}

// planned is the least of path (v's, from v.start) over bins k .. the bin
// holding until.
func (t *Tidal) planned(v *tideView, path []float64, k int, until float64) float64 {
	last := min(int(math.Floor((until-v.start)/v.bin)), len(path)-1)
	m := math.Inf(1)
	for i := k; i <= last; i++ {
		m = math.Min(m, path[i])
	}
	if math.IsInf(m, 1) {
		return v.cur
	}
	return m
}

// normQuantile is the standard normal's q-quantile.
func normQuantile(q float64) float64 {
	return math.Sqrt2 * math.Erfinv(2*q-1)
}

// safe is the GPUs of site the plan keeps available from now until until:
// the capacity now and the planned capacity of every later bin that
// begins at or before until.
func (t *Tidal) safe(s *engine.Snapshot, site string, until float64) float64 {
	v := t.views[site]
	if v == nil || v.kind == cluster.SiteCloud { // the cloud's forecast serves the hold re-trial only
		return math.Inf(1)
	}
	t.plan(s, v)
	if until <= s.Now || len(v.prefix) <= 1 {
		return v.cur
	}
	// Bins that begin at or before until: a drop at until itself counts
	// (capacity changes before the round at the same instant).
	k := int(math.Floor((until - v.start) / v.bin))
	k = min(max(k, 0), len(v.prefix)-1)
	return v.prefix[k]
}

// edgeCap is Flow's hook: the servers of an edge site the plan keeps up
// through the next Lead seconds, so no job is offloaded onto a server
// about to be taken; asked about the jobs running there (until +Inf), it
// moves them off before the drop only with EdgeVacate.
func (t *Tidal) edgeCap(s *engine.Snapshot, site string, until float64) int {
	v := t.views[site]
	if v == nil {
		return math.MaxInt / 2
	}
	if t.flow.pessimistic {
		// The hold re-trial: the servers kept up, at HoldQuantile, until
		// the held job's deadline.
		t.plan(s, v)
		if math.IsInf(until, 1) {
			until = t.flow.pessUntil
		}
		return int(math.Floor(math.Min(v.cur, t.planned(v, v.hold, 1, until))/v.perSrv + 1e-9))
	}
	if math.IsInf(until, 1) {
		if !t.EdgeVacate {
			return int(math.Floor(t.safe(s, site, s.Now)/v.perSrv + 1e-9)) // the jobs running there stay until reclaimed
		}
		t.plan(s, v)
		return int(math.Floor(math.Min(v.cur, t.planned(v, v.vacate, 1, s.Now+t.Lead))/v.perSrv + 1e-9))
	}
	t.plan(s, v)
	return int(math.Floor(math.Min(v.cur, t.planned(v, v.offl, 1, math.Min(until, s.Now+t.Lead)))/v.perSrv + 1e-9))
}

// edgeLater is Flow's hook: whether j meets its deadline on an edge server
// that the plan brings up later and keeps up until j ends. The servers in
// use now and the jobs promised one this round count against it.
func (t *Tidal) edgeLater(s *engine.Snapshot, j *fjob) bool {
	if math.IsInf(j.deadline, 1) {
		return false
	}
	for _, site := range s.Cluster.Sites() {
		v := t.views[site.Name]
		if site.Kind != cluster.SiteEdge || v == nil || t.Source == "off" {
			continue
		}
		t.plan(s, v)
		if len(v.later) <= 1 {
			continue
		}
		n := &s.Cluster.Nodes[site.Nodes[0]]
		end, _, ok := t.flow.edgeEnd(s, j, n)
		if !ok {
			continue
		}
		dur := end - s.Now
		busy := 0
		for _, st := range s.Jobs {
			if len(st.GPUs) > 0 && s.Cluster.NodeOf(st.GPUs[0]).Site == site.Name {
				busy++
			}
		}
		need := float64(busy+t.promised[site.Name]+1) * v.perSrv
		for k := 1; k < len(v.later); k++ {
			b := v.start + float64(k)*v.bin
			if b+dur > j.deadline {
				break
			}
			if t.planned(v, v.later, k, b+dur) >= need {
				t.promised[site.Name]++
				return true
			}
		}
	}
	return false
}

// Schedule implements engine.Policy.
func (t *Tidal) Schedule(s *engine.Snapshot) engine.Plan {
	t.observe(s)
	if t.promised == nil {
		t.promised = map[string]int{}
	}
	for site := range t.promised { // key by key: see tideRound.begin
		delete(t.promised, site)
	}
	tr := &t.round
	tr.begin(s)
	t.parkNodes = t.parkNodes[:0]
	if t.flow.reasonTo == nil { // made once: a closure made each round is allocated each round
		t.flow.reasonTo = func(st *engine.Status, text []byte, r engine.Reason) {
			if i, ok := tr.index(st.Job.ID); ok {
				lo := tr.mark()
				tr.buf = append(tr.buf, text...)
				tr.set(i, lo, r)
			}
		}
	}
	deadlines := false
	for _, st := range s.Jobs {
		if !t.Deadlines {
			break
		}
		deadlines = deadlines || st.Job.Deadline > 0
	}
	var plan engine.Plan
	if c, ok := t.flow.cloudOf(s); ok && deadlines {
		t.snap, t.cloudNow = s, c
		if t.RolloutMode != "off" && t.RollArrivals > 0 {
			t.record(s, c)
		}
		plan = t.flow.Schedule(s)
		t.snap = nil
		for _, j := range t.flow.swapped {
			if i, ok := tr.index(j.st.Job.ID); ok {
				lo := tr.mark()
				why := "held again: a newcomer with less work left took its place (Moore-Hodgson); "
				if slices.Contains(t.batchOut, j) {
					why = "held again: newcomers that meet took its place, more of them than jobs went out (swap_batch); "
				}
				tr.buf = append(tr.buf, why...)
				tr.buf = append(tr.buf, "admission tries it again each round while the whole cloud could still end it by t="...)
				tr.buf = strconv.AppendFloat(tr.buf, j.deadline, 'f', 0, 64)
				tr.buf = append(tr.buf, " s"...)
				tr.prependHeld(i, lo)
			}
		}
	}
	// The plan's Run is the round's own memory (tidal appends to the
	// planner's, whose room may not last).
	t.run = append(t.run[:0], plan.Run...)
	plan.Run = t.run
	for _, a := range plan.Run {
		if i, ok := tr.index(a.Job); ok {
			tr.slots[i].placed = tr.stamp
		}
	}
	if t.Hold {
		t.hold(s, &plan)
	}
	for _, id := range plan.Decline {
		i, ok := tr.index(id)
		if !ok {
			continue
		}
		tr.slots[i].declined = tr.stamp
		if asksOther(tr.jobs[i], t.cloudNow) {
			continue // the planner's reason says why: the types (appendOther)
		}
		lo := tr.mark()
		tr.buf = append(tr.buf, "declined: misses its deadline in the cloud, on the edge servers up now and on those the forecast brings up later"...)
		if t.Hold {
			tr.buf = append(tr.buf, ", and the whole cloud from now would not end it in time"...)
		}
		tr.prepend(i, lo, true)
	}
	left := t.left[:0]
	for i, st := range tr.jobs {
		if sl := &tr.slots[i]; sl.placed != tr.stamp && sl.declined != tr.stamp {
			left = append(left, st)
		}
	}
	t.left = left
	if t.Park && deadlines {
		left = t.park(s, &plan, left)
	}
	plan.Run = append(plan.Run, t.loan(s, left, len(plan.Run) > 0 || deadlines)...)
	for _, a := range plan.Run {
		i, ok := tr.index(a.Job)
		if !ok || tr.has(i) {
			continue
		}
		site := a.Site
		if site == "" && len(a.Nodes) > 0 {
			site = s.Cluster.Nodes[a.Nodes[0].Node].Site
		}
		lo := tr.mark()
		if v := t.views[site]; v != nil && v.kind == cluster.SiteEdge {
			tr.buf = append(tr.buf, "edge server on "...)
			tr.buf = append(tr.buf, site...)
			tr.buf = append(tr.buf, ": the forecast (q="...)
			tr.buf = strconv.AppendFloat(tr.buf, t.Quantile, 'g', -1, 64)
			tr.buf = append(tr.buf, ") keeps enough servers up until it ends"...)
		} else {
			tr.buf = strconv.AppendInt(tr.buf, int64(a.GPUs), 10)
			if a.GPUs == 1 {
				tr.buf = append(tr.buf, " GPU"...)
			} else {
				tr.buf = append(tr.buf, " GPUs"...)
			}
			tr.buf = append(tr.buf, ": EdgeFlow's share for its deadline"...)
		}
		tr.set(i, lo, engine.Reason{})
	}
	t.run = plan.Run // its room, for the next round
	plan.Reasons = tr.reasons()
	t.explain.PlanAppend(s, &plan, nil, nil) // the jobs it preempts or shrinks
	return plan
}

// park runs the deadline jobs of left that were admitted (and so wait for
// their cloud share) on edge servers the plan leaves idle and the forecast
// keeps up for ParkHold seconds: a job already there stays, then earliest
// deadlines first. It returns the jobs still left.
func (t *Tidal) park(s *engine.Snapshot, plan *engine.Plan, left []*engine.Status) []*engine.Status {
	used, perSite, room := emptyKeys(&t.parkUsed), emptyKeys(&t.parkPerSite), emptyKeys(&t.parkRoom)
	tr := &t.round
	for _, a := range plan.Run {
		for _, n := range a.Nodes {
			if nd := &s.Cluster.Nodes[n.Node]; nd.SiteKind == cluster.SiteEdge && !used[n.Node] {
				used[n.Node] = true
				perSite[nd.Site]++
			}
		}
	}
	for _, site := range s.Cluster.Sites() {
		if site.Kind != cluster.SiteEdge {
			continue
		}
		k := len(site.Nodes)
		if v := t.views[site.Name]; v != nil {
			k = int(math.Floor(t.safe(s, site.Name, s.Now+t.ParkHold)/v.perSrv + 1e-9))
		}
		room[site.Name] = k - perSite[site.Name]
	}
	admitted := func(st *engine.Status) bool {
		if st.Job.Deadline <= 0 || st.Job.Deadline <= s.Now {
			return false
		}
		if m, ok := plan.Memo[st.Job.ID]; ok {
			return m[efAdmitted] == 1
		}
		return st.Memo[efAdmitted] == 1
	}
	fits := func(st *engine.Status, n *cluster.Node) int {
		if t := st.Job.GPUType; t != "" && t != n.GPUType {
			return 0 // the engine would refuse the plan
		}
		if need, known := perf.TrainMemGiB[st.Job.Model]; known && n.GPUMem > 0 && need > n.GPUMem {
			return 0
		}
		g := min(n.GPUs, st.Job.MaxGPUs)
		if g < max(st.Job.MinGPUs, 1) {
			return 0
		}
		return g
	}
	take := func(st *engine.Status, n *cluster.Node) bool {
		g := fits(st, n)
		if g == 0 || used[n.ID] || s.UpGPUs(n) < n.GPUs || room[n.Site] <= 0 {
			return false
		}
		used[n.ID] = true
		room[n.Site]--
		t.parkNodes = append(t.parkNodes, engine.NodeGPUs{Node: n.ID, GPUs: g})
		k := len(t.parkNodes)
		plan.Run = append(plan.Run, engine.Assignment{Job: st.Job.ID, GPUs: g, GPUType: n.GPUType, Site: n.Site,
			Nodes: t.parkNodes[k-1 : k : k]})
		if i, ok := tr.index(st.Job.ID); ok {
			tr.slots[i].parked = tr.stamp
			lo := tr.mark()
			tr.buf = append(tr.buf, "parked on edge server "...)
			tr.buf = append(tr.buf, n.Name...)
			tr.buf = append(tr.buf, " until its cloud share starts: the forecast keeps it up for "...)
			tr.buf = strconv.AppendFloat(tr.buf, t.ParkHold, 'g', -1, 64)
			tr.buf = append(tr.buf, 's')
			tr.prepend(i, lo, false)
		}
		return true
	}
	parked := func(st *engine.Status) bool { // take marks it
		i, ok := tr.index(st.Job.ID)
		return ok && tr.slots[i].parked == tr.stamp
	}
	for _, st := range left {
		if len(st.GPUs) > 0 && admitted(st) {
			if n := s.Cluster.NodeOf(st.GPUs[0]); n.SiteKind == cluster.SiteEdge {
				take(st, n)
			}
		}
	}
	wait := t.parkWait[:0]
	for _, st := range left {
		if !parked(st) && admitted(st) {
			wait = append(wait, st)
		}
	}
	t.parkWait = wait
	t.sortParkWait(wait) // by deadline, ties in left's order (tidal_park_order.go)
	for _, st := range wait {
		for _, site := range s.Cluster.Sites() {
			if site.Kind != cluster.SiteEdge || room[site.Name] <= 0 {
				continue
			}
			for _, id := range site.Nodes {
				if take(st, &s.Cluster.Nodes[id]) {
					break
				}
			}
			if parked(st) {
				break
			}
		}
	}
	out := t.parkLeft[:0]
	for _, st := range left {
		if !parked(st) {
			out = append(out, st)
		}
	}
	t.parkLeft = out
	return out
}

// loan sizes the jobs in left by the knapsack over the pools: the training
// sites (unless the deadline planner already used them) and then each
// inference site, lending the GPUs its forecast keeps idle until Lead from
// now. It gives each job of left its reason (after the deadline planner's
// terms for one still waiting) and returns the assignments, in t's memory.
func (t *Tidal) loan(s *engine.Snapshot, left []*engine.Status, flowUsedTraining bool) []engine.Assignment {
	lent, unlent := t.lent, t.unlent
	if lent == nil {
		lent, unlent = map[string]int{}, map[string]int{}
		t.lent, t.unlent = lent, unlent
	}
	for site := range lent { // key by key: see tideRound.begin
		delete(lent, site)
	}
	for site := range unlent {
		delete(unlent, site)
	}
	// A site's forecast is of all its GPUs: a site of two GPU types (one
	// pool each) lends them in the order of its nodes until the forecast's
	// count is spent.
	all := loan.AppendPools(t.poolBuf, s, true, func(site *cluster.Site, gpuType string) int {
		if _, ok := lent[site.Name]; !ok {
			unlent[site.Name] = int(math.Floor(math.Min(t.safe(s, site.Name, s.Now+t.Lead), float64(usable(s, site))) + 1e-9))
		}
		n := min(unlent[site.Name], s.Available(site.Name, gpuType))
		unlent[site.Name] -= n
		lent[site.Name] += n
		return n
	})
	t.poolBuf = all
	pools := t.pools[:0]
	for _, p := range all {
		kind := s.Cluster.SiteOf(p.Site).Kind
		if kind == cluster.SiteEdge || (flowUsedTraining && !p.Infer) {
			continue
		}
		pools = append(pools, p)
	}
	t.pools = pools
	perHour := func(st *engine.Status, p loan.Pool) float64 {
		if t := st.Job.GPUType; t != "" && t != p.Type {
			return 0 // worth nothing: the knapsack gives it no GPUs of p
		}
		lo := max(st.Job.MinGPUs, 1)
		base := s.Remaining(st, lo, p.Type) * float64(lo)
		if base > 0 && !math.IsInf(base, 0) {
			return 3600 / math.Max(base, 1)
		}
		return 1
	}
	t.speedups.IdleOnly = true
	out, left := t.speedups.Knapsacks(s, pools, left, perHour, func(st *engine.Status) float64 { return t.restart.RestartFactor(s, st) })
	tr := &t.round
	for _, a := range out {
		i, ok := tr.index(a.Job)
		if !ok {
			continue
		}
		infer := false // the last pool of its site says (as a map of them would)
		for _, p := range pools {
			if p.Site == a.Site {
				infer = p.Infer
			}
		}
		lo := tr.mark()
		tr.buf = strconv.AppendInt(tr.buf, int64(a.GPUs), 10)
		if infer {
			tr.buf = append(tr.buf, " loaned GPUs of "...)
			tr.buf = append(tr.buf, a.Site...)
			tr.buf = append(tr.buf, ": the forecast keeps "...)
			tr.buf = strconv.AppendInt(tr.buf, int64(lent[a.Site]), 10)
			tr.buf = append(tr.buf, " idle through the next "...)
			tr.buf = strconv.AppendFloat(tr.buf, t.Lead, 'g', -1, 64)
			tr.buf = append(tr.buf, 's')
		} else {
			tr.buf = append(tr.buf, " GPUs of "...)
			tr.buf = append(tr.buf, a.Site...)
			tr.buf = append(tr.buf, ": knapsack of speedup per remaining hour"...)
		}
		tr.set(i, lo, engine.Reason{})
	}
	const waiting = "waiting: no GPUs free in the cloud, on the edge or on inference GPUs the forecast keeps idle"
	for k, st := range left {
		i, ok := tr.index(st.Job.ID)
		if !ok {
			continue
		}
		lo := tr.mark()
		if tr.has(i) {
			// Still waiting: the deadline planner's terms come first.
			tr.buf = append(tr.buf, tr.text(i)...)
			join(tr, lo, waiting)
			tr.set(i, lo, tr.reason(i))
			continue
		}
		tr.buf = append(tr.buf, waiting...)
		tr.set(i, lo, engine.Reason{Position: k + 1})
	}
	return out
}

// hold takes out of plan.Decline the jobs whose deadline the whole cloud
// could still meet from now, as admission's own plan counts it (the job
// alone on every cloud GPU): they wait, and admission tries them again. A
// job that plan cannot end in time is declined: admission would never take
// it back, and held, it would wait on an idle cloud until too late.
func (t *Tidal) hold(s *engine.Snapshot, plan *engine.Plan) {
	if len(plan.Decline) == 0 {
		return // most rounds: no map of every job to build
	}
	c, ok := t.flow.cloudOf(s)
	if !ok {
		return
	}
	tr := &t.round
	out := plan.Decline[:0]
	for _, id := range plan.Decline {
		i, ok := tr.index(id)
		if !ok {
			out = append(out, id)
			continue
		}
		st := tr.jobs[i]
		// The job alone, in memory kept from round to round (the planner's
		// are its round's jobs).
		alone := &t.alone
		t.aloneSet[0] = alone
		t.flow.fillJob(alone, s, c, st)
		t.flow.pass(s.Now, c.cap, t.aloneSet[:])
		if end := alone.end; alone.meets {
			if st.Memo[efHeld] != 1 {
				if plan.Memo == nil {
					plan.Memo = map[string]engine.Memo{}
				}
				m := st.Memo
				m[efHeld] = 1
				plan.Memo[id] = m
			}
			// The latest admission that still ends it in time, not the
			// end itself: it stays the same while the job waits, so a
			// live executor does not rewrite the job's status each round.
			// EdgeFlow's "declined; " would contradict "held".
			latest := st.Job.Deadline - (end - s.Now)
			lo := tr.mark()
			tr.buf = append(tr.buf, "held, not declined: the whole cloud would still end it by its deadline if admitted by t="...)
			tr.buf = strconv.AppendFloat(tr.buf, latest, 'f', 0, 64)
			tr.buf = append(tr.buf, " s; admission tries it again each round"...)
			tr.prependHeld(i, lo)
			continue
		}
		if st.Starts > 0 {
			// It ran while held (on loaned inference GPUs): the engine
			// declines only jobs that never ran, so it is admitted,
			// missing, as EdgeFlow's admitted jobs that miss are.
			if plan.Memo == nil {
				plan.Memo = map[string]engine.Memo{}
			}
			m := st.Memo
			m[efAdmitted] = 1
			plan.Memo[id] = m
			continue
		}
		out = append(out, id)
	}
	plan.Decline = out
}

// holdCap is Flow's hook for the hold re-trial: the cloud GPUs the
// forecast keeps at HoldQuantile from now until j's deadline, less
// HoldReserve (when -1: one node's, unless the cloud is one node).
func (t *Tidal) holdCap(s *engine.Snapshot, c cloud, j *fjob) int {
	capacity, forecast := float64(c.cap), float64(c.cap)
	if v := t.views[c.site]; v != nil {
		t.plan(s, v)
		forecast = math.Min(forecast, t.planned(v, v.hold, 1, j.deadline))
	}
	reserve := t.HoldReserve
	if reserve < 0 {
		// N-1: the plan holds with the largest node lost. A one-node
		// cloud has no such plan (every held job would be turned away):
		// there the forecast alone decides.
		reserve = 0
		if len(c.nodes) > 1 {
			reserve = c.perNode
		}
	}
	if t.HoldMin {
		return int(math.Floor(math.Min(forecast, capacity-float64(reserve)) + 1e-9))
	}
	return int(math.Floor(forecast+1e-9)) - reserve
}

// admitPath is admit_cloud=path (Flow.testPath): the cloud ahead as its
// forecast gives it at AdmitQuantile, bin by bin after the one now, at most
// its GPUs and at least the fewest it has been seen with; nil when the
// cloud has never changed (EdgeFlow's test). A node
// down now counts as down until the forecast brings it back, where
// EdgeFlow's test plans the GPUs up now for the whole future.
func (t *Tidal) admitPath(s *engine.Snapshot, c cloud) ([]float64, []int) {
	v := t.views[c.site]
	if v == nil || !v.varies || t.Source == "off" {
		return nil, nil
	}
	var start float64
	var path []float64
	if t.admitWindow && t.Source == "online" && t.Wrong == "" {
		start, path = v.f.WindowPath(tideBins, t.AdmitQuantile)
	} else {
		start, path = t.path(s, v, t.AdmitQuantile)
	}
	if path == nil {
		return nil, nil
	}
	ts, caps := t.admTs[:0], t.admCaps[:0]
	for k := 1; k < len(path); k++ {
		ts = append(ts, start+float64(k)*v.bin)
		// Never below the least the cloud has been seen with: a forecast
		// that says it collapses (wrong=collapse) would otherwise turn
		// every newcomer away on a cloud that has never been that low.
		g := math.Max(math.Min(path[k], float64(v.gpus)), v.low)
		caps = append(caps, int(math.Floor(g+1e-9)))
	}
	t.admTs, t.admCaps = ts, caps
	return ts, caps
}

// meanCap is admit_cloud=mean (Flow.testCap): the cloud GPUs up on average
// over what the rounds have observed so far (its GPUs less the share of
// GPU-time they saw down), which is all of them until a fault is seen.
// EdgeFlow's test plans on the GPUs up now for the whole future, so under
// faults it admits jobs whose plan ends them seconds before their
// deadlines on a cloud that loses GPU-time at that rate (docs/tidal.md,
// sixth pass).
func (t *Tidal) meanCap(s *engine.Snapshot, c cloud) int {
	v := t.views[c.site]
	if v == nil || v.obs <= 0 || v.gpus <= 0 {
		return c.cap
	}
	down := v.down / (float64(v.gpus) * v.obs)
	return int(math.Floor(float64(v.gpus)*(1-down) + 1e-9))
}

// wholeCloudEnd is when st would end if it had the whole cloud c from now,
// at the GPU count (a power of two up to its maximum, or oddSize) that ends it first,
// start or restart included: +Inf when no count can run it.
func wholeCloudEnd(s *engine.Snapshot, c cloud, st *engine.Status) float64 {
	delay := s.Model.Costs(st.Job).Start
	if st.Starts > 0 {
		delay = s.Model.Costs(st.Job).Restart
	}
	best := math.Inf(1)
	try := func(g int) {
		if r := s.Remaining(st, g, c.gpuType); r > 0 && !math.IsInf(r, 0) {
			best = math.Min(best, s.Now+delay+r)
		}
	}
	for g := 1; g <= min(st.Job.MaxGPUs, c.cap); g *= 2 {
		if g >= st.Job.MinGPUs {
			try(g)
		}
	}
	if n := oddSize(st.Job.MinGPUs, min(st.Job.MaxGPUs, c.cap)); n > 0 {
		try(n)
	}
	return best
}

// mhSwap is swap=mh (Flow.swap): Moore-Hodgson's rule for the most jobs on
// time on one machine, at admission. j, a newcomer in its first round that
// admission turns away, takes the place of an admitted job x of its
// priority, on no edge server, that has not run for more than SwapAge
// seconds (-1: never ran), has more work left than j (oneGPUWork) and that
// the whole cloud could still end in time, if with x out j meets and every
// job of base that met without j still meets. The SwapTries such jobs with
// the most work left are tried, most first. x goes back to being held:
// admission tries it again each round (held jobs' stricter test), and
// tidal's hold declines it once admission's plan, it alone on the whole
// cloud, would end it too late (x is chosen by wholeCloudEnd, the
// integrated remaining time, which swap=mh was tuned with).
// It returns the new set, or nil with the outcomes of base as admission
// had them.
func (t *Tidal) mhSwap(test func([]*fjob), base, trial []*fjob, j *fjob, meets []bool) []*fjob {
	s := t.snap
	if s == nil || j.held || math.IsInf(j.deadline, 1) {
		return nil
	}
	wj := oneGPUWork(j)
	var out []*fjob
	for _, x := range base {
		if !x.admitted || x.edge >= 0 || math.IsInf(x.deadline, 1) || x.st.Job.Priority != j.st.Job.Priority || !(oneGPUWork(x) > wj) {
			continue
		}
		if x.st.FirstStart >= 0 && (t.SwapAge < 0 || s.Now-x.st.FirstStart > t.SwapAge) {
			continue // it has run for too long to go out
		}
		if wholeCloudEnd(s, t.cloudNow, x.st) > x.deadline {
			continue // out, it could never come back
		}
		out = append(out, x)
	}
	slices.SortStableFunc(out, func(a, b *fjob) int { return cmp.Compare(oneGPUWork(b), oneGPUWork(a)) })
	if t.SwapRoom != 0 && len(out) > 0 {
		test(base)
		t.roomBase.copyFrom(t.flow.last)
	}
	n := min(len(out), t.SwapTries)
	tries := out[:n:n] // appends below copy: out stays as it is
	for _, x := range out[n:] {
		if t.SwapWaiting >= 0 && len(tries)-n >= t.SwapWaiting {
			break
		}
		if x.st.FirstStart < 0 {
			tries = append(tries, x)
		}
	}
	for _, x := range tries {
		set := slices.DeleteFunc(slices.Clone(trial), func(y *fjob) bool { return y == x })
		test(set)
		ok := j.meets
		for i, b := range base {
			if b != x && meets[i] && !b.meets && !math.IsInf(b.deadline, 1) {
				ok = false
			}
		}
		if ok && t.SwapRoom != 0 {
			ok = roomAtLeast(t.flow.last, &t.roomBase, t.SwapRoom)
		}
		if ok && t.RolloutMode != "off" {
			// The play of both, continued by EdgeFlow's rule: the
			// exchange only if it meets strictly more.
			c := t.cloudNow
			ok = t.play(s, c, set, nil, c.cap) > t.play(s, c, trial, j, c.cap)
		}
		if ok {
			t.flow.swapped = append(t.flow.swapped, x)
			x.admitted = false
			return set
		}
	}
	test(base) // the outcomes (and edge servers) of the set as it stays
	return nil
}

// batchSwap is swap_batch=K (Flow.batch): after a round's admission, the
// newcomers it declined (not held jobs) are tried together, Moore and
// Hodgson's way: all of them in, then, while a job misses that must
// meet (a newcomer still in, or a job that met before), the one with the
// most work left among those missing goes out, an admitted job only if
// it is on no edge server and of the newcomers' lowest priority or below
// (else the newcomer missing with the most work goes). The exchange is
// made if at most K admitted jobs went out and strictly more newcomers
// stayed in; the jobs out are held again, as swap=mh's.
func (t *Tidal) batchSwap(test func([]*fjob), base, declined []*fjob) ([]*fjob, []*fjob) {
	t.batchOut = t.batchOut[:0]
	var news []*fjob
	class := math.MaxInt
	for _, j := range declined {
		if !j.held && !math.IsInf(j.deadline, 1) {
			news = append(news, j)
			class = min(class, j.class)
		}
	}
	if len(news) < 2 {
		return base, declined
	}
	test(base)
	must := map[*fjob]bool{}
	for _, x := range base {
		if x.meets && !math.IsInf(x.deadline, 1) {
			must[x] = true
		}
	}
	isNew := map[*fjob]bool{}
	for _, j := range news {
		must[j], isNew[j] = true, true
	}
	mayGo := func(y *fjob) bool { return isNew[y] || y.admitted && y.edge < 0 && y.class <= class }
	byOrd := func(a, b *fjob) int { return cmp.Compare(a.ord, b.ord) }
	trial := slices.Clone(base)
	for _, j := range news {
		at, _ := slices.BinarySearchFunc(trial, j, byOrd)
		trial = slices.Insert(trial, at, j)
	}
	var out []*fjob
	in := len(news)
	for in > len(out) && len(out) <= t.SwapBatch {
		test(trial)
		// worst: the job missing that must meet with the most work left,
		// among those that may go; blocked: one that may not go misses,
		// so a newcomer goes instead.
		var worst, worstNew *fjob
		blocked := false
		for _, y := range trial {
			switch {
			case !must[y] || y.meets:
			case !mayGo(y):
				blocked = true
			default:
				if worst == nil || oneGPUWork(y) > oneGPUWork(worst) {
					worst = y
				}
				if isNew[y] && (worstNew == nil || oneGPUWork(y) > oneGPUWork(worstNew)) {
					worstNew = y
				}
			}
		}
		if worst == nil && !blocked {
			break // every job that must meet meets
		}
		if blocked && worstNew == nil {
			for _, y := range trial { // a newcomer goes, the one with most work
				if isNew[y] && (worstNew == nil || oneGPUWork(y) > oneGPUWork(worstNew)) {
					worstNew = y
				}
			}
		}
		if blocked || worst == nil {
			worst = worstNew
		}
		if worst == nil {
			break
		}
		trial = slices.DeleteFunc(trial, func(y *fjob) bool { return y == worst })
		if isNew[worst] {
			in--
			must[worst] = false
		} else {
			out = append(out, worst)
		}
	}
	ok := in > len(out) && len(out) <= t.SwapBatch
	if ok {
		test(trial)
		for _, y := range trial {
			ok = ok && (!must[y] || y.meets)
		}
	}
	if !ok {
		test(base) // the outcomes (and edge servers) of the set as it stays
		return base, declined
	}
	for _, y := range out {
		y.admitted = false
		t.flow.swapped = append(t.flow.swapped, y)
		t.batchOut = append(t.batchOut, y)
	}
	// The newcomers still in are those still bound to meet.
	return trial, slices.DeleteFunc(declined, func(j *fjob) bool { return isNew[j] && must[j] })
}

// roomAtLeast reports whether a leaves at least as many free GPU-seconds
// as b from their common start to every time up to within seconds later
// (-1: every time): the cumulative free capacity of a dominates b's at
// every segment boundary of either in that span, and at its end. Both
// begin at the same time, on the same cloud.
func roomAtLeast(a, b *timeline, within float64) bool {
	now := a.t[0]
	until := math.Inf(1)
	if within >= 0 {
		until = now + within
	}
	// Walk both boundary lists in order, integrating each timeline's free
	// GPUs up to each boundary; a small tolerance absorbs rounding.
	var ia, ib int
	var ca, cb, at float64 = 0, 0, now
	for {
		next := until
		if ia+1 < len(a.t) {
			next = math.Min(next, a.t[ia+1])
		}
		if ib+1 < len(b.t) {
			next = math.Min(next, b.t[ib+1])
		}
		if math.IsInf(next, 1) {
			// Past both timelines' last boundaries: a falls behind in
			// time if it has fewer GPUs free from then on.
			return a.free[ia] >= b.free[ib]
		}
		ca += float64(a.free[ia]) * (next - at)
		cb += float64(b.free[ib]) * (next - at)
		if ca < cb-1e-6*math.Max(1, math.Abs(cb)) {
			return false
		}
		if next >= until {
			return true
		}
		at = next
		for ia+1 < len(a.t) && a.t[ia+1] <= at {
			ia++
		}
		for ib+1 < len(b.t) && b.t[ib+1] <= at {
			ib++
		}
	}
}

// oneGPUWork is x's work left in GPU-seconds on its fewest GPUs, where it
// runs most efficiently and where minimum satisfactory shares mostly are
// (+Inf when it cannot run). On the ITP deadline trace every job has about
// the same GPU-seconds on the GPUs it asked for, so that count would not
// tell jobs apart.
func oneGPUWork(x *fjob) float64 {
	if len(x.levels) == 0 || x.rates[0] <= 0 {
		return math.Inf(1)
	}
	return float64(x.levels[0]) * x.rem / x.rates[0]
}

// ProgressOnDemand implements engine.ProgressOnDemand: tidal reads
// progress only through the snapshot (its EdgeFlow planner, Flow.jobs;
// Snapshot.Remaining in its loans and its whole-cloud end; the knapsacks'
// speedups), never Status.Progress. Like EdgeFlow's, its rule reads every
// active job each round; where the simulator keeps every job current
// anyway (scenarios' sites, job agents) it changes nothing.
func (t *Tidal) ProgressOnDemand() bool { return true }
