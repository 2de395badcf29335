package bound

import (
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/tide-sched/tide/forecast"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/solver"
	"github.com/tide-sched/tide/solver/solvertest"
)

// BenchmarkDeadlines: n jobs (work 2,000-40,000 at sqrt(g) per second,
// arriving over a day, due 2-20 hours later) on a 16-GPU cloud that loses
// a node for an hour every 12 hours and a 4-server edge. A shipped
// scenario's point is BenchmarkScenarioPoint.
func BenchmarkDeadlines(b *testing.B) {
	solvertest.Require(b)
	for _, n := range []int{50, 100, 150} {
		r := rand.New(rand.NewPCG(1, uint64(n)))
		var js []*job.Job
		for i := range n {
			at := r.Float64() * 86400
			js = append(js, &job.Job{ID: fmt.Sprint(i), Submit: at, Deadline: at + 7200 + r.Float64()*64800,
				Work: 2000 + r.Float64()*38000, GPUs: 1, MinGPUs: 1, MaxGPUs: 32})
		}
		var cloud forecast.Series
		for t := 0.0; t < 3*86400; t += 43200 {
			cloud = append(cloud, forecast.Point{T: t, V: 16}, forecast.Point{T: t + 30000, V: 8}, forecast.Point{T: t + 33600, V: 16})
		}
		pools := []Pool{
			{Name: "cloud", GPUTypes: []string{"x"}, PerNode: 8, GPUs: 16, Capacity: cloud},
			{Name: "edge", GPUTypes: []string{"x"}, PerNode: 1, GPUs: 4, MaxJob: 1},
		}
		b.Run(fmt.Sprintf("jobs=%d", n), func(b *testing.B) {
			var res Result
			for range b.N {
				var err error
				if res, err = Deadlines(js, sqrtModel{}, pools, solver.Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(res.Bound), "bound")
			b.ReportMetric(float64(res.Windows), "windows")
		})
	}
}
