package fair

import (
	"cmp"
	"fmt"
	"math"
	"slices"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/policy/internal/alloc"
	"github.com/tide-sched/tide/policy/internal/explain"
)

// themisPolicies registers the policies this file defines; Policies calls it.
func themisPolicies(register func(contract.Info)) {
	register(contract.Info{
		Name: "themis",
		Summary: "Themis (NSDI'20): finish-time fairness; each lease, GPUs whose lease ended are auctioned among " +
			"the jobs with the worst rho by a partial-allocation auction, the rest go to the others",
		Knobs: "f=0.8: fairness knob: the auction is offered to the ceil((1-f) x N) contending jobs with the " +
			"worst rho (f=0: all of them; f near 1: only the worst); lease=600: seconds a job keeps GPUs it won " +
			"before they go back to auction",
		Defaults: DefaultThemis,
		Build:    contract.Typed(DefaultThemis, func(_ contract.Context, k Themis) (*Themis, error) { return NewThemis(k) }),
	})
}

// Themis is finish-time-fair scheduling (Mahajan et al., NSDI'20), with
// each job as an app.
//
// Finish-time fairness rho = T_shared / T_independent. T_independent is the
// job's run time on its own 1/N share of the cluster (N = active jobs, C
// GPUs): its whole work on its GPU count n, stretched by n·N/C when the
// share C/N is below n (time-slicing a rigid job). T_shared with k GPUs
// from now is its age plus its remaining time on k GPUs; with none it is
// its age, one more lease and its remaining time on n.
//
// Each round, running jobs whose lease (Lease seconds from their last
// start) has not ended keep their GPUs. The other GPUs are offered to the
// ceil((1-F)·M) jobs with the worst current rho among the M contenders
// (jobs not keeping GPUs). Each bids rho for each GPU count it can use;
// the auction picks the counts maximising the product of 1/rho (exactly,
// by dynamic programming over GPUs), then applies Themis' partial
// allocation: winner i keeps a fraction c_i of its GPUs, c_i being the
// others' product of 1/rho with i present over the same without i. An
// elastic winner keeps floor(c_i·k) GPUs (nothing below its minimum); a
// rigid one keeps all when c_i >= 1/2 and none otherwise [our choice: a
// gang cannot run on a fraction]. What is withheld or unsold goes to the
// remaining jobs, worst rho first (work conservation).
type Themis struct {
	F     float64 `knob:"f"`     // in [0, 1)
	Lease float64 `knob:"lease"` // seconds, > 0
}

// DefaultThemis holds Themis' default knobs.
var DefaultThemis = Themis{F: 0.8, Lease: 600}

// NewThemis builds Themis with the knobs k holds, refusing values out of
// range.
func NewThemis(k Themis) (*Themis, error) {
	if k.F < 0 || k.F >= 1 {
		return nil, fmt.Errorf("policy themis: f must be in [0, 1), got %v", k.F)
	}
	if !(k.Lease > 0) {
		return nil, fmt.Errorf("policy themis: lease must be > 0 seconds, got %v", k.Lease)
	}
	return &k, nil
}

// Name implements engine.Policy.
func (t *Themis) Name() string { return "themis" }

// themisBid is one contender: rho for each GPU count it can hold.
type themisBid struct {
	st     *engine.Status
	counts []int     // usable GPU counts, ascending
	gain   []float64 // log(rho(0) / rho(count))
	rho    float64   // rho now, on what it holds
}

// Rho returns st's finish-time fairness if it holds k GPUs from now on
// (k = 0: it waits one more lease), with active jobs sharing the cluster.
func (t *Themis) Rho(s *engine.Snapshot, st *engine.Status, k, active int) float64 {
	n := st.Job.GPUs
	share := float64(s.Available("", "")) / float64(max(active, 1))
	alone := perfRemaining(s, st, n, 0)
	tid := alone * math.Max(1, float64(n)/share)
	age := s.Now - st.Job.Submit
	var tsh float64
	if k == 0 {
		tsh = age + t.Lease + perfRemaining(s, st, n, st.Progress)
	} else {
		tsh = age + perfRemaining(s, st, k, st.Progress)
	}
	if !(tid > 0) {
		return 1
	}
	return tsh / tid
}

// perfRemaining is st's time to finish from progress p on k packed GPUs
// of the type it runs on (or asks for).
func perfRemaining(s *engine.Snapshot, st *engine.Status, k int, p float64) float64 {
	t := st.Alloc.GPUType
	if t == "" {
		t = st.Job.GPUType
	}
	if t == "" {
		t = s.Cluster.GPUTypes()[0]
	}
	c := *st
	c.Progress = p
	return s.Remaining(&c, k, t)
}

// Schedule implements engine.Policy.
func (t *Themis) Schedule(s *engine.Snapshot) engine.Plan {
	free := alloc.NewPool(s)
	var plan engine.Plan
	offered := s.Available("", "")
	var bids []themisBid
	active := len(s.Jobs)
	for _, st := range s.Jobs {
		if len(st.GPUs) > 0 && s.Now-st.LastStart < t.Lease {
			if a, ok := free.Take(st, len(st.GPUs)); ok {
				plan.Run = append(plan.Run, a)
				offered -= len(st.GPUs)
				continue
			}
		}
		b := themisBid{st: st, rho: t.Rho(s, st, len(st.GPUs), active)}
		r0 := t.Rho(s, st, 0, active)
		for k := st.Job.MinGPUs; k <= st.Job.MaxGPUs; k++ {
			if !st.Job.Elastic() && k != st.Job.GPUs {
				continue
			}
			g := math.Log(r0 / t.Rho(s, st, k, active))
			if math.IsNaN(g) || math.IsInf(g, 0) {
				continue // cannot run on k GPUs
			}
			b.counts = append(b.counts, k)
			b.gain = append(b.gain, g)
		}
		bids = append(bids, b)
	}
	slices.SortStableFunc(bids, func(a, b themisBid) int { return -cmp.Compare(a.rho, b.rho) })
	m := int(math.Ceil((1 - t.F) * float64(len(bids))))
	if len(bids) > 0 {
		m = max(m, 1)
	}
	bidders, rest := bids[:m], bids[m:]
	sold, kept := partialAllocation(bidders, offered)
	var losers, withheld []themisBid
	for i, b := range bidders {
		switch {
		case sold[i] == 0:
			losers = append(losers, b)
		case kept[i] == 0:
			withheld = append(withheld, b)
		default:
			if a, ok := free.Take(b.st, kept[i]); ok {
				plan.Run = append(plan.Run, a)
			}
		}
	}
	// Leftovers, worst rho first: bidders who won nothing, the jobs that
	// did not bid, and last the winners whose GPUs were all withheld.
	for _, b := range slices.Concat(losers, rest, withheld) {
		for k := len(b.counts) - 1; k >= 0; k-- {
			if a, ok := free.Take(b.st, b.counts[k]); ok {
				plan.Run = append(plan.Run, a)
				break
			}
		}
	}
	order := make([]*engine.Status, len(bids))
	rho := make(map[*engine.Status]float64, len(bids))
	for i, b := range bids {
		order[i], rho[b.st] = b.st, b.rho
	}
	explain.Plan(s, &plan, order, func(st *engine.Status) string {
		return fmt.Sprintf("finish-time fairness rho %.2f (the worst off bid first; %d of %d bids go to auction)", rho[st], m, len(bids))
	})
	return plan
}

// partialAllocation runs the auction over budget GPUs and returns each
// bidder's count in the welfare-maximising allocation (sold) and what it
// keeps after Themis' partial allocation (kept); 0 = nothing.
func partialAllocation(bids []themisBid, budget int) (sold, kept []int) {
	best, _ := maxGain(bids, budget, -1)
	out := make([]int, len(bids))
	for i, k := range best {
		if k == 0 {
			continue
		}
		// Others' welfare with i present vs with i absent.
		with := 0.0
		for j, kj := range best {
			if j != i && kj > 0 {
				with += bids[j].gainOf(kj)
			}
		}
		_, without := maxGain(bids, budget, i)
		c := math.Exp(with - without)
		b := bids[i]
		if b.st.Job.Elastic() {
			if keep := int(math.Floor(c*float64(k) + 1e-9)); keep >= b.st.Job.MinGPUs {
				out[i] = keep
			}
		} else if c >= 0.5 {
			out[i] = k
		}
	}
	return best, out
}

func (b themisBid) gainOf(k int) float64 {
	if i, ok := slices.BinarySearch(b.counts, k); ok {
		return b.gain[i]
	}
	return 0
}

// maxGain picks, for each bidder but skip, a count (or 0) with total at
// most budget maximising the total gain (sum of log(rho(0)/rho(k)), the log
// of the product of 1/rho up to a constant). Ties keep fewer GPUs for
// later bidders. It returns the counts and the total.
func maxGain(bids []themisBid, budget, skip int) ([]int, float64) {
	n := len(bids)
	// dp[i][g]: best gain of bidders i.. with g GPUs left.
	dp := make([][]float64, n+1)
	for i := range dp {
		dp[i] = make([]float64, budget+1)
	}
	for i := n - 1; i >= 0; i-- {
		for g := 0; g <= budget; g++ {
			v := dp[i+1][g]
			if i != skip {
				for c, k := range bids[i].counts {
					if k <= g && bids[i].gain[c] > 0 {
						v = math.Max(v, bids[i].gain[c]+dp[i+1][g-k])
					}
				}
			}
			dp[i][g] = v
		}
	}
	out := make([]int, n)
	g := budget
	for i := 0; i < n; i++ {
		if i == skip {
			continue
		}
		for c, k := range bids[i].counts {
			if k > g || !(bids[i].gain[c] > 0) {
				continue
			}
			if v := bids[i].gain[c] + dp[i+1][g-k]; v > dp[i+1][g] && math.Abs(v-dp[i][g]) <= 1e-12*math.Max(1, dp[i][g]) {
				out[i] = k
				break
			}
		}
		g -= out[i]
	}
	return out, dp[0][budget]
}
