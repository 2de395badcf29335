package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-sched/tide/policy"
)

// TestSkipBadTooLarge: a job the cluster could never hold (more GPUs than
// it has, or than it has of the job's type) fails the run and points at
// --skip-bad; with --skip-bad it is skipped with a warning and the rest run.
func TestSkipBadTooLarge(t *testing.T) {
	dir := t.TempDir()
	cases := []struct {
		name, trace, cluster string
		skipped              []string // job IDs
		warn                 string
	}{
		{"more GPUs than the cluster", "id,submit,gpus,duration\na,0,2,100\nbig,10,100,100\nc,20,1,50\n",
			"2x4:t4", []string{"big"}, "job big: needs at least 100 GPUs of one type on one site (a job never mixes types or spans sites), the most the cluster has is 8"},
		{"more of its type", "id,submit,gpus,gpu_type,duration\na,0,2,,100\nv,10,4,v100,100\nb,20,8,t4,50\n",
			"2x4:t4,1x2:v100", []string{"v"}, "job v: needs at least 4 v100 GPUs on one site (a job never mixes types or spans sites), the most the cluster has is 2"},
		{"elastic minimum", "id,submit,gpus,min_gpus,max_gpus,duration\ne,0,4,2,16,100\nf,5,12,12,12,100\n",
			"2x4:t4", []string{"f"}, "job f: needs at least 12 GPUs"},
		// 12 GPUs in all, but no job mixes types: once it waited to the
		// end of the run, every policy blamed for leaving it waiting.
		{"more than one type has", "id,submit,gpus,duration\na,0,4,100\nm,10,6,100\n",
			"1x4:t4,1x4:v100,1x4:a100", []string{"m"}, "job m: needs at least 6 GPUs of one type on one site (a job never mixes types or spans sites), the most the cluster has is 4"},
		// Six GPUs, but only the two V100s hold 20 GiB: once the engine
		// refused it mid-run, and --skip-bad did not skip it.
		{"part of a GPU on too few GPUs that hold it", "id,submit,gpus,gpu_mem_gib,duration\na,0,4,,100\np,10,3,20,100\nq,20,2,20,50\n",
			"1x4:t4,1x2:v100", []string{"p"}, "job p: needs at least 3 GPUs of one type that hold its part of a GPU (gpu_mem_gib 20) on one site (a job never mixes types or spans sites), the most the cluster has is 2"},
	}
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, string(rune('a'+i))+".csv")
			if err := os.WriteFile(path, []byte(tc.trace), 0o644); err != nil {
				t.Fatal(err)
			}
			args := []string{"sim", "--trace", path, "--cluster", tc.cluster, "--policy", "fifo", "--json"}
			code, _, errs := tide(t, args...)
			if code == 0 || !strings.Contains(errs, tc.warn) || !strings.Contains(errs, "--skip-bad") {
				t.Errorf("without --skip-bad: exit %d, want a failure saying %q and naming --skip-bad:\n%s", code, tc.warn, errs)
			}
			code, out, errs := tide(t, append(args, "--skip-bad")...)
			if code != 0 {
				t.Fatalf("with --skip-bad: exit %d: %s", code, errs)
			}
			rows := strings.Count(tc.trace, "\n") - 1
			if o := decode(t, out); o.Jobs != rows-len(tc.skipped) || o.Policies[0]["finished"] != float64(o.Jobs) {
				t.Errorf("with --skip-bad: %d jobs, %v finished; want %d", o.Jobs, o.Policies[0]["finished"], rows-len(tc.skipped))
			}
			if !strings.Contains(errs, "warning: skipping "+tc.warn) {
				t.Errorf("with --skip-bad: no warning %q:\n%s", tc.warn, errs)
			}
		})
	}
}

// TestPolicyAllPartGPU: on a trace with jobs that ask for part of each GPU
// (gpu_share, gpu_mem_gib or mig), --policy all leaves out the elastic
// policies, which refuse such a trace, with a note naming the column, and
// runs the rest; it used to stop at the first elastic policy with that
// refusal. tide sweep --policy all over traces that allow different
// policies fails saying so, instead of lining up one trace's figures under
// another's policies.
func TestPolicyAllPartGPU(t *testing.T) {
	dir := t.TempDir()
	write := func(name, trace string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(trace), 0o644); err != nil {
			t.Fatal(err)
		}
		return path
	}
	for _, tc := range []struct {
		column, value, deadline string
	}{{"gpu_share", "0.5", ""}, {"gpu_mem_gib", "8", ""}, {"mig", "1g.10gb", "86400"}} {
		// The elastic policies left out for the part-GPU jobs: those that
		// schedule for deadlines are left out for want of one otherwise.
		var elastic []string
		for _, i := range policy.All() {
			if i.Elastic && (tc.deadline != "" || !i.NeedsDeadlines) {
				elastic = append(elastic, i.Name)
			}
		}
		path := write(tc.column+".csv", "id,submit,gpus,duration,deadline,"+tc.column+"\nwhole,0,2,1200,"+tc.deadline+",\npart,10,1,600,,"+tc.value+"\n")
		code, out, errs := tide(t, "sim", "--trace", path, "--cluster", "2x4:a100", "--policy", "all", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", tc.column, code, errs)
		}
		note := "they are elastic and run jobs on whole GPUs, and the trace has jobs that ask for part of each GPU (job part: " + tc.column + ")"
		if !strings.Contains(errs, "note: --policy all leaves out "+strings.Join(elastic, ", ")+": "+note) {
			t.Errorf("%s: no note leaving out %v saying %q:\n%s", tc.column, elastic, note, errs)
		}
		ran := map[string]bool{}
		for _, p := range decode(t, out).Policies {
			ran[p["name"].(string)] = true
			if p["finished"] != float64(2) {
				t.Errorf("%s: %s finished %v jobs, want 2", tc.column, p["name"], p["finished"])
			}
		}
		for _, name := range elastic {
			if ran[name] {
				t.Errorf("%s: --policy all ran the elastic %s", tc.column, name)
			}
		}
		if !ran["fifo"] || !ran["tiresias"] || (tc.deadline != "") != ran["edf"] {
			t.Errorf("%s: --policy all ran %v, want fifo and tiresias among them, and edf with a deadline", tc.column, ran)
		}
	}
	dir = filepath.Join(dir, "sweep")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	write("part.csv", "id,submit,gpus,duration,gpu_share\np,0,1,600,0.5\n")
	whole := write("whole.csv", "id,submit,gpus,duration\nw,0,2,1200\n")
	var elastic []string
	for _, i := range policy.All() {
		if i.Elastic && !i.NeedsDeadlines {
			elastic = append(elastic, i.Name)
		}
	}
	code, _, errs := tide(t, "sweep", "--traces", filepath.Join(dir, "*.csv"), "--cluster", "2x4:a100", "--policy", "all")
	if code == 0 || !strings.Contains(errs, "--policy all runs other policies on") || !strings.Contains(errs, "only on "+whole+": "+strings.Join(elastic, ",")) {
		t.Errorf("sweep --policy all over part-GPU and whole-GPU traces: exit %d, want a failure naming the policies only %s runs:\n%s", code, whole, errs)
	}
}
