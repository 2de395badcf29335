package sim_test

import (
	"testing"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
)

// TestTidalHoldsOnlyWhatItCanAdmit: tidal holds a job admission turns away
// only while admission's own plan could still end it in time on the whole
// cloud. Workload-6's first 60 jobs, each with a deadline, on a cloud of
// 8 T4 and four 2-GPU edge servers: deepspeech2-51 ends in time on the
// whole cloud by its integrated remaining time but never by the rate the
// plan gives it, so tidal used to hold it on an idle cloud until the
// simulator stopped the run as stuck. Every job must end, or be declined.
func TestTidalHoldsOnlyWhatItCanAdmit(t *testing.T) {
	w6, m6, _ := workload6(t)
	edge, ec := perf.Scaled{Model: m6, Type: "v100", Ref: "t4", Lambda: 0.8}, edgeCluster(t)
	jobs := (&assemble.Inputs{Jobs: deadlineJobs(w6[:60]), Cluster: ec, Model: edge, CapToSite: true}).JobsFor(policy.Info{Elastic: true})
	for _, spec := range []string{"tidal", "tidal:forecast=off", "tidal:hold_reserve=0"} {
		p, err := policy.Parse(spec, policy.Context{Jobs: jobs})
		if err != nil {
			t.Fatal(err)
		}
		r, err := sim.Run(sim.Config{Cluster: ec, Model: edge, Policy: p, Placer: place.Pack{}, Round: 60, OnEvents: true, Seed: 1}, jobs)
		if err != nil {
			t.Errorf("%s: %v", spec, err)
			continue
		}
		for _, rec := range r.Jobs {
			if rec.State != "declined" && rec.Finish < 0 {
				t.Errorf("%s: %s neither ended nor was declined", spec, rec.ID)
			}
		}
	}
}
