package kube

import (
	"testing"
	"time"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// TestCheckpointCostLive: a job's reclaim cost when its policy names none
// is the GPU-seconds of its checkpoint: 3 GPUs x the 30 s grace period;
// under a live driver that gives each job's checkpoint time (the
// simulator's), 3 GPUs x that time, so jobs of another model cost other
// amounts.
func TestCheckpointCostLive(t *testing.T) {
	grace := 30 * time.Second
	s := &Scheduler{cfg: Config{Grace: &grace}}
	bert := &engine.Status{Job: &job.Job{ID: "a", Model: "bert"}, GPUs: []cluster.GPUID{0, 1, 2}}
	resnet := &engine.Status{Job: &job.Job{ID: "b", Model: "resnet50"}, GPUs: []cluster.GPUID{3, 4, 5}}
	if a, b := s.checkpointCost(bert), s.checkpointCost(resnet); a != 90 || b != 90 {
		t.Errorf("by the grace period: %v and %v, want 90 GPU-seconds each", a, b)
	}
	s.cfg.Live = &Live{Checkpoint: func(j *job.Job) float64 {
		if j.Model == "bert" {
			return 7
		}
		return 2
	}}
	if a, b := s.checkpointCost(bert), s.checkpointCost(resnet); a != 21 || b != 6 {
		t.Errorf("by the driver's checkpoint times: %v and %v, want 21 and 6 GPU-seconds", a, b)
	}
}
