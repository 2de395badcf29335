package server

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/tide-sched/tide/api"
)

// TestIdempotencyKey: concurrent retries of one submission create one job;
// the key is per tenant; another spec under a used key is refused; a bad
// key is a 400 naming the header.
func TestIdempotencyKey(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	spec := &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1}
	ids := make([]string, 8)
	var wg sync.WaitGroup
	for i := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			j, err := ts.admin.SubmitIdempotent(ctx, spec, "k-1")
			if err != nil {
				t.Error(err)
				return
			}
			ids[i] = j.ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		if id != ids[0] {
			t.Fatalf("one key gave jobs %v", ids)
		}
	}
	jobs, err := ts.admin.Jobs(ctx, "")
	if err != nil || len(jobs) != 1 {
		t.Fatalf("%d jobs (%v), want 1", len(jobs), err)
	}
	alice, err := ts.admin.CreateTenant(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	ja, err := api.NewClient(ts.url, alice.Token).SubmitIdempotent(ctx, spec, "k-1")
	if err != nil || ja.ID == ids[0] {
		t.Errorf("another tenant's key k-1: job %v, err %v", ja.ID, err)
	}
	other := *spec
	other.GPUs = 2
	if _, err := ts.admin.SubmitIdempotent(ctx, &other, "k-1"); !isStatus(err, http.StatusConflict) || !strings.Contains(err.Error(), "another spec") {
		t.Errorf("another spec under a used key: %v", err)
	}
	if _, err := ts.admin.SubmitIdempotent(ctx, spec, "two words"); !isStatus(err, http.StatusBadRequest) || !strings.Contains(err.Error(), api.IdempotencyHeader) {
		t.Errorf("bad key: %v", err)
	}
	if j, err := ts.admin.Submit(ctx, spec); err != nil || j.ID == ids[0] {
		t.Errorf("without a key: %v %v", j, err)
	}
}

// TestIdempotentRetryAtQueueLimit: the retry of a submission that was
// accepted gets its job back even when that job filled the tenant's
// max_queued, and a spec the server can never accept (a dependency on no
// job) is a 400 naming the field whatever the queue, not a 429 inviting a
// retry. Both used to be refused with 429 by the queue check, made before
// the key was looked up and the dependencies checked (TestRandomOperations,
// seed 11).
func TestIdempotentRetryAtQueueLimit(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	ten, err := ts.admin.CreateTenantWith(ctx, &api.NewTenant{Name: "alice", Limits: &api.Limits{MaxQueued: 1}})
	if err != nil {
		t.Fatal(err)
	}
	alice := api.NewClient(ts.url, ten.Token)
	spec := &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1, Hold: true} // held: it stays queued
	j, err := alice.SubmitIdempotent(ctx, spec, "k-1")
	if err != nil {
		t.Fatal(err)
	}
	again, err := alice.SubmitIdempotent(ctx, spec, "k-1")
	if err != nil || again.ID != j.ID {
		t.Errorf("the retry of accepted job %s at the tenant's max_queued: %+v, %v", j.ID, again, err)
	}
	if _, err := alice.Submit(ctx, spec); !isStatus(err, http.StatusTooManyRequests) {
		t.Errorf("a new job over max_queued: %v", err)
	}
	bad := *spec
	bad.After = []string{"j999999"}
	var e *api.Error
	if _, err := alice.Submit(ctx, &bad); !errors.As(err, &e) || e.Status != http.StatusBadRequest || len(e.Fields) != 1 || e.Fields[0].Field != "after" {
		t.Errorf("a dependency on no job, at the tenant's max_queued: %v", err)
	}
	if jobs, err := ts.admin.Jobs(ctx, ""); err != nil || len(jobs) != 1 {
		t.Errorf("%d jobs (%v), want 1", len(jobs), err)
	}
}

// TestIdempotentRetryAfterDependencyEnded: the retry of a recorded
// submission gets its job back even though the job's dependency has
// failed since (the job itself then failed); it used to be refused 400,
// the dependency checked as for a new job (TestRandomOperations, seeds 24,
// 31 and 76 with TIDE_RANDOM_OPS_STEPS=90).
func TestIdempotentRetryAfterDependencyEnded(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	dep := submit(t, ts.admin, &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1, Hold: true})
	spec := &api.JobSpec{Command: []string{"true"}, GPUs: 1, After: []string{dep.ID}}
	j, err := ts.admin.SubmitIdempotent(ctx, spec, "k-2")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.admin.Cancel(ctx, dep.ID); err != nil {
		t.Fatal(err)
	}
	again, err := ts.admin.SubmitIdempotent(ctx, spec, "k-2")
	if err != nil || again.ID != j.ID {
		t.Errorf("the retry of accepted job %s after its dependency was cancelled: %+v, %v", j.ID, again, err)
	}
}
