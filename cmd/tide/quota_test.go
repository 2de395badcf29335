package main

import (
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSimQuota: --quota wraps the policy in tenant quotas on `tide sim`, as
// on `tide kube`. Two 4-GPU nodes; tenant a submits two 4-GPU jobs of
// 1000 s at 0, tenant b one 4-GPU job of 100 s at 100; quotas a=4, b=4.
// Worked by hand (no restart cost):
//   - plain FIFO: b1 waits for a1 and a2 (JCTs 1000, 1000, 1000);
//   - borrowing: a2 borrows b's idle GPUs, is preempted when b1 arrives,
//     resumes at 200 (JCTs 1000, 1100, 100; one preemption in 3 jobs);
//   - no borrowing: a2 waits for a1 (JCTs 1000, 2000, 100).
func TestSimQuota(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.csv")
	if err := os.WriteFile(tr, []byte("id,submit,tenant,gpus,duration\na1,0,a,4,1000\na2,0,a,4,1000\nb1,100,b,4,100\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		flags       []string
		name        string
		avg, preemp float64
	}{
		{nil, "fifo", 1000, 0},
		{[]string{"--quota", "a=4,b=4"}, "fifo+quota(a=4,b=4,borrow)", (1000 + 1100 + 100) / 3.0, 1 / 3.0},
		{[]string{"--quota", "a=4, b=4", "--borrow=false"}, "fifo+quota(a=4,b=4,no-borrow)", (1000 + 2000 + 100) / 3.0, 0},
	} {
		args := append([]string{"sim", "--trace", tr, "--cluster", "2x4:v100", "--policy", "fifo", "--restart-cost", "0", "--json"}, c.flags...)
		code, out, errs := tide(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.flags, code, errs)
		}
		p := decode(t, out).Policies[0]
		avg, _ := p["avg_jct_s"].(float64)
		pre, _ := p["preemptions_per_job"].(float64)
		if p["name"] != c.name || math.Abs(avg-c.avg) > 1e-6 || math.Abs(pre-c.preemp) > 1e-9 {
			t.Errorf("%v: %v avg JCT %v, preemptions/job %v; want %s %v, %v", c.flags, p["name"], avg, pre, c.name, c.avg, c.preemp)
		}
	}
	// A quota for a tenant the trace lacks is probably a typo: warned.
	if code, _, errs := tide(t, "sim", "--trace", tr, "--cluster", "2x4:v100", "--policy", "fifo", "--json", "--quota", "a=4,bb=4"); code != 0 || !strings.Contains(errs, `tenant "bb" has no jobs`) {
		t.Errorf("unknown tenant: exit %d, stderr %q", code, errs)
	}
	for _, bad := range []string{"a", "a=-1", "a=1,a=2", ","} {
		code, _, errs := tide(t, "sim", "--trace", tr, "--quota", bad)
		if code != 2 || !strings.Contains(errs, "--quota") {
			t.Errorf("--quota %q: exit %d, stderr %q; want a usage error naming --quota", bad, code, errs)
		}
	}
}
