package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func TestSummarizeSites(t *testing.T) {
	r := &Run{Policy: "p", TotalGPUs: 6,
		Jobs: []JobRecord{
			{ID: "a", Submit: 0, Start: 0, Finish: 100, Deadline: 100, GPUSeconds: 200, EdgeGPUSeconds: 3600, CrossSiteMoves: 1, MigrationSeconds: 30, Priority: 1},
			{ID: "b", Submit: 0, Start: 0, Finish: 200, Deadline: 150, GPUSeconds: 400, InferenceGPUSeconds: 7200, IntraSiteMoves: 2, Reclaims: 1},
			{ID: "c", Submit: 0, Start: -1, Finish: -1, Deadline: 50, State: "declined", Priority: 1},
		},
		Sites: []SiteUsage{
			{Name: "cloud", Kind: "cloud", GPUs: 4, UpGPUSeconds: 800, AllocGPUSeconds: 400},
			{Name: "edge", Kind: "edge", GPUs: 2, UpGPUSeconds: 100, AllocGPUSeconds: 75},
		},
		InferenceWaits: 2, InferenceWaitSeconds: 12,
	}
	s := Summarize(r)
	ss := s.Sites
	if ss == nil {
		t.Fatal("no site summary")
	}
	near := func(name string, got, want float64) {
		if math.Abs(got-want) > 1e-9 {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	near("cloud utilisation", ss.Sites[0].Utilization, 0.5)
	near("cloud up fraction", ss.Sites[0].UpFraction, 800.0/(4*200))
	near("edge utilisation", *ss.EdgeUtilization, 0.75)
	near("edge GPU-h", ss.HarvestedEdgeGPUHours, 1)
	near("inference GPU-h", ss.HarvestedInferenceGPUHours, 2)
	near("cross moves per job", ss.CrossSiteMovesPerJob, 1.0/3)
	near("intra moves per job", ss.IntraSiteMovesPerJob, 2.0/3)
	near("migration s per job", ss.MigrationSecondsPerJob, 10)
	near("reclaims per job", ss.ReclaimsPerJob, 1.0/3)
	if ss.InferenceWaits != 2 || ss.InferenceWaitSeconds != 12 || s.Declined != 1 {
		t.Errorf("waits %d %v declined %d", ss.InferenceWaits, ss.InferenceWaitSeconds, s.Declined)
	}
	near("deadline met", *s.DeadlineMetFrac, 1.0/3)
	if len(s.Priorities) != 2 || s.Priorities[0].Priority != 1 || *s.Priorities[0].DeadlineMetFrac != 0.5 || *s.Priorities[1].DeadlineMetFrac != 0 {
		t.Errorf("priorities %+v", s.Priorities)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, []Summary{s, Summarize(&Run{Policy: "plain", Jobs: r.Jobs[:1]})}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"site edge GPU utilisation (%)", "75.0", "harvested from edge (GPU-h)", "deadlines met, priority 1 (%)", "moves between sites per job"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("table lacks %q:\n%s", want, b.String())
		}
	}
	if Summarize(&Run{Jobs: r.Jobs}).Sites != nil {
		t.Error("a run without sites has a site summary")
	}
}
