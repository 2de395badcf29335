package server

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
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

// TestCloseDuringLaunch: a server closed, leaving jobs running, while an
// attempt is being launched returns from Close only once the launch is
// recorded, and the next server re-adopts the process. Close used to
// return at once: the launch went on after the store had closed, and a
// next server that found no pid file yet took the attempt as never
// launched and started the job again beside its process (two processes on
// one GPU in TestRandomOperations under load, after a restart).
//
// The launch is held in startProc. Close must not return while it is held
// (a wait of a second for something that must not happen: Close that does
// not wait returns within milliseconds); once released, Close returns and
// the next server adopts the attempt by its recorded pid.
func TestCloseDuringLaunch(t *testing.T) {
	launching, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	startProc = func(l *localexec.Launch) (*localexec.Proc, error) {
		once.Do(func() {
			close(launching)
			<-release
		})
		return localexec.Start(l)
	}
	t.Cleanup(func() { startProc = localexec.Start }) // after the servers' close
	cfg := testConfig(t, t.TempDir())
	cfg.StopJobsOnExit = false
	s1 := startServer(t, cfg)
	id := submit(t, s1.admin, &api.JobSpec{GPUs: 1, Command: []string{"sleep", "60"}}).ID
	<-launching
	closed := make(chan struct{})
	go func() {
		s1.close(t)
		close(closed)
	}()
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(5 * time.Millisecond) {
		s1.mu.Lock()
		c := s1.closed
		s1.mu.Unlock()
		if c {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("Close did not begin within a minute")
		}
	}
	select {
	case <-closed:
		close(release)
		t.Fatal("Close returned while an attempt was being launched")
	case <-time.After(time.Second):
	}
	close(release)
	select {
	case <-closed:
	case <-time.After(time.Minute):
		t.Fatal("Close did not return within a minute of the launch")
	}

	cfg.StopJobsOnExit = true // the next server stops the process at the end
	s2 := startServer(t, cfg)
	j := waitJob(t, s2.admin, id, time.Minute, "running", inState(api.StateRunning, api.StatePending, api.StatePreempted))
	if len(j.Attempts) != 1 || j.Attempts[0].PID == 0 || j.State != api.StateRunning || !hasEvent(t, s2.admin, id, "adopted") {
		t.Errorf("after the restart: %s, attempts %+v; want its one attempt re-adopted", j.State, j.Attempts)
	}
}
