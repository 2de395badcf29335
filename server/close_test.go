package server

import (
	"context"
	"testing"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/perf/goodput"
	"github.com/tide-sched/tide/store"
)

// TestCloseWaitsForWrites: a commit whose store write is still in flight
// (an attempt goroutine recording a launch, say) when Close runs is
// durable once Close returns. Close found nothing dirty, since that commit
// had taken the changes, and used to close the store under the batched
// write, which then failed: a job's accepted report was lost at the restart
// (TestGoodputHints' "hints after a restart <nil>").
func TestCloseWaitsForWrites(t *testing.T) {
	obs := goodput.Observation{Nodes: 1, Replicas: 2, LocalBsz: 64, ComputeTime: 0.25, StepTime: 0.3}
	for i := range 10 {
		dir := t.TempDir()
		s, err := New(testConfig(t, dir))
		if err != nil {
			t.Fatal(err)
		}
		lj := &liveJob{rec: &store.Job{ID: "j000001", Seq: 1, Tenant: "admin", State: api.StateRunning,
			Spec: api.JobSpec{Command: []string{"true"}, GPUs: 1}}}
		started := make(chan struct{})
		wrote := make(chan error, 1)
		go func() {
			s.mu.Lock()
			s.jobs[lj.rec.ID] = lj
			s.order = append(s.order, lj)
			s.perfRecord(lj).Observations = []goodput.Observation{obs}
			s.touch(lj)
			close(started)
			// Close waits for mu, which commit lets go during the write.
			err := s.commit()
			s.mu.Unlock()
			wrote <- err
		}()
		<-started
		if err := s.Close(context.Background()); err != nil {
			t.Fatalf("round %d: close: %v", i, err)
		}
		if err := <-wrote; err != nil {
			t.Fatalf("round %d: the in-flight commit failed: %v", i, err)
		}
		db, err := store.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		var rec *store.Job
		err = db.View(func(tx *store.Tx) error {
			var err error
			rec, err = tx.Job(lj.rec.ID)
			return err
		})
		db.Close()
		if err != nil {
			t.Fatalf("round %d: the record written during Close is lost: %v", i, err)
		}
		if rec.Perf == nil || len(rec.Perf.Observations) != 1 || rec.Perf.Observations[0] != obs {
			t.Fatalf("round %d: perf after Close %+v, want the observation %+v", i, rec.Perf, obs)
		}
	}
}
