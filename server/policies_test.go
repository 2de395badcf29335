package server

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/policy"
)

// TestEveryPolicy: tide serve runs under every policy tide has, with its
// default knobs (tiresias-gittins needs a GPU-time distribution file and
// says so): a rigid and an elastic job both run to completion.
func TestEveryPolicy(t *testing.T) {
	for _, info := range policy.All() {
		t.Run(info.Name, func(t *testing.T) {
			cfg := testConfig(t, t.TempDir())
			cfg.Policy = info.Name
			if s, err := New(cfg); err != nil {
				// A policy that cannot run without a knob says which.
				if strings.Contains(err.Error(), "pass dist=FILE") {
					t.Skipf("needs a knob: %v", err)
				}
				t.Fatal(err)
			} else if err := s.Close(context.Background()); err != nil {
				t.Fatal(err)
			}
			ts := startServer(t, cfg)
			rigid := countSpec(2, 5, 10*time.Millisecond)
			elastic := countSpec(2, 5, 10*time.Millisecond)
			elastic.MinGPUs, elastic.MaxGPUs = 1, 2
			var ids []string
			for _, s := range []*api.JobSpec{rigid, elastic} {
				ids = append(ids, submit(t, ts.admin, s).ID)
			}
			for _, id := range ids {
				j := waitJob(t, ts.admin, id, 20*time.Second, "finished", inState(api.StateFinished, api.StateFailed))
				if j.State != api.StateFinished {
					t.Errorf("job %s: %s (%s)", id, j.State, j.Reason)
				}
			}
		})
	}
}
