package server

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/sim"
)

// packTable measures four one-GPU job types on V100s (iterations/s) alone
// and in pairs. Packed over alone, A+B gain 0.6+0.6, A+C 0.6+0.5, B+D
// 0.6+0.5 and C+D 0.5+0.55; A+D (0.4+0.45) and B+C (0.3+0.45) lose. So
// four such jobs on two GPUs pair as {A,B},{C,D} or {A,C},{B,D}: which one
// is the policy's choice.
const packTable = `{"v100": {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 6.0], "('C', 1)": [6.0, 4.0], "('D', 1)": [4.0, 8.1]},
 "('B', 1)": {"null": 10.0, "('C', 1)": [3.0, 3.6], "('D', 1)": [6.0, 9.0]},
 "('C', 1)": {"null": 8.0, "('D', 1)": [4.0, 9.9]},
 "('D', 1)": {"null": 18.0}
}}`

// packedJobs runs four one-GPU jobs of types A, B, C and D on two fake
// V100s under policy spec, packing with packTable, and checks that the
// jobs the simulator's first round runs for the same jobs on the same
// cluster run live, paired as there: both members of a pair on the same
// device with half its threads over MPS, and no GPU holding more than one
// pair. Each job ends when its gate file appears. It returns the server,
// the jobs by type, their gates, the pairs (types, sorted) and the MPS
// control calls.
func packedJobs(t *testing.T, spec string, edit func(*Config)) (ts *testServer, ids map[string]string, gates, pairs []string, calls string) {
	t.Helper()
	dir := t.TempDir()
	cfg, calls := mpsConfig(t, dir, "fake:2:v100")
	cfg.Policy = spec
	cfg.PairThroughputs = filepath.Join(dir, "pairs.json")
	if err := os.WriteFile(cfg.PairThroughputs, []byte(packTable), 0o644); err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&cfg)
	}
	ts = startServer(t, cfg)
	out := filepath.Join(dir, "env")
	if err := os.Mkdir(out, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"sh", "-c", `echo "$CUDA_VISIBLE_DEVICES|$CUDA_MPS_ACTIVE_THREAD_PERCENTAGE|$TIDE_GPU_SHARE|$CUDA_MPS_PIPE_DIRECTORY|$CUDA_MPS_PINNED_DEVICE_MEM_LIMIT" > ` +
		out + `/$TIDE_JOB_ID.tmp && mv ` + out + `/$TIDE_JOB_ID.tmp ` + out + `/$TIDE_JOB_ID; while [ ! -e ` + dir + `/go-$TIDE_JOB_ID ]; do sleep 0.05; done`}
	types := []string{"A", "B", "C", "D"}
	ids = map[string]string{}
	// All four reach the engine before its first round, as they arrive
	// at once in the simulator: the round waits for mu.
	ts.mu.Lock()
	for _, typ := range types {
		j, err := ts.admin.Submit(context.Background(), &api.JobSpec{Command: cmd, GPUs: 1, JobType: typ, EstimateS: 600})
		if err != nil {
			ts.mu.Unlock()
			t.Fatalf("submit: %v", err)
		}
		ids[typ] = j.ID
		gates = append(gates, filepath.Join(dir, "go-"+j.ID))
	}
	ts.mu.Unlock()
	pairs, alone := simFirstRound(t, spec, cfg.GPUs, ids)
	if len(pairs) == 0 {
		t.Fatalf("the simulator packs no pair under %s: nothing to compare", spec)
	}
	seen := map[string][]string{}
	env := func(typ string) ([]string, bool) {
		b, err := os.ReadFile(filepath.Join(out, ids[typ]))
		return strings.Split(strings.TrimSpace(string(b)), "|"), err == nil
	}
	// Wait for the jobs the simulator runs to have launched, then for
	// more rounds: any other job would have launched by then too.
	for _, typ := range types {
		if !slices.Contains(alone, typ) && !slices.ContainsFunc(pairs, func(p string) bool { return strings.Contains(p, typ) }) {
			continue
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, ok := env(typ); ok {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s (%s) never wrote its environment:\n%s", ids[typ], typ, logs(t, ts.admin, ids[typ]))
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	waitRounds(t, ts, 3)
	for _, typ := range types {
		if e, ok := env(typ); ok {
			seen[typ] = e
		}
	}
	byDev := map[string][]string{}
	var live, liveAlone []string
	for _, typ := range types {
		if e, ok := seen[typ]; ok {
			byDev[e[0]] = append(byDev[e[0]], typ)
		}
	}
	for dev, tys := range byDev {
		switch len(tys) {
		case 1:
			liveAlone = append(liveAlone, tys[0])
			if e := seen[tys[0]]; e[1] != "" || e[2] != "" || e[3] != "" {
				t.Errorf("job %s alone on GPU %s sees %q: want no share, no MPS", tys[0], dev, e)
			}
		case 2:
			live = append(live, strings.Join(tys, "+"))
			for _, typ := range tys {
				if e := seen[typ]; e[1] != "50" || e[2] != "0.5" || e[3] != filepath.Join(cfg.DataDir, "mps", "gpu"+dev, "pipe") || e[4] != "" {
					t.Errorf("job %s sees %q: want half of GPU %s's threads (50, 0.5) over its MPS pipe, no memory limit", typ, e, dev)
				}
			}
		default:
			t.Errorf("GPU %s runs %v: more than a pair", dev, tys)
		}
	}
	slices.Sort(live)
	slices.Sort(liveAlone)
	if !slices.Equal(live, pairs) || !slices.Equal(liveAlone, alone) {
		t.Errorf("live: pairs %v, alone %v; the simulator's first round: pairs %v, alone %v", live, liveAlone, pairs, alone)
	}
	// The engine's books: a GPU held by one job or the two of a pair.
	ts.lock()
	for g := range cluster.GPUID(ts.cluster.TotalGPUs()) {
		if a, b := ts.eng.Holders(g); b != nil && (a == nil || a.PackedWith != b.Job.ID || b.PackedWith != a.Job.ID) {
			t.Errorf("GPU %d held by %v and %v: want a packed pair", g, a, b)
		}
	}
	ts.mu.Unlock()
	c, err := ts.admin.Cluster(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if m, want := scrape(t, ts), fmt.Sprintf("tide_running_jobs_sharing %d\n", 2*len(live)); !strings.Contains(m, want) {
		t.Errorf("metrics: want %q", want)
	}
	if c.Allocated != len(byDev) {
		t.Errorf("cluster: %d GPUs allocated, want %d (a shared GPU once)", c.Allocated, len(byDev))
	}
	for _, g := range c.GPUs {
		var want []string
		for _, typ := range byDev[fmt.Sprint(g.Index)] {
			want = append(want, ids[typ])
		}
		slices.Sort(want)
		got := g.Jobs
		if len(got) == 0 && g.Job != "" {
			got = []string{g.Job}
		}
		if got = slices.Sorted(slices.Values(got)); !slices.Equal(got, want) {
			t.Errorf("cluster: GPU %d held by %q %v, want %v", g.Index, g.Job, g.Jobs, want)
		}
	}
	return ts, ids, gates, pairs, calls
}

// simFirstRound is what the simulator's first round runs for the same
// jobs (types A-D, by the IDs the server gave them, arriving at once) on
// the same GPUs, with the same policy, placer and pair table: the pairs
// ("A+B", sorted) and the jobs alone.
func simFirstRound(t *testing.T, spec string, gpus []localexec.GPU, ids map[string]string) (pairs, alone []string) {
	t.Helper()
	c, _, err := localexec.Cluster(gpus)
	if err != nil {
		t.Fatal(err)
	}
	g, err := table.ParseGavel("pairs.json", []byte(packTable))
	if err != nil {
		t.Fatal(err)
	}
	var jobs []*job.Job
	typeOf := map[string]string{}
	for typ, id := range ids {
		jobs = append(jobs, &job.Job{ID: id, Model: typ, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 600, Duration: 600, Unit: job.Seconds})
		typeOf[id] = typ
	}
	slices.SortFunc(jobs, func(a, b *job.Job) int { return strings.Compare(a.ID, b.ID) })
	pol, err := assemble.Policy(spec, policy.Context{Jobs: jobs}, nil, false)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := place.Lookup("")
	if err != nil {
		t.Fatal(err)
	}
	rec := &firstPlan{Policy: pol}
	if _, err := sim.Run(sim.Config{Cluster: c, Model: &perf.Pairs{Base: perf.Duration{}, Table: g}, Policy: rec, Placer: pl}, jobs); err != nil {
		t.Fatal(err)
	}
	for _, a := range rec.plan.Run {
		switch {
		case a.PackWith == "":
			alone = append(alone, typeOf[a.Job])
		case a.Job < a.PackWith:
			p := []string{typeOf[a.Job], typeOf[a.PackWith]}
			slices.Sort(p)
			pairs = append(pairs, strings.Join(p, "+"))
		}
	}
	slices.Sort(pairs)
	slices.Sort(alone)
	return pairs, alone
}

// firstPlan records the first plan of the policy it wraps.
type firstPlan struct {
	engine.Policy
	plan  engine.Plan
	taken bool
}

func (f *firstPlan) Schedule(s *engine.Snapshot) engine.Plan {
	p := f.Policy.Schedule(s)
	if !f.taken {
		f.plan, f.taken = p, true
		f.plan.Run = slices.Clone(p.Run)
	}
	return p
}

// endPacked lets every job of packedJobs end, waits for them to finish
// and for every MPS daemon to stop, those of devs among them.
func endPacked(t *testing.T, ts *testServer, ids map[string]string, gates []string, calls string, devs ...string) {
	t.Helper()
	for _, g := range gates {
		if err := os.WriteFile(g, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range ids {
		waitJob(t, ts.admin, id, 30*time.Second, "finished", inState(api.StateFinished))
	}
	waitMPSStopped(t, calls, devs...)
}

// TestPackedPairsLive: Gandiva packing (Gavel's model of it, every pair
// measured to gain) puts four one-GPU jobs on two V100s two by two,
// paired as the simulator pairs them. When a job ends its partner keeps
// running on its GPU, not restarted (the simulator's model: only the job
// that moves gets a change), and every MPS daemon stops with the jobs.
func TestPackedPairsLive(t *testing.T) {
	ts, ids, gates, pairs, calls := packedJobs(t, "gandiva:preset=gavel:pack=true", nil)
	first, partner, _ := strings.Cut(pairs[0], "+")
	if err := os.WriteFile(gates[slices.Index([]string{"A", "B", "C", "D"}, first)], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJob(t, ts.admin, ids[first], 20*time.Second, "finished", inState(api.StateFinished))
	waitRounds(t, ts, 3)
	if j := waitJob(t, ts.admin, ids[partner], time.Second, "running", inState(api.StateRunning)); len(j.Attempts) != 1 {
		t.Errorf("job %s's partner ended; it has %d attempts, want 1 (it keeps running): %+v", partner, len(j.Attempts), j.Attempts)
	}
	endPacked(t, ts, ids, gates, calls)
}

// TestPackedPairsGavelLive: Gavel's LAS with space sharing (its LP solved
// by GLPK) packs the same four jobs live as in the simulator.
func TestPackedPairsGavelLive(t *testing.T) {
	ts, ids, gates, _, calls := packedJobs(t, "gavel-las:space_sharing=true", nil)
	endPacked(t, ts, ids, gates, calls)
}

// TestPackedPairsRecovered: the server stops, leaving two packed pairs
// running; a new one re-adopts all four jobs as the same pairs (no
// restart, the engine's books hold each GPU's pair), keeps a GPU's MPS
// daemon while a member of its pair runs, and stops the daemons the first
// server started once the jobs have ended.
func TestPackedPairsRecovered(t *testing.T) {
	var cfg Config
	s1, ids, gates, pairs, calls := packedJobs(t, "gandiva:preset=gavel:pack=true", func(c *Config) {
		c.StopJobsOnExit = false
		cfg = *c
	})
	s1.close(t)
	s2 := startServer(t, cfg)
	waitRounds(t, s2, 3)
	for typ, id := range ids {
		j := waitJob(t, s2.admin, id, 5*time.Second, "running", inState(api.StateRunning))
		if len(j.Attempts) != 1 || j.Restarts != 0 {
			t.Errorf("job %s (%s) after the restart: %d attempts, %d restarts; want it re-adopted", id, typ, len(j.Attempts), j.Restarts)
		}
	}
	s2.lock()
	for g := range cluster.GPUID(s2.cluster.TotalGPUs()) {
		if a, b := s2.eng.Holders(g); a == nil || b == nil || a.PackedWith != b.Job.ID || b.PackedWith != a.Job.ID {
			t.Errorf("GPU %d held by %v and %v after the restart: want the pair re-adopted", g, a, b)
		}
	}
	s2.mu.Unlock()
	// The member of a pair adopted second leaves: the one adopted first
	// (alone, then paired) still holds its GPU's MPS daemon.
	x, y, _ := strings.Cut(pairs[0], "+")
	if ids[x] > ids[y] {
		x, y = y, x
	}
	if err := os.WriteFile(gates[slices.Index([]string{"A", "B", "C", "D"}, y)], nil, 0o644); err != nil {
		t.Fatal(err)
	}
	waitJob(t, s2.admin, ids[y], 20*time.Second, "finished", inState(api.StateFinished))
	waitRounds(t, s2, 3)
	if b, _ := os.ReadFile(calls); strings.Contains(string(b), "quit") {
		t.Errorf("job %s (%s) left; %s still runs beside where it was, but its MPS daemon was stopped:\n%s", ids[y], y, ids[x], b)
	}
	endPacked(t, s2, ids, gates, calls, "0", "1")
}

// TestPackedSurvivorKeepsMPSDaemon: the member of a packed pair whose
// partner ended before a restart still holds its GPU's MPS daemon when the
// next server re-adopts it alone. That server took holding the daemon
// from whether the attempt shared its GPU now, not from its record
// (store.Attempt.MPS): adopted alone, the survivor held nothing, its
// daemon ran on unknown to the server, which started a second one on the
// GPU for the next part (the random operations search, seed 859 at 150
// steps, under gavel-makespan:space_sharing=true: "0 start, 0 start,
// 0 quit") and never stopped the first.
func TestPackedSurvivorKeepsMPSDaemon(t *testing.T) {
	dir := t.TempDir()
	cfg, calls := mpsConfig(t, dir, "fake:1:v100")
	cfg.Policy = "gandiva:pack=true"
	cfg.StopJobsOnExit = false
	cfg.PairThroughputs = filepath.Join(dir, "pairs.json")
	if err := os.WriteFile(cfg.PairThroughputs, []byte(packTable), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := []string{"sh", "-c", `touch ` + dir + `/$TIDE_JOB_ID.ran; while [ ! -e ` + dir + `/go-$TIDE_JOB_ID ]; do sleep 0.05; done`}
	gate := func(id string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, "go-"+id), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	launched := func(ts *testServer, id string) {
		t.Helper()
		waitJob(t, ts.admin, id, 20*time.Second, "launched", func(j *api.Job) bool {
			_, err := os.Stat(filepath.Join(dir, id+".ran"))
			return j.State == api.StateRunning && err == nil
		})
	}

	s1 := startServer(t, cfg)
	// Both reach the engine before its first round, which packs them.
	s1.mu.Lock()
	var ids []string
	for _, typ := range []string{"A", "B"} {
		j, err := s1.admin.Submit(context.Background(), &api.JobSpec{Command: cmd, GPUs: 1, JobType: typ, EstimateS: 600})
		if err != nil {
			s1.mu.Unlock()
			t.Fatalf("submit: %v", err)
		}
		ids = append(ids, j.ID)
	}
	s1.mu.Unlock()
	a, b := ids[0], ids[1]
	launched(s1, a)
	launched(s1, b)
	s1.lock()
	if st := s1.eng.Job(b); st.PackedWith != a {
		t.Errorf("job B runs packed with %q, want A (%s)", st.PackedWith, a)
	}
	s1.mu.Unlock()
	gate(a)
	waitJob(t, s1.admin, a, 20*time.Second, "finished", inState(api.StateFinished))
	s1.close(t)
	if b, _ := os.ReadFile(calls); strings.TrimSpace(string(b)) != "0 start" {
		t.Fatalf("a packed pair ran on GPU 0, one member still runs; MPS control calls:\n%s\nwant one daemon started", b)
	}

	// B, re-adopted alone, keeps the daemon until it ends; the next part
	// on the GPU starts a daemon of its own after that.
	s2 := startServer(t, cfg)
	if j := waitJob(t, s2.admin, b, 20*time.Second, "running", inState(api.StateRunning)); len(j.Attempts) != 1 {
		t.Fatalf("job B after the restart: %d attempts, want it re-adopted", len(j.Attempts))
	}
	gate(b)
	waitJob(t, s2.admin, b, 20*time.Second, "finished", inState(api.StateFinished))
	part := countSpec(1, 1, time.Millisecond)
	part.GPUShare = 0.5
	next := submit(t, s2.admin, part).ID
	waitJob(t, s2.admin, next, 20*time.Second, "finished", inState(api.StateFinished))
	waitMPSStopped(t, calls, "0")
	if b, _ := os.ReadFile(calls); strings.Count(string(b), "start") != 2 {
		t.Errorf("a packed pair, then a part, ran on GPU 0; MPS control calls:\n%s\nwant a daemon started for each", b)
	}
}

// TestPackedReportsSplitPair: the step times jobs report feed the pair
// model, and Gandiva (the paper's rule) splits a packed pair they show
// losing. A runs alone on the one V100 and reports 0.1 s steps; B arrives
// and is packed beside it (the table: 0.6 + 0.6 of their speeds alone);
// A then reports 0.4 s steps, a quarter of its speed: 0.25 + 0.6 < 1, so
// the next round preempts B, which moved in, and A keeps running.
func TestPackedReportsSplitPair(t *testing.T) {
	dir := t.TempDir()
	cfg, _ := mpsConfig(t, dir, "fake:1:v100")
	cfg.Policy = "gandiva:pack=true"
	cfg.PairThroughputs = filepath.Join(dir, "pairs.json")
	if err := os.WriteFile(cfg.PairThroughputs, []byte(packTable), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg)
	// A job appends what the test puts in rep-<its ID> to its report file.
	// The file is renamed into place, and the job renames it away before
	// reading it: a job that found it created but not yet written, or
	// removed it after the next one was written, would lose a report.
	rep := dir + `/rep-$TIDE_JOB_ID`
	cmd := []string{"sh", "-c", `touch ` + dir + `/$TIDE_JOB_ID.ran; while [ ! -e ` + dir + `/go ]; do ` +
		`if [ -e ` + rep + ` ] && mv ` + rep + ` ` + rep + `.taken; then cat ` + rep + `.taken >> "$TIDE_REPORT_FILE"; rm ` + rep + `.taken; fi; sleep 0.05; done`}
	report := func(id, line, msg string) {
		t.Helper()
		tmp := filepath.Join(dir, "rep-"+id+".tmp")
		if err := os.WriteFile(tmp, []byte(line+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, "rep-"+id)); err != nil {
			t.Fatal(err)
		}
		waitJob(t, ts.admin, id, 20*time.Second, "reporting "+msg, func(j *api.Job) bool { return j.Message == msg })
	}
	launched := func(id string) {
		t.Helper()
		waitJob(t, ts.admin, id, 20*time.Second, "launched", func(j *api.Job) bool {
			_, err := os.Stat(filepath.Join(dir, id+".ran"))
			return j.State == api.StateRunning && err == nil
		})
	}
	a := submit(t, ts.admin, &api.JobSpec{Command: cmd, GPUs: 1, JobType: "A", EstimateS: 600})
	launched(a.ID)
	report(a.ID, `{"step_time": 0.1, "message": "alone"}`, "alone")
	b := submit(t, ts.admin, &api.JobSpec{Command: cmd, GPUs: 1, JobType: "B", EstimateS: 600})
	launched(b.ID)
	ts.lock()
	if st := ts.eng.Job(b.ID); st.PackedWith != a.ID {
		t.Errorf("job B runs packed with %q, want A (%s)", st.PackedWith, a.ID)
	}
	ts.mu.Unlock()
	report(a.ID, `{"step_time": 0.4, "message": "packed"}`, "packed")
	waitJob(t, ts.admin, b.ID, 20*time.Second, "preempted", inState(api.StatePreempted))
	if j := waitJob(t, ts.admin, a.ID, time.Second, "running", inState(api.StateRunning)); len(j.Attempts) != 1 {
		t.Errorf("job A: %d attempts, want 1 (it keeps its GPU when B leaves)", len(j.Attempts))
	}
	if err := os.WriteFile(filepath.Join(dir, "go"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{a.ID, b.ID} {
		waitJob(t, ts.admin, id, 30*time.Second, "finished", inState(api.StateFinished))
	}
}

// TestPackUnknownJobType: a job_type the pair table does not know is
// refused at submission, naming the field; a pair table that is missing,
// or measures none of the server's GPU types, stops the server's start.
func TestPackUnknownJobType(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "data"))
	t4 := cfg.GPUs
	v100, err := localexec.Discover("fake:1:v100")
	if err != nil {
		t.Fatal(err)
	}
	cfg.GPUs = v100
	cfg.PairThroughputs = filepath.Join(dir, "pairs.json")
	if err := os.WriteFile(cfg.PairThroughputs, []byte(packTable), 0o644); err != nil {
		t.Fatal(err)
	}
	ts := startServer(t, cfg)
	_, err = ts.admin.Submit(context.Background(), &api.JobSpec{Command: []string{"true"}, GPUs: 1, JobType: "E"})
	if err == nil || !strings.Contains(err.Error(), "job_type") || !strings.Contains(err.Error(), `"E"`) {
		t.Errorf("submit of job type E: %v, want an error naming job_type", err)
	}
	submit(t, ts.admin, &api.JobSpec{Command: []string{"true"}, GPUs: 1, JobType: "A"})
	cfg.PairThroughputs = filepath.Join(dir, "missing.json")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "--pair-throughputs") {
		t.Errorf("server with a missing pair file: %v, want an error naming --pair-throughputs", err)
	}
	// On T4s, which packTable does not measure.
	cfg.DataDir, cfg.GPUs = filepath.Join(dir, "t4"), t4
	cfg.PairThroughputs = filepath.Join(dir, "pairs.json")
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "GPU types v100") || !strings.Contains(err.Error(), "GPUs are t4") {
		t.Errorf("server on T4s with pairs measured on V100s: %v, want an error naming both", err)
	}
}
