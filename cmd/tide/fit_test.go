package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
