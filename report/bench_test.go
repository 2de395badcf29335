package report

import (
	"fmt"
	"testing"

	"github.com/tide-sched/tide/cputime"
)

// BenchmarkReport times what `tide sim --report` adds to a run: the
// summary (JCTs, fairness, the timeline's integrals) and the report
// directory (per-job CSV, summary.json, report.html) of one run, at two
// sizes ten times apart with as many timeline samples as jobs. ns/job is
// the cost per job: about the same at both sizes when the report's cost
// grows linearly with the jobs (docs/scale.md). cpu-ns/job is the same
// in CPU time (the process's, the garbage collector's included), the
// figure to compare on a loaded machine.
//
//	go test ./report -run '^$' -bench Report -benchtime 3x
func BenchmarkReport(b *testing.B) {
	for _, n := range []int{10000, 100000} {
		r := synthRun("bench", 1, n, n)
		b.Run(fmt.Sprintf("%djobs", n), func(b *testing.B) {
			dir := b.TempDir()
			b.ReportAllocs()
			cpu := cputime.Process()
			for b.Loop() {
				_ = Summarize(r)
				if err := WriteDir(dir, MetaOf([]*Run{r}), []*Run{r}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(n), "ns/job")
			b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N)/float64(n), "cpu-ns/job")
		})
	}
}
