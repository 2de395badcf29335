package policy

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/classic"
	"github.com/tide-sched/tide/policy/harvest"
	"github.com/tide-sched/tide/sim"
)

// TestQuota: a tenant borrows idle GPUs beyond its quota, and gives them
// back by preemption when the owner's job arrives; without borrowing it
// stays within its quota.
func TestQuota(t *testing.T) {
	c := enginetest.Cluster("2x4:t4")
	mk := tenantJob
	a1, a2 := mk("a1", "a", 4, 0), mk("a2", "a", 4, 1)
	snap := &engine.Snapshot{Cluster: c, Jobs: []*engine.Status{a1, a2}}
	q := &Quota{Inner: &classic.FIFO{}, Limits: map[string]int{"a": 4, "b": 4}, Borrow: true}
	if got := ids(q.Schedule(snap)); got != "a1,a2" {
		t.Errorf("idle cluster: plan %s, want a1,a2 (a borrows b's idle 4)", got)
	}
	// a's jobs run; b's job arrives: a2 (borrowed) is reclaimed.
	a1.GPUs, a2.GPUs = []cluster.GPUID{0, 1, 2, 3}, []cluster.GPUID{4, 5, 6, 7}
	a1.State, a2.State = job.Running, job.Running
	snap.Jobs = append(snap.Jobs, mk("b1", "b", 4, 2))
	if got := ids(q.Schedule(snap)); got != "a1,b1" {
		t.Errorf("owner back: plan %s, want a1,b1 (a2 preempted)", got)
	}
	q.Borrow = false
	snap.Jobs = snap.Jobs[:2]
	if got := ids(q.Schedule(snap)); got != "a1" {
		t.Errorf("no borrowing: plan %s, want a1", got)
	}
	if !strings.Contains(q.Name(), "a=4,b=4") {
		t.Errorf("name %q", q.Name())
	}
}

// tenantJob is a pending job of tenant's asking for gpus GPUs, submitted
// at submit seconds.
func tenantJob(id, tenant string, gpus int, submit float64) *engine.Status {
	j := enginetest.Job(id).GPUs(gpus).Obj()
	j.Tenant, j.Submit = tenant, submit
	return &engine.Status{Job: j, State: job.Pending}
}

func ids(p engine.Plan) string {
	var s []string
	for _, a := range p.Run {
		s = append(s, a.Job)
	}
	return strings.Join(s, ",")
}

func TestParseQuotas(t *testing.T) {
	q, err := ParseQuotas(" a=4, b = 8 ,")
	if err != nil || q["a"] != 4 || q["b"] != 8 || len(q) != 2 {
		t.Fatalf("ParseQuotas = %v, %v", q, err)
	}
	for in, want := range map[string]string{"a": "want TENANT=GPUS", "a=-1": "whole number", "a=1,a=2": "twice", "=3": "want TENANT"} {
		if _, err := ParseQuotas(in); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseQuotas(%q) = %v, want %q", in, err, want)
		}
	}
}

// TestQuotaForwardsDeclines: ElasticFlow under a quota larger than the
// cluster declines exactly the jobs it declines alone (the quota used to
// drop the inner plan's declines, and declined jobs ran anyway).
func TestQuotaForwardsDeclines(t *testing.T) {
	c := enginetest.MultiSite(2, 8, 0, 0)
	for seed := 0; seed < 4; seed++ {
		var jobs []*job.Job
		at := 0.0
		for i := 0; i < 30; i++ {
			at += float64((seed*7+i*13)%97) * 3
			work := 200 + float64((seed*31+i*17)%23)*150
			j := enginetest.Job(fmt.Sprintf("j%02d", i)).At(at).Elastic(1, 1+(i%4), 32).Seconds(work).
				Deadline(at + work/float64(1+i%3) + float64((i*11+seed)%9)*100).Tenant([]string{"a", "b"}[i%2]).Obj()
			jobs = append(jobs, j)
		}
		declined := func(p engine.Policy) string {
			r, err := sim.Run(sim.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: place.Pack{}, OnEvents: true}, jobs)
			if err != nil {
				t.Fatal(err)
			}
			var out []string
			for _, j := range r.Jobs {
				if j.State == string(job.Declined) {
					if j.Start >= 0 {
						t.Errorf("seed %d %s: declined job %s ran", seed, p.Name(), j.ID)
					}
					out = append(out, j.ID)
				}
			}
			return strings.Join(out, ",")
		}
		alone := declined(specs.Parse(t, "elasticflow", Context{}))
		if alone == "" {
			t.Fatalf("seed %d: elasticflow declines nothing; the load does not test forwarding", seed)
		}
		for _, borrow := range []bool{false, true} {
			q := &Quota{Inner: specs.Parse(t, "elasticflow", Context{}), Limits: map[string]int{"a": 100, "b": 100}, Borrow: borrow}
			if got := declined(q); got != alone {
				t.Errorf("seed %d borrow=%v: under the quota declined %s, alone %s", seed, borrow, got, alone)
			}
		}
	}
}

// TestQuotaForwardsPlan: warnings, memos, reasons and optional interfaces
// of the inner policy reach the quota's plan; a job the quota holds back
// gets the quota's reason.
func TestQuotaForwardsPlan(t *testing.T) {
	c := enginetest.Cluster("1x4:t4")
	mk := func(id, tenant string, submit float64) *engine.Status {
		j := enginetest.Job(id).GPUs(4).Tenant(tenant).At(submit).Obj()
		return &engine.Status{Job: j, State: job.Pending}
	}
	snap := &engine.Snapshot{Cluster: c, Jobs: []*engine.Status{mk("a1", "a", 0), mk("b1", "b", 1)}}
	inner := &scripted{plan: engine.Plan{
		Run:      []engine.Assignment{{Job: "b1", GPUs: 4}},
		Memo:     map[string]engine.Memo{"b1": {1}},
		Reasons:  map[string]engine.Reason{"a1": {Text: "inner says wait", Position: 2}},
		Warnings: []engine.Warning{{Kind: "fallback", Reason: "test"}},
	}}
	q := &Quota{Inner: inner, Limits: map[string]int{"a": 4}}
	p := q.Schedule(snap)
	if got := ids(p); got != "a1" {
		t.Errorf("plan %s, want a1 (b has no quota)", got)
	}
	if len(p.Warnings) != 1 || p.Memo["b1"] != (engine.Memo{1}) {
		t.Errorf("warnings %v memo %v not forwarded", p.Warnings, p.Memo)
	}
	if r := p.Reasons["b1"]; !strings.Contains(r.Text, `tenant "b" uses 0 of its quota of 0 GPUs`) || r.Position != 1 {
		t.Errorf("b1 reason %+v", r)
	}
	if _, ok := p.Reasons["a1"]; ok {
		t.Errorf("a1 runs under the quota but keeps the inner reason %+v", p.Reasons["a1"])
	}
	if _, ok := engine.As[engine.ReclaimCoster](q); ok {
		t.Errorf("a quota over a policy without reclaim costs has them")
	}
	if _, ok := engine.As[engine.ReclaimCoster](&Quota{Inner: &harvest.DeepBoot{}}); !ok {
		t.Errorf("a quota over DeepBoot hides its reclaim costs")
	}
}

// scripted returns a fixed plan.
type scripted struct{ plan engine.Plan }

func (*scripted) Name() string                            { return "scripted" }
func (p *scripted) Schedule(*engine.Snapshot) engine.Plan { return p.plan }

// TestQuotaBorrowsBeyondGuarantee: a job larger than its tenant's
// guarantee runs on the guarantee and borrows the rest within its borrow
// limit (a TideQueue's guaranteedGPUs and borrowLimit: the most GPUs the
// tenant may borrow beyond its guarantee). Quota admitted a job whole
// within the guarantee or whole as borrowed: a job of 6 on a guarantee of
// 4 and a borrow limit of 4 never ran, though the tenant may hold 8.
func TestQuotaBorrowsBeyondGuarantee(t *testing.T) {
	c := enginetest.Cluster("2x8:t4")
	for _, tc := range []struct {
		first, gpus int // a's jobs: one of first GPUs (0: none), then one of gpus
		want        string
	}{
		{0, 6, "a6"},    // 4 guaranteed + 2 borrowed
		{0, 8, "a6"},    // 4 + 4
		{0, 9, ""},      // 4 + 5: over the borrow limit
		{0, 4, "a6"},    // within the guarantee
		{2, 6, "a2,a6"}, // 2 + the 2 left of the guarantee + 4 borrowed
		{2, 7, "a2"},    // 2 + 2 + 5: over
		{4, 4, "a4,a6"}, // all 4 borrowed
		{4, 5, "a4"},    // 5 borrowed: over
		{5, 3, "a6,a5"}, // within the guarantee first, then 1 + 4 borrowed
		{5, 4, "a6"},    // the same, and 5 + 4 is over: the first waits
		{0, 16, ""},     // more than the tenant may hold
	} {
		snap := &engine.Snapshot{Cluster: c}
		if tc.first > 0 {
			snap.Jobs = append(snap.Jobs, tenantJob(fmt.Sprintf("a%d", tc.first), "a", tc.first, 0))
		}
		snap.Jobs = append(snap.Jobs, tenantJob("a6", "a", tc.gpus, 1))
		q := &Quota{Inner: &classic.FIFO{}, Limits: map[string]int{"a": 4}, Borrow: true, BorrowLimits: map[string]int{"a": 4}}
		if got := ids(q.Schedule(snap)); got != tc.want {
			t.Errorf("a's jobs of %d and %d GPUs, guarantee 4, borrow limit 4: plan %q, want %q", tc.first, tc.gpus, got, tc.want)
		}
	}
}

// TestQuotaShrinksElastic: an elastic job planned more GPUs than its
// tenant's quota lets it hold runs on fewer, down to its minimum, with
// borrowing off; planned on its count, Quota left it out every round and
// it never ran (tide kube's random operations search, seed 187 under
// aryl: an elastic TideJob of 2 to 3 workers of 2 GPUs planned 5 GPUs on
// a quota of 4). A job whose minimum is over the quota still waits.
func TestQuotaShrinksElastic(t *testing.T) {
	c := enginetest.Cluster("2x8:t4")
	mk := func(id string, lo, n, hi int) *engine.Status {
		j := enginetest.Job(id).Elastic(lo, n, hi).Tenant("a").Obj()
		return &engine.Status{Job: j, State: job.Pending}
	}
	for _, borrow := range []bool{false, true} {
		q := &Quota{Inner: &classic.FIFO{}, Limits: map[string]int{"a": 4}, Borrow: borrow, BorrowLimits: map[string]int{"a": 2}}
		plan := q.Schedule(&engine.Snapshot{Cluster: c, Jobs: []*engine.Status{mk("e", 2, 10, 12), mk("big", 8, 8, 8)}})
		want := 4
		if borrow {
			want = 6
		}
		if len(plan.Run) != 1 || plan.Run[0].Job != "e" || plan.Run[0].GPUs != want {
			t.Errorf("borrow %v: plan %+v, want e on %d GPUs (4 guaranteed, borrow limit 2 with borrowing) and big waiting", borrow, plan.Run, want)
		}
	}
}
