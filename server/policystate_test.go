package server

import (
	"bytes"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestPolicyStateSurvivesRestart: the policy's state (here Tiresias'
// queues, kept in its jobs' memos, and the round count) is written to the
// database and loaded into the new engine after a restart.
func TestPolicyStateSurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.Policy = "tiresias:limits=1/3600"
	s1 := startServer(t, cfg)
	a := submit(t, s1.admin, countSpec(2, 2000, 10*time.Millisecond))
	b := submit(t, s1.admin, countSpec(2, 2000, 10*time.Millisecond))
	for _, j := range []*api.Job{a, b} {
		waitJob(t, s1.admin, j.ID, 10*time.Second, "running", func(j *api.Job) bool { return j.State == api.StateRunning && j.Progress > 0 })
	}
	time.Sleep(500 * time.Millisecond) // a few rounds with both jobs past the first queue's limit
	s1.close(t)
	s1.mu.Lock()
	want, err := s1.eng.PolicyState()
	rounds := s1.eng.Rounds()
	memo := s1.eng.Job(a.ID).Memo
	s1.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if rounds == 0 || memo == ([4]float64{}) {
		t.Fatalf("nothing to carry over: %d rounds, memo %v", rounds, memo)
	}
	s2, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer s2.db.Close()
	s2.mu.Lock()
	got, err := s2.eng.PolicyState()
	gotMemo, gotRounds := s2.eng.Job(a.ID).Memo, s2.eng.Rounds()
	s2.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if gotRounds != rounds || gotMemo != memo || !bytes.Equal(got, want) {
		t.Errorf("after the restart: %d rounds, memo %v; before: %d rounds, memo %v", gotRounds, gotMemo, rounds, memo)
	}
}
