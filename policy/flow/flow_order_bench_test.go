package flow

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// BenchmarkFlowOrder times the order of a round's jobs alone (Flow.jobs'
// sort, issue 19) in a round where one job ends and one arrives, with n
// jobs active: "kept" is sortJobs, starting from the last round's order,
// "full" the stable sort of every job it replaced. Deadlines are spread
// over submission (the engine's order), priorities 0-2, so the snapshot's
// order is far from the order by priority then deadline; "-near" are
// BenchmarkDecision's jobs, one priority and each deadline 4 h after
// submission, so the snapshot's order is the order already. A round
// includes the end, the arrival and refilling the jobs (as Flow.jobs
// does, without the model's rates), the same in both; it reports its CPU
// time (cpu-ns/op) beside ns/op; "fill" is that part alone (no order).
//
//	go test ./policy/flow -run '^$' -bench FlowOrder -benchtime 2000x
func BenchmarkFlowOrder(b *testing.B) {
	for _, n := range []int{1000, 5000} {
		for _, mode := range []string{"kept", "full", "kept-near", "full-near", "fill"} {
			near := strings.HasSuffix(mode, "-near")
			b.Run(fmt.Sprintf("%d/%s", n, mode), func(b *testing.B) {
				r := rand.New(rand.NewPCG(1, 2))
				var m flowMem
				var jobs []*engine.Status
				slot := 0
				add := func() {
					j := &job.Job{ID: fmt.Sprint(slot), Priority: r.IntN(3), Deadline: float64(slot) + r.Float64()*3600}
					if near { // BenchmarkDecision's jobs: one class, deadlines in submission order
						j.Priority, j.Deadline = 0, float64(slot)+4*3600
					}
					jobs = append(jobs, &engine.Status{Job: j, Slot: slot})
					slot++
				}
				for range n {
					add()
				}
				fill := func() {
					for i, st := range jobs {
						if i == len(m.pool) {
							m.pool = append(m.pool, new(fjob))
						}
						*m.pool[i] = fjob{st: st, deadline: st.Job.Deadline}
					}
				}
				fill()
				m.sortJobs(jobs)
				var sink []*fjob
				b.ReportAllocs()
				b.ResetTimer()
				cpu := cputime.Process()
				for range b.N {
					k := r.IntN(len(jobs))
					jobs = slices.Delete(jobs, k, k+1)
					add()
					fill()
					switch {
					case mode == "fill": // the round without the order, for its cost
						sink = append(m.js[:0], m.pool[:len(jobs)]...)
						m.js = sink
					case !strings.HasPrefix(mode, "full"):
						sink = m.sortJobs(jobs)
					default:
						sink = fullFlowSortInto(m.js[:0], m.pool[:len(jobs)])
						m.js = sink
					}
				}
				b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
				if len(sink) != n || math.IsNaN(sink[0].deadline) {
					b.Fatal("lost jobs")
				}
			})
		}
	}
}
