package fair

import "math"

// The auction as it was before themisAuction (84 CPU-s for one decision at
// 10,000 GPUs: one knapsack over all bidders per winner), kept to compare
// the fast one against (TestThemisAuctionMatchesReference).

func refPartialAllocation(bids []themisBid, budget int) (sold, kept []int) {
	best, _ := refMaxGain(bids, budget, -1)
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
		_, without := refMaxGain(bids, budget, i)
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

// refMaxGain picks, for each bidder but skip, a count (or 0) with total at
// most budget maximising the total gain (sum of log(rho(0)/rho(k)), the log
// of the product of 1/rho up to a constant). Ties keep fewer GPUs for
// later bidders. It returns the counts and the total.
func refMaxGain(bids []themisBid, budget, skip int) ([]int, float64) {
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
