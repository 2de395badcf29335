package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestElasticPolicyParts: an elastic policy runs jobs on whole GPUs only.
// Under one, a submission asking for part of a GPU was accepted and then
// every job waited for ever, reasonless, with every GPU free (elasticflow
// and pollux: the engine refused each round's plan); it is now refused
// naming the field and the policy, and a whole-GPU job runs. A part job
// accepted under fifo and waiting when the server restarts under the
// elastic policy waits, saying why, while other jobs run, one re-adopted
// running is preempted (its plan failed every round too), and both run
// once the server is back under fifo. Found by TestRandomOperations
// (seed 1).
func TestElasticPolicyParts(t *testing.T) {
	ctx := context.Background()
	for _, pol := range []string{"elasticflow", "pollux", "afs"} {
		t.Run(pol, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.StopJobsOnExit = false
			held := countSpec(1, 3, 10*time.Millisecond)
			held.MIG, held.Hold = "2g.10gb", true
			running := countSpec(1, 400, 10*time.Millisecond)
			running.GPUShare = 0.5
			ts := startServer(t, cfg)
			partID := submit(t, ts.admin, held).ID
			runID := submit(t, ts.admin, running).ID
			waitJob(t, ts.admin, runID, 20*time.Second, "running", inState(api.StateRunning))
			ts.close(t)

			cfg.Policy = pol
			ts = startServer(t, cfg)
			for _, tc := range []struct {
				field string
				edit  func(*api.JobSpec)
			}{
				{"gpu_share", func(s *api.JobSpec) { s.GPUShare = 0.5 }},
				{"gpu_mem_gib", func(s *api.JobSpec) { s.GPUMemGiB = 4 }},
				{"mig", func(s *api.JobSpec) { s.MIG = "1g.5gb" }},
			} {
				s := countSpec(1, 3, 10*time.Millisecond)
				tc.edit(s)
				_, err := ts.admin.Submit(ctx, s)
				var e *api.Error
				if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !hasField(e, tc.field) || !strings.Contains(err.Error(), pol) {
					t.Errorf("a job asking for part of a GPU (%s) under %s: %v; want 400 naming %s and the policy", tc.field, pol, err, tc.field)
				}
			}
			if _, err := ts.admin.Release(ctx, partID); err != nil {
				t.Fatal(err)
			}
			whole := submit(t, ts.admin, countSpec(1, 3, 10*time.Millisecond)).ID
			if j := waitJob(t, ts.admin, whole, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed)); j.State != api.StateFinished {
				t.Errorf("whole-GPU job beside a waiting part under %s: %s (%s)", pol, j.State, j.Reason)
			}
			j, err := ts.admin.Job(ctx, partID)
			if err != nil {
				t.Fatal(err)
			}
			if j.State != api.StatePending || !strings.Contains(j.Waiting, pol+" is elastic") {
				t.Errorf("part job under %s: %s, waiting %q, reason %q; want pending, the policy named", pol, j.State, j.Waiting, j.Reason)
			}
			// The part re-adopted running is preempted and waits too.
			j = waitJob(t, ts.admin, runID, 20*time.Second, "preempted", inState(api.StatePreempted, api.StateFinished, api.StateFailed))
			if j.State != api.StatePreempted || !strings.Contains(j.Waiting+j.Reason, pol+" is elastic") {
				t.Errorf("part job re-adopted under %s: %s, waiting %q, reason %q; want preempted, the policy named", pol, j.State, j.Waiting, j.Reason)
			}
			if _, err := ts.admin.Requeue(ctx, partID, false); !isStatus(err, http.StatusConflict) {
				t.Errorf("requeue of a waiting part job: %v, want 409", err)
			}
			ts.close(t)

			cfg.Policy = "fifo"
			ts = startServer(t, cfg)
			for _, id := range []string{partID, runID} {
				if j := waitJob(t, ts.admin, id, 30*time.Second, "finished", inState(api.StateFinished, api.StateFailed)); j.State != api.StateFinished {
					t.Errorf("part job %s back under fifo: %s (%s)", id, j.State, j.Reason)
				}
			}
		})
	}
}
