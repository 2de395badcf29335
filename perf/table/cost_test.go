package table

import (
	"math"
	"testing"
)

func TestElasticFlowCosts(t *testing.T) {
	cases := []struct {
		n                int
		restart, rescale float64
	}{
		// 1 GPU: 2 + 27 + 2*(0+1) = 31; without restart 2 + 2 = 4.
		{1, 31, 4},
		// 0 or negative counts as 1.
		{0, 31, 4},
		{-3, 31, 4},
		// 2 GPUs: 29 + 2*2 = 33; 2 + 4 = 6.
		{2, 33, 6},
		// 8 GPUs: 29 + 2*4 = 37; 2 + 8 = 10.
		{8, 37, 10},
		// 64 GPUs: 29 + 2*7 = 43; 2 + 14 = 16.
		{64, 43, 16},
		// 3 GPUs: real log2, as Python's math.log(3, 2).
		{3, 29 + 2*(math.Log2(3)+1), 2 + 2*(math.Log2(3)+1)},
	}
	for _, c := range cases {
		if got := ElasticFlowRestartCost(c.n); !near(got, c.restart) {
			t.Errorf("ElasticFlowRestartCost(%d) = %v, want %v", c.n, got, c.restart)
		}
		if got := ElasticFlowRescaleCost(c.n); !near(got, c.rescale) {
			t.Errorf("ElasticFlowRescaleCost(%d) = %v, want %v", c.n, got, c.rescale)
		}
		got := ElasticFlowCosts(c.n)
		if !near(got.Start, c.rescale) || !near(got.Resize, c.rescale) || !near(got.Restart, c.restart) {
			t.Errorf("ElasticFlowCosts(%d) = %+v", c.n, got)
		}
	}
}
