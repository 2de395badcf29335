package sim_test

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/trace"
)

// The golden tests hold the simulator to the exact per-job results it gave
// before the engine was rewritten for speed (issue 19): same starts,
// finishes, preemptions, restarts and GPU-seconds, bit for bit, and the same
// timeline. The files in testdata/golden were written by the code at main
// commit 3dc5171 (before any change for speed) with
//
//	TIDE_GOLDEN_PHILLY=1 go test ./sim -run 'TestGolden' -golden-update
//	TIDE_GOLDEN_FULL=1 go test ./sim -run 'TestGoldenPhillyFull' -golden-update -timeout 2h
//
// A change that alters a policy's decisions on purpose regenerates them the
// same way and says why in its commit message.
var goldenUpdate = flag.Bool("golden-update", false, "rewrite testdata/golden from the code under test")

// goldenPolicies are the policies whose rounds the speed work touched.
var goldenPolicies = []string{"fifo", "srtf", "tiresias", "gandiva", "themis", "fifo-perf"}

// writeRun writes one line per job, then the run's counters and timeline, in
// a text form that keeps every float exactly (shortest round-trip form).
func writeRun(w io.Writer, run *report.Run) {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	for _, j := range run.Jobs {
		fmt.Fprintln(w, j.ID, f(j.Start), f(j.Finish), j.State, j.Preemptions, j.Restarts, j.Resizes,
			f(j.GPUSeconds), f(j.UsefulGPUSeconds), f(j.RestartSeconds), f(j.LowerBound))
	}
	fmt.Fprintln(w, "events", run.Events, "rounds", run.Rounds, "samples", len(run.Timeline))
	replay := run.TenantReplay()
	for i, s := range run.Timeline {
		tenants := 0 // holding GPUs
		for _, n := range replay.At(&run.Timeline[i]) {
			if n > 0 {
				tenants++
			}
		}
		fmt.Fprintln(w, f(s.T), s.Allocated, s.Useful, s.Queued, s.Running, s.Fragmented, tenants)
	}
}

// digest is the SHA-256 of writeRun's text.
func digest(run *report.Run) string {
	h := sha256.New()
	bw := bufio.NewWriter(h)
	writeRun(bw, run)
	bw.Flush()
	return hex.EncodeToString(h.Sum(nil))
}

// goldenCase is one replay checked against a golden file.
type goldenCase struct {
	name    string // file name under testdata/golden
	policy  string
	jobs    []*job.Job
	model   perf.Model
	cluster *cluster.Cluster
	full    bool // store the per-job text, not only its digest
}

func (g goldenCase) run(t *testing.T) {
	t.Helper()
	p, err := policy.Parse(g.policy, policy.Context{Jobs: g.jobs})
	if err != nil {
		t.Fatal(err)
	}
	info, _ := policy.Lookup(g.policy)
	run, err := sim.Run(sim.Config{Cluster: g.cluster, Model: g.model, Policy: p, Placer: place.Pack{},
		Round: 60, OnEvents: true, Seed: 1, Agents: info.Elastic}, g.jobs)
	if err != nil {
		t.Fatal(err)
	}
	var got string
	if g.full {
		var b strings.Builder
		writeRun(&b, run)
		got = b.String()
	} else {
		got = digest(run) + "\n"
	}
	path := filepath.Join("testdata", "golden", g.name)
	if *goldenUpdate {
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (write it with -golden-update from the code before the change)", err)
	}
	want := string(raw)
	if got == want {
		return
	}
	if !g.full {
		t.Fatalf("%s: per-job results changed: digest %s, golden %s", g.name, strings.TrimSpace(got), strings.TrimSpace(want))
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < min(len(gl), len(wl)); i++ {
		if gl[i] != wl[i] {
			t.Fatalf("%s line %d differs:\n got  %s\n want %s", g.name, i+1, gl[i], wl[i])
		}
	}
	t.Fatalf("%s: %d lines, golden has %d", g.name, len(gl), len(wl))
}

// TestGoldenWorkload6 replays the embedded workload-6 on 64 T4 under each
// golden policy and compares every job's record with the golden file.
func TestGoldenWorkload6(t *testing.T) {
	jobs, m, c := workload6(t)
	for _, p := range goldenPolicies {
		t.Run(p, func(t *testing.T) {
			goldenCase{name: "workload6-" + p + ".txt", policy: p, jobs: jobs, model: m, cluster: c, full: true}.run(t)
		})
	}
}

// phillyJobs reads the shared Philly trace, sorted, or skips.
func phillyJobs(t testing.TB) []*job.Job {
	t.Helper()
	path := filepath.Join("..", "..", "shared", "data", "pollux", "philly.csv")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("%s not found (the shared data folder is absent): %v", path, err)
	}
	tr, err := trace.ReadFile(path, "", trace.Options{Sort: true})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Jobs
}

func buildCluster(t testing.TB, shorthand string) *cluster.Cluster {
	t.Helper()
	spec, err := cluster.ParseShorthand(shorthand)
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// phillyModel is what tide sim replays a duration trace with.
var phillyModel = perf.Duration{Cost: perf.CostTable{Default: perf.Costs{Restart: 30, Resize: 30}}}

// TestGoldenPhillySlice replays the first 1,000 jobs of the Philly trace on
// 128 GPUs (a busy cluster: queues and preemptions) under each
// golden policy and compares the digest of every job's record.
func TestGoldenPhillySlice(t *testing.T) {
	if os.Getenv("TIDE_GOLDEN_PHILLY") == "" && os.Getenv("TIDE_GOLDEN_FULL") == "" {
		t.Skip("set TIDE_GOLDEN_PHILLY=1 to replay 1,000 Philly jobs under every golden policy (minutes on a loaded machine)")
	}
	jobs := phillyJobs(t)[:1000]
	c := buildCluster(t, "32x4:v100")
	for _, p := range goldenPolicies {
		t.Run(p, func(t *testing.T) {
			goldenCase{name: "philly1000-" + p + ".sha256", policy: p, jobs: jobs, model: phillyModel, cluster: c}.run(t)
		})
	}
}

// TestGoldenPhillyFull replays the whole Philly trace on 2,048 GPUs, the
// run of docs/scale.md, when TIDE_GOLDEN_FULL is set (minutes per policy).
func TestGoldenPhillyFull(t *testing.T) {
	if os.Getenv("TIDE_GOLDEN_FULL") == "" {
		t.Skip("set TIDE_GOLDEN_FULL=1 to replay the whole Philly trace under every golden policy")
	}
	jobs := phillyJobs(t)
	c := buildCluster(t, "512x4:v100")
	only := os.Getenv("TIDE_GOLDEN_POLICIES")
	for _, p := range goldenPolicies {
		if only != "" && !strings.Contains(","+only+",", ","+p+",") {
			continue
		}
		t.Run(p, func(t *testing.T) {
			goldenCase{name: "philly-" + p + ".sha256", policy: p, jobs: jobs, model: phillyModel, cluster: c}.run(t)
		})
	}
}
