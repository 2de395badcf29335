package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"math/rand"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/policy"
)

// TestRandomOperations drives a server with random sequences of what an
// admin and three tenants may do (submissions, valid and not, cancel,
// hold, release, requeue, reports, reads, paged lists, quota changes,
// token rotations; the web console's views and actions, logs followed
// from an offset as `tide logs -f` does, malformed requests; a cancel,
// hold, requeue or restart a moment after a submission, while its round
// and launch may be under way) and restarts of the server on the same
// database, and
// checks after every step what the API promises against a model the test
// keeps. Each seed picks a policy among every one tide serve runs (presets,
// priority classes, tiresias-gittins with a distribution file, the packing
// ones with a pair file), one or two GPU types, a pair-throughput file
// (packable jobs, by job_type) or none, a stand-in MPS control program or
// none; restarts may change the policy (the saved policy state must not
// break the next one) or first try one tide serve refuses, which must say
// why. Jobs ask for whole GPUs, elastic ranges with batch sizes, or parts
// of each GPU (gpu_share, gpu_mem_gib, mig; refused under an elastic
// policy), with deadlines, dependencies, limits and holds. The checks:
//
//   - every job the API accepted is listed, with the spec it was accepted
//     with, also after restarts; no other job is; a refused submission
//     names the bad field and creates nothing; a refused or foreign
//     cancel, hold, release or requeue changes nothing (the job's held,
//     requeue and cancelled marks are exactly the ones the accepted
//     requests set);
//   - an ended job changes only by a requeue; a held job does not start;
//     a job with dependencies does not start before they finished;
//   - a GPU is held by one whole-GPU job, or two packed ones where a
//     packing policy ran (both of measured job types), or by parts whose
//     shares and memory sum to at most the GPU's, never parts beside a
//     whole-GPU job (the jobs' and the cluster's views, which list the
//     same holders); a running job holds between its min and max GPUs of
//     its type; each job's process locks its GPUs (flock in gpujob below,
//     shared for parts and packable jobs): no process finds a GPU another
//     one still holds that it may not share, and by the attempts the API
//     records, none started on a GPU before the one it may not share
//     ended;
//   - each attempt was told its GPU count, its part of each GPU (a packed
//     job half) and a batch its GPUs, local batch and accumulation steps
//     make up, within the spec's batch sizes, as the API records it;
//   - a declined job names the deadline, a failed one has a reason, and a
//     job waiting through two rounds says why (reason or waiting);
//   - a report is taken while the job runs or waits, a bad one refused
//     naming the field; paged lists give the caller's jobs in order, each
//     once, in the states asked for;
//   - once every job has ended, each MPS daemon started was stopped, in
//     turn on each GPU;
//   - a tenant sees and changes only its own jobs (404 for the others',
//     403 for submitting as another, "(other tenant)" in the cluster
//     view), and holds at most its quota of GPUs;
//   - every attempt's process saw the GPUs the API says it had, and a
//     job's log holds only its own attempts; a log followed piece by
//     piece (across restarts) is the start of the whole log;
//   - nothing a tenant reads (job lists and their reasons, events, logs,
//     the console's queue, cluster, job view and tenants, errors) names
//     another tenant's job (but those its request or its jobs' specs
//     name) or holds anyone's token; the console's queue lists every job
//     the caller may see, and its actions follow the API's rules;
//   - a malformed request gets a 4xx with a JSON error (naming the field
//     where there is one) and creates nothing, never a 5xx;
//   - at the end, with holds released and quotas lifted, every job ends.
//
// TIDE_RANDOM_OPS_SEEDS=N runs seeds 1..N (from TIDE_RANDOM_OPS_FIRST),
// TIDE_RANDOM_OPS_STEPS=N makes each run N steps; a failure names its
// seed and the last 60 steps before it (each with the time it was taken,
// to set beside the stand-in MPS control program's timed calls), or,
// with TIDE_RANDOM_OPS_LOG=1, every step (and a run that passes logs its
// steps and MPS control calls, seen with -v).
func TestRandomOperations(t *testing.T) {
	if testing.Short() {
		t.Skip("random operations on a live server: not in -short")
	}
	seeds, first, steps := 4, 1, 45
	for _, e := range []struct {
		name string
		v    *int
	}{{"TIDE_RANDOM_OPS_SEEDS", &seeds}, {"TIDE_RANDOM_OPS_FIRST", &first}, {"TIDE_RANDOM_OPS_STEPS", &steps}} {
		if v := os.Getenv(e.name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				t.Fatalf("%s=%q: want a number", e.name, v)
			}
			*e.v = n
		}
	}
	script := writeGPUJob(t)
	for seed := first; seed < first+seeds; seed++ {
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			runRandomOps(t, int64(seed), steps, script)
		})
	}
}

// gpujobScript runs CMD holding an exclusive lock (flock) on a file per
// GPU of $CUDA_VISIBLE_DEVICES in $GPULOCKS, then exits CODE ("-": CMD's
// own status). A GPU whose lock another process holds is written to
// $GPULOCKS/conflicts: two processes were given the same GPU. The locks
// go with the last process holding their descriptors, however it ends.
//
// A job whose spec sets GPULOCK=s (one asking for part of a GPU, or one
// the packing policies may pair) takes shared locks: such jobs may run
// side by side, never beside a job holding its GPU whole. The first line
// records what the attempt was given: its GPUs, its share and its batch.
const gpujobScript = `#!/bin/sh
code=$1; shift
echo "gpujob $TIDE_JOB_ID attempt $TIDE_ATTEMPT gpus $CUDA_VISIBLE_DEVICES n $TIDE_GPUS share $TIDE_GPU_SHARE batch $TIDE_BATCH_SIZE $TIDE_LOCAL_BSZ $TIDE_ACCUM_STEPS"
mode=-x
[ "$GPULOCK" = s ] && mode=-s
fd=5
for g in $(echo "$CUDA_VISIBLE_DEVICES" | tr , ' '); do
	eval "exec $fd>>\"\$GPULOCKS/gpu$g\""
	flock -n $mode $fd || echo "$TIDE_JOB_ID attempt $TIDE_ATTEMPT: GPU $g is held by another process" >>"$GPULOCKS/conflicts"
	fd=$((fd+1))
done
"$@"
c=$?
[ "$code" = - ] || c=$code
exit $c
`

func writeGPUJob(t *testing.T) string {
	if _, err := exec.LookPath("flock"); err != nil {
		t.Skip("flock (util-linux) is not installed: the GPU locks cannot be checked")
	}
	path := filepath.Join(t.TempDir(), "gpujob")
	if err := os.WriteFile(path, []byte(gpujobScript), 0o755); err != nil {
		t.Fatal(err)
	}
	return path
}

// roActor is the admin or a tenant.
type roActor struct {
	name  string
	token string
	c     *api.Client
	// limits are the tenant's; quotaFrom is the cluster's round count from
	// which limits.MaxGPUs surely applies (a round running when it changed
	// used the old one, oldGPUs).
	limits    api.Limits
	quotaFrom int
	oldGPUs   int
}

// roJob is what the model knows of an accepted job.
type roJob struct {
	id, tenant string
	spec       api.JobSpec
	// held, requeues and cancelled are what the accepted requests made
	// of the job (cancelled: in its current run).
	held      bool
	requeues  int
	cancelled bool
	obs       *api.Job // the last observation
	// heldAttempts is the job's attempt count when it was first seen held.
	heldAttempts int
	// waitRound is the cluster's round count when the job was first seen
	// waiting in its current wait (-1: not waiting).
	waitRound int
	// by, sent and key: who submitted the job, what, under which
	// idempotency key ("" for none).
	by   *roActor
	sent *api.JobSpec
	key  string
	// at is when its submission was answered; obsAt when obs was read.
	at, obsAt time.Time
	// tailed is its log as followed so far (tail), to tailOff.
	tailed  []byte
	tailOff int64
}

type roTest struct {
	t      *testing.T
	seed   int64
	rng    *rand.Rand
	cfg    Config
	ts     *testServer
	ctx    context.Context
	script string
	locks  string
	types  map[int]string // CUDA index -> GPU type
	perTyp map[string]int
	mem    map[int]float64 // CUDA index -> GPU memory, GiB
	// mpsCalls logs the stand-in MPS control program's calls ("" for
	// none); dist is tiresias-gittins' GPU-time distribution.
	mpsCalls, dist string
	// packedEver says whether a packing policy ran at some point (packed
	// pairs may still run under the next one).
	packedEver bool
	// adaptEver: a policy that adapts batch sizes ran at some point.
	adaptEver bool
	// rounds is the cluster's round count at the last check.
	rounds int
	actors []*roActor // admin first
	jobs   map[string]*roJob
	order  []string // accepted job IDs
	hist   []string
	step   int
}

func runRandomOps(t *testing.T, seed int64, steps int, script string) {
	rng := rand.New(rand.NewSource(seed))
	dir := t.TempDir()
	cfg := testConfig(t, filepath.Join(dir, "data"))
	cfg.Grace = 300 * time.Millisecond
	cfg.StopJobsOnExit = rng.Intn(2) == 0
	if rng.Intn(2) == 0 {
		// Two types, their CUDA indices interleaved (the cluster's GPU
		// IDs, grouped by type, are not the indices).
		t4, _ := localexec.Discover("fake:2:t4")
		a100, _ := localexec.Discover("fake:2:a100")
		t4[1].Index, a100[0].Index, a100[1].Index = 2, 1, 3
		cfg.GPUs = []localexec.GPU{t4[0], a100[0], t4[1], a100[1]}
	}
	r := &roTest{t: t, seed: seed, rng: rng, cfg: cfg, ctx: context.Background(), script: script,
		locks: filepath.Join(dir, "locks"), types: map[int]string{}, perTyp: map[string]int{}, mem: map[int]float64{}, jobs: map[string]*roJob{}}
	for _, g := range cfg.GPUs {
		r.types[g.Index] = g.Type
		r.perTyp[g.Type]++
		r.mem[g.Index] = g.MemGiB
	}
	if err := os.MkdirAll(r.locks, 0o755); err != nil {
		t.Fatal(err)
	}
	if rng.Intn(3) == 0 {
		// Packable jobs: the pair file measures job types A to D on
		// every GPU type of the server.
		r.cfg.PairThroughputs = filepath.Join(dir, "pairs.json")
		if err := os.WriteFile(r.cfg.PairThroughputs, []byte(pairTable(slices.Collect(maps.Keys(r.perTyp)))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if rng.Intn(2) == 0 {
		// A stand-in MPS control program: a daemon per shared GPU,
		// started and stopped in turn (checked at the end).
		control := filepath.Join(dir, "mps-control")
		r.mpsCalls = filepath.Join(dir, "mps-calls")
		sh := "#!/bin/sh\nif [ \"$1\" = -d ]; then what=start; else read what; fi\necho \"$CUDA_VISIBLE_DEVICES $what $(date +%H:%M:%S.%N)\" >> " + r.mpsCalls + "\n"
		if err := os.WriteFile(control, []byte(sh), 0o755); err != nil {
			t.Fatal(err)
		}
		r.cfg.MPS = control
	}
	r.dist = filepath.Join(dir, "gputime.csv")
	if err := os.WriteFile(r.dist, []byte("duration\n60\n600\n3600\n7200\n36000\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.cfg.Policy = r.randomPolicy()
	r.packedEver, r.adaptEver = r.packing(), r.adapts()
	r.logf("policy %s, gpus %v, stop jobs on exit %v, pair file %v, mps %v", r.cfg.Policy, r.types, r.cfg.StopJobsOnExit, r.cfg.PairThroughputs != "", r.cfg.MPS != "")
	r.ts = startServer(t, r.cfg)
	admin := &roActor{name: "admin", token: r.ts.token, c: r.ts.admin}
	r.actors = []*roActor{admin}
	for _, name := range []string{"alice", "bob", "carol"} {
		req := &api.NewTenant{Name: name}
		if rng.Intn(3) == 0 {
			req.Limits = &api.Limits{MaxGPUs: 1 + rng.Intn(3)}
		}
		ten, err := admin.c.CreateTenantWith(r.ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		a := &roActor{name: name, token: ten.Token, c: api.NewClient(r.ts.url, ten.Token)}
		if req.Limits != nil {
			a.limits = *req.Limits
		}
		r.actors = append(r.actors, a)
		r.logf("tenant %s, limits %+v", name, a.limits)
	}
	for r.step = 1; r.step <= steps; r.step++ {
		r.randomStep()
		r.check()
	}
	r.finish()
}

// pairTable is a pair-throughput file (Gavel's format) measuring job
// types A to D alone and in pairs on each GPU type of types: A+B, A+C,
// B+D and C+D gain from packing, A+D and B+C lose.
func pairTable(types []string) string {
	sort.Strings(types)
	var b strings.Builder
	b.WriteString("{")
	for i, t := range types {
		if i > 0 {
			b.WriteString(",")
		}
		fmt.Fprintf(&b, `%q: {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 6.0], "('C', 1)": [6.0, 4.0], "('D', 1)": [4.0, 8.1]},
 "('B', 1)": {"null": 10.0, "('C', 1)": [3.0, 3.6], "('D', 1)": [6.0, 9.0]},
 "('C', 1)": {"null": 8.0, "('D', 1)": [4.0, 9.9]},
 "('D', 1)": {"null": 18.0}}`, t)
	}
	b.WriteString("}")
	return b.String()
}

// randomPolicy is a spec tide serve runs, any of tide's policies and
// presets (tiresias-gittins with a GPU-time distribution), the packing
// ones with their packing knob where the server has a pair file, some
// with strict or preemptive priority classes.
func (r *roTest) randomPolicy() string {
	var specs []string
	for _, s := range policy.Specs() {
		if strings.HasPrefix(s, "tiresias-gittins") {
			s += ":dist=" + r.dist
		}
		specs = append(specs, s)
	}
	if r.cfg.PairThroughputs != "" {
		for _, g := range []string{"gavel-las", "gavel-ftf", "gavel-makespan", "gavel-throughput"} {
			specs = append(specs, g+":space_sharing=true")
		}
		specs = append(specs, "gandiva:pack=true", "gandiva:preset=gavel:pack=true")
	}
	s := specs[r.pick(len(specs))]
	switch r.pick(8) {
	case 0:
		s += ":priority=strict"
	case 1:
		s += ":priority=preempt"
	}
	return s
}

// elastic says whether the server's policy chooses GPU counts (and runs
// only whole-GPU jobs).
func (r *roTest) elastic() bool {
	i, _ := policy.Lookup(r.cfg.Policy)
	return i.Elastic
}

// adapts says whether the server's policy adapts batch sizes.
func (r *roTest) adapts() bool {
	i, _ := policy.Lookup(r.cfg.Policy)
	return i.AdaptBatch
}

// packing says whether the server may pack two whole-GPU jobs on a GPU.
func (r *roTest) packing() bool {
	return r.cfg.PairThroughputs != "" && (strings.Contains(r.cfg.Policy, "pack=true") || strings.Contains(r.cfg.Policy, "space_sharing=true"))
}

func (r *roTest) logf(format string, a ...any) {
	r.hist = append(r.hist, fmt.Sprintf("%3d %s ", r.step, time.Now().Format("15:04:05.000"))+fmt.Sprintf(format, a...))
}

// fail stops the run, saying what led there.
func (r *roTest) fail(format string, a ...any) {
	r.t.Helper()
	h := r.hist
	if len(h) > 60 && os.Getenv("TIDE_RANDOM_OPS_LOG") == "" {
		h = h[len(h)-60:]
	}
	r.t.Fatalf("seed %d, step %d: %s\n(rerun: TIDE_RANDOM_OPS_SEEDS=1 TIDE_RANDOM_OPS_FIRST=%d go test ./server -run TestRandomOperations -v)\nsteps so far:\n  %s",
		r.seed, r.step, fmt.Sprintf(format, a...), r.seed, strings.Join(h, "\n  "))
}

func (r *roTest) pick(n int) int { return r.rng.Intn(n) }

func (r *roTest) tenant(name string) *roActor {
	for _, a := range r.actors {
		if a.name == name {
			return a
		}
	}
	return nil
}

// randomStep does one random operation and checks its answer.
func (r *roTest) randomStep() {
	switch n := r.pick(116); {
	case n < 28:
		r.submitValid(r.actors[r.pick(len(r.actors))])
	case n < 33:
		r.submitBurst()
	case n < 41:
		r.submitInvalid()
	case n < 49:
		r.jobOp("cancel")
	case n < 57:
		r.jobOp("hold")
	case n < 64:
		r.jobOp("release")
	case n < 72:
		r.jobOp("requeue")
	case n < 77:
		r.read()
	case n < 80:
		r.report()
	case n < 85:
		r.foreign()
	case n < 87:
		r.setQuota()
	case n < 89:
		r.retry()
	case n < 90:
		r.rotate()
	case n < 91:
		r.deleteTenant()
	case n < 95:
		r.restart()
	case n < 100:
		d := time.Duration(50+r.pick(400)) * time.Millisecond
		r.logf("wait %s", d)
		time.Sleep(d)
	case n < 106:
		r.consoleOp()
	case n < 110:
		r.tail()
	case n < 112:
		r.badRequest()
	default:
		r.actOnStart()
	}
}

// actOnStart submits a job and at once, or within a few milliseconds,
// while the round that starts it and its launch may be under way,
// cancels, holds or requeues it, or restarts the server.
func (r *roTest) actOnStart() {
	a := r.actors[r.pick(len(r.actors))]
	s := r.validSpec(a)
	s.Hold, s.After = false, nil
	n := len(r.order)
	r.submit(a, s)
	if len(r.order) == n {
		return // refused (a quota)
	}
	j := r.jobs[r.order[len(r.order)-1]]
	for _, id := range r.order[n:] {
		if r.jobs[id].sent == s {
			j = r.jobs[id]
		}
	}
	d := time.Duration(r.pick(30)) * time.Millisecond
	time.Sleep(d)
	switch op := []string{"cancel", "hold", "requeue", "restart"}[r.pick(4)]; op {
	case "restart":
		r.logf("restart %s after submitting %s", d, j.id)
		r.restart()
	default:
		r.logf("%s %s after submitting it", op, d)
		r.jobOpOn(op, j, a)
	}
}

// command is a job's argv: gpujob around a short command.
func (r *roTest) command() []string {
	code := "-"
	switch n := r.pick(10); {
	case n == 0:
		code = "1"
	case n == 1:
		code = strconv.Itoa(api.ExitNoRetry)
	case n == 2:
		code = "0"
	}
	var inner []string
	switch n := r.pick(10); {
	case n < 5:
		inner = []string{"sleep", fmt.Sprintf("0.%02d", 1+r.pick(40))}
	case n < 7:
		inner = []string{countjob, "-steps", strconv.Itoa(2 + r.pick(6)), "-step-time", "30ms"}
	case n < 8:
		// Ignores SIGTERM: a stop must wait for the grace period's SIGKILL.
		inner = []string{"sh", "-c", "trap '' TERM; sleep 0.4"}
	case n < 9:
		inner = []string{"true"}
	default:
		inner = []string{"sh", "-c", "exit 3"}
	}
	return append([]string{r.script, code}, inner...)
}

// validSpec is a job spec the server must accept from owner.
func (r *roTest) validSpec(owner *roActor) *api.JobSpec {
	s := &api.JobSpec{Name: fmt.Sprintf("r%d-%d", r.seed, r.step), Command: r.command(), Env: map[string]string{"GPULOCKS": r.locks}}
	avail := 0
	for _, n := range r.perTyp {
		avail = max(avail, n)
	}
	if r.pick(3) == 0 {
		types := slices.Sorted(func(yield func(string) bool) {
			for t := range r.perTyp {
				if !yield(t) {
					return
				}
			}
		})
		s.GPUType = types[r.pick(len(types))]
		avail = r.perTyp[s.GPUType]
		if r.pick(3) == 0 {
			s.GPUType = strings.ToUpper(s.GPUType) // types are case-blind
		}
	}
	switch n := r.pick(12); {
	case n < 2 && !r.elastic():
		// Part of each GPU (of one that has the memory for it: the
		// part's memory is chosen so that every GPU here holds it).
		s.GPUs = 1 + r.pick(min(avail, 2))
		switch r.pick(4) {
		case 0:
			s.GPUShare = []float64{0.25, 0.3, 0.5, 0.75}[r.pick(4)]
		case 1:
			s.GPUMemGiB = float64(2 + 2*r.pick(4))
		case 2:
			s.GPUShare, s.GPUMemGiB = []float64{0.25, 0.5}[r.pick(2)], float64(1+r.pick(4))
		default:
			s.MIG = []string{"1g.5gb", "2g.10gb", "1g.10gb"}[r.pick(3)]
		}
		s.Env["GPULOCK"] = "s"
	case n < 5 && avail > 1:
		s.MinGPUs = 1 + r.pick(avail-1)
		s.MaxGPUs = s.MinGPUs + 1 + r.pick(avail-s.MinGPUs)
		if r.pick(2) == 0 {
			s.GPUs = s.MinGPUs + r.pick(s.MaxGPUs-s.MinGPUs+1)
		}
		if r.pick(2) == 0 {
			// Goodput reports and batch sizes (Pollux adapts them).
			s.BatchSize = 64
			if r.pick(2) == 0 {
				s.MaxBatchSize = 64 << r.pick(3)
			}
			if r.pick(3) == 0 {
				s.MaxLocalBsz = 16
			}
		}
	default:
		s.GPUs = 1 + r.pick(avail)
		if r.pick(2) == 0 {
			s.GPUs = 1
		}
	}
	if s.GPUShare == 0 && s.GPUMemGiB == 0 && s.MIG == "" && r.pick(3) == 0 {
		// What it trains: the packing policies may pair it (the server
		// without a pair file keeps the name, unused).
		s.JobType = string(rune('A' + r.pick(4)))
		s.Env["GPULOCK"] = "s"
	}
	s.Priority = r.pick(4) - 1
	if r.pick(2) == 0 {
		s.EstimateS = float64(1 + r.pick(20))
	}
	if r.pick(3) == 0 {
		s.Deadline = time.Now().Add(time.Duration(5+r.pick(3600)) * time.Second).UTC().Format(time.RFC3339)
	}
	if r.pick(3) == 0 {
		m := r.pick(3)
		s.MaxRetries = &m
	}
	if r.pick(6) == 0 {
		s.TimeLimitS = 0.1 + float64(r.pick(5))/10
	}
	s.Hold = r.pick(6) == 0
	if r.pick(6) == 0 {
		// After a job of the owner's (the admin's may be anyone's).
		var deps []string
		for _, id := range r.order {
			if j := r.jobs[id]; owner.name == "admin" || j.tenant == owner.name {
				deps = append(deps, id)
			}
		}
		if len(deps) > 0 {
			s.After = []string{deps[len(deps)-1-r.pick(min(len(deps), 4))]}
		}
	}
	if owner.name == "admin" && r.pick(2) == 0 {
		s.Tenant = r.actors[1+r.pick(len(r.actors)-1)].name
	}
	return s
}

// isPart says whether s asks for part of each GPU.
func isPart(s *api.JobSpec) bool { return s.GPUShare > 0 || s.GPUMemGiB > 0 || s.MIG != "" }

// accepted is the spec the server must show for s, submitted by owner.
func accepted(s *api.JobSpec, owner string) api.JobSpec {
	a := *s
	if a.Tenant == "" {
		a.Tenant = owner
	}
	a.GPUType = strings.ToLower(a.GPUType)
	return a
}

// depFailed says whether the model knows that one of s's dependencies
// ended otherwise than finished: the submission must then be refused.
func (r *roTest) depFailed(s *api.JobSpec) bool {
	for _, d := range s.After {
		if j := r.jobs[d]; j != nil && j.obs != nil && api.Terminal(j.obs.State) && j.obs.State != api.StateFinished {
			return true
		}
	}
	return false
}

func (r *roTest) submitValid(a *roActor) {
	s := r.validSpec(a)
	r.submit(a, s)
}

// submit submits s as a and checks the answer.
func (r *roTest) submit(a *roActor, s *api.JobSpec) {
	want := accepted(s, a.name)
	mustRefuse := r.depFailed(s)
	var key string
	var v *api.Job
	var err error
	if r.pick(3) == 0 {
		key = fmt.Sprintf("key-%d-%d", r.seed, r.step)
		v, err = a.c.SubmitIdempotent(r.ctx, s, key)
	} else {
		v, err = a.c.Submit(r.ctx, s)
	}
	r.submitted(a, s, want, mustRefuse, v, err, key)
}

// retry sends a submission made under an idempotency key again: the
// same spec gets the job back, another one a 409 naming the header.
func (r *roTest) retry() {
	var keyed []*roJob
	for _, id := range r.order {
		if j := r.jobs[id]; j.key != "" && slices.Contains(r.actors, j.by) { // not a deleted tenant's
			keyed = append(keyed, j)
		}
	}
	if len(keyed) == 0 {
		return
	}
	j := keyed[r.pick(len(keyed))]
	spec, same := j.sent, r.pick(4) > 0
	if !same {
		c := *spec
		c.Priority++
		spec = &c
	}
	v, err := j.by.c.SubmitIdempotent(r.ctx, spec, j.key)
	r.logf("%s retries the submission of %s (same spec %v): %v", j.by.name, j.id, same, oneLine(err))
	switch {
	case same && (err != nil || v.ID != j.id || !reflect.DeepEqual(v.Spec, j.spec)):
		r.fail("%s's retry of the submission of %s under key %s: %+v, %v", j.by.name, j.id, j.key, v, err)
	case !same:
		var e *api.Error
		if !errors.As(err, &e) || e.Status != http.StatusConflict || !hasField(e, api.IdempotencyHeader) {
			r.fail("%s reused key %s of job %s for another spec: %v", j.by.name, j.key, j.id, err)
		}
	}
}

func (r *roTest) submitted(a *roActor, s *api.JobSpec, want api.JobSpec, mustRefuse bool, v *api.Job, err error, key string) {
	owner := r.tenant(want.Tenant)
	if err != nil {
		var e *api.Error
		switch {
		case errors.As(err, &e) && e.Status == http.StatusBadRequest && len(s.After) > 0 && hasField(e, "after") && r.depEnded(s):
			r.logf("%s submit %v after %v: refused (dependency ended): %v", a.name, s.Command[2:], s.After, err)
		case errors.As(err, &e) && e.Status == http.StatusTooManyRequests && owner != nil && owner.limits.MaxQueued > 0:
			r.logf("%s submit: refused (max_queued %d): %v", a.name, owner.limits.MaxQueued, err)
		default:
			r.fail("%s: a valid submission (%+v) refused: %v", a.name, s, err)
		}
		return
	}
	if mustRefuse {
		r.fail("%s: job %s accepted after %v, a dependency already ended without finishing", a.name, v.ID, s.After)
	}
	if r.jobs[v.ID] != nil {
		r.fail("%s: the submission got job %s, already accepted before", a.name, v.ID)
	}
	if !reflect.DeepEqual(v.Spec, want) {
		r.fail("%s: job %s accepted with spec\n%+v\nsent\n%+v", a.name, v.ID, v.Spec, want)
	}
	// The answer is the job as submitted, pending; one with dependencies
	// as the scheduler has it then (it may have started already).
	if v.Tenant != want.Tenant || (v.State != api.StatePending && (len(s.After) == 0 || v.State != api.StateRunning)) || v.Held != s.Hold {
		r.fail("%s: job %s accepted as tenant %q, state %s, held %v; want %s, pending, held %v", a.name, v.ID, v.Tenant, v.State, v.Held, want.Tenant, s.Hold)
	}
	j := &roJob{id: v.ID, tenant: want.Tenant, spec: want, held: s.Hold, by: a, sent: s, key: key, waitRound: -1, at: time.Now()}
	r.jobs[v.ID] = j
	r.order = append(r.order, v.ID)
	sort.Slice(r.order, func(x, y int) bool { return jobNum(r.order[x]) < jobNum(r.order[y]) })
	r.logf("%s submit %s: tenant %s, gpus %d [%d,%d] %q, share %g mem %g mig %q type %q batch %d/%d/%d, prio %d, deadline %q, retries %v, limit %g, hold %v, after %v: %v",
		a.name, v.ID, want.Tenant, s.GPUs, s.MinGPUs, s.MaxGPUs, s.GPUType, s.GPUShare, s.GPUMemGiB, s.MIG, s.JobType, s.BatchSize, s.MaxBatchSize, s.MaxLocalBsz,
		s.Priority, s.Deadline, ptrInt(s.MaxRetries), s.TimeLimitS, s.Hold, s.After, s.Command[1:])
}

// depEnded says whether a dependency of s may have ended without
// finishing (it was last seen ended so, or may have ended since).
func (r *roTest) depEnded(s *api.JobSpec) bool {
	for _, d := range s.After {
		j := r.jobs[d]
		if j == nil {
			return true
		}
		if j.obs == nil || !api.Terminal(j.obs.State) || j.obs.State != api.StateFinished {
			return true // not finished when last seen: it may have failed since
		}
	}
	return false
}

func ptrInt(p *int) string {
	if p == nil {
		return "-"
	}
	return strconv.Itoa(*p)
}

func jobNum(id string) int {
	n, _ := strconv.Atoi(strings.TrimPrefix(id, "j"))
	return n
}

func hasField(e *api.Error, field string) bool {
	for _, f := range e.Fields {
		if f.Field == field {
			return true
		}
	}
	return false
}

// submitBurst submits a few jobs at once from several actors.
func (r *roTest) submitBurst() {
	n := 2 + r.pick(3)
	type sub struct {
		a    *roActor
		s    *api.JobSpec
		want api.JobSpec
		v    *api.Job
		err  error
	}
	subs := make([]*sub, n)
	for i := range subs {
		a := r.actors[r.pick(len(r.actors))]
		s := r.validSpec(a)
		s.After = nil
		subs[i] = &sub{a: a, s: s, want: accepted(s, a.name)}
	}
	r.logf("burst of %d submissions", n)
	done := make(chan struct{})
	for _, x := range subs {
		go func() {
			x.v, x.err = x.a.c.Submit(r.ctx, x.s)
			done <- struct{}{}
		}()
	}
	for range subs {
		<-done
	}
	for _, x := range subs {
		r.submitted(x.a, x.s, x.want, false, x.v, x.err, "")
	}
}

// submitInvalid sends a spec with bad fields and checks that the answer
// names each.
func (r *roTest) submitInvalid() {
	a := r.actors[r.pick(len(r.actors))]
	s := r.validSpec(a)
	s.After, s.Tenant = nil, ""
	code := http.StatusBadRequest
	var fields []string
	static := false // the field is checked by Validate, not against the server
	mutate := func() {
		static = true
		switch r.pick(14) {
		case 0:
			s.GPUs, s.MinGPUs, s.MaxGPUs = -1, 0, 0
			fields = append(fields, "gpus")
		case 1:
			s.GPUs, s.MinGPUs, s.MaxGPUs = 0, 0, 0
			fields = append(fields, "gpus")
		case 2:
			s.GPUs, s.MinGPUs, s.MaxGPUs, s.GPUType = len(r.types)+1, 0, 0, ""
			fields = append(fields, "gpus")
		case 3:
			s.GPUs, s.MinGPUs, s.MaxGPUs = 0, 3, 2
			fields = append(fields, "min_gpus|max_gpus")
		case 4:
			s.GPUType, static = "v100", false
			fields = append(fields, "gpu_type")
		case 5:
			s.Deadline = "tomorrow"
			fields = append(fields, "deadline")
		case 6:
			s.Command = nil
			fields = append(fields, "command")
		case 7:
			s.Command, static = []string{filepath.Join(r.locks, "no-such-program")}, false
			fields = append(fields, "command")
		case 8:
			m := 101
			s.MaxRetries = &m
			fields = append(fields, "max_retries")
		case 9:
			s.TimeLimitS = -1
			fields = append(fields, "time_limit_s")
		case 10:
			s.Env = map[string]string{"TIDE_JOB_ID": "x"}
			fields = append(fields, "env")
		case 11:
			switch r.pick(4) {
			case 0:
				s.EstimateS = -5
				fields = append(fields, "estimate_s")
			case 1:
				s.GPUs, s.MinGPUs, s.MaxGPUs, s.GPUShare, s.GPUMemGiB, s.MIG = 1, 0, 0, 1.5, 0, ""
				fields = append(fields, "gpu_share")
			case 2:
				s.GPUs, s.MinGPUs, s.MaxGPUs, s.GPUShare, s.GPUMemGiB, s.MIG = 1, 0, 0, 0, 0, "5g.40gb"
				fields = append(fields, "mig")
			default:
				// More memory than any GPU here has: checked against
				// the server.
				s.GPUs, s.MinGPUs, s.MaxGPUs, s.GPUShare, s.GPUMemGiB, s.MIG, static = 1, 0, 0, 0, 200, "", false
				fields = append(fields, "gpu_mem_gib")
			}
		case 12:
			if r.cfg.PairThroughputs != "" && r.pick(2) == 0 {
				s.JobType, s.GPUShare, s.GPUMemGiB, s.MIG, static = "Z", 0, 0, "", false
				fields = append(fields, "job_type")
				break
			}
			s.Workdir = "relative/dir"
			fields = append(fields, "workdir")
		default:
			s.After, static = []string{"j999999"}, false
			fields = append(fields, "after")
		}
	}
	if a.name != "admin" && r.pick(5) == 0 {
		s.Tenant = r.actors[1+r.pick(len(r.actors)-1)].name
		if s.Tenant == a.name {
			s.Tenant = "admin"
		}
		code = http.StatusForbidden
		fields = []string{"tenant"}
	} else if a.name != "admin" && r.pick(5) == 0 {
		// A dependency on another tenant's job: not the caller's to see.
		for _, id := range r.order {
			if r.jobs[id].tenant != a.name {
				s.After = []string{id}
				fields = []string{"after"}
				break
			}
		}
	}
	if fields == nil {
		mutate()
		if r.pick(3) == 0 && static && fields[0] != "gpus" && fields[0] != "min_gpus|max_gpus" {
			// Two bad fields: both named (GPU counts are checked against
			// each other only once the fields are each valid, hence not
			// two of them; the checks against the server's GPUs, programs
			// and jobs run on a spec that passed Validate).
			s.GPUs, s.MinGPUs, s.MaxGPUs = -1, 0, 0
			fields = append(fields, "gpus")
		}
	}
	_, err := a.c.Submit(r.ctx, s)
	r.logf("%s submit invalid (%v): %v", a.name, fields, oneLine(err))
	var e *api.Error
	if !errors.As(err, &e) || e.Status != code {
		r.fail("%s: a spec with bad %v (%+v): want %d naming it, got %v", a.name, fields, s, code, err)
	}
	for _, f := range fields {
		named := false
		for _, alt := range strings.Split(f, "|") {
			named = named || hasField(e, alt)
		}
		if !named {
			r.fail("%s: a spec with a bad %s (%+v) was refused without naming it: %v", a.name, f, s, err)
		}
	}
}

func oneLine(err error) string {
	if err == nil {
		return "ok"
	}
	return strings.ReplaceAll(err.Error(), "\n", ";")
}

// target picks a job and who acts on it: its owner mostly, the admin,
// or another tenant (who must get 404).
func (r *roTest) target() (*roJob, *roActor) {
	if len(r.order) == 0 {
		return nil, nil
	}
	// Recent jobs more often: they are the ones still waiting or running.
	i := len(r.order) - 1 - r.pick(min(len(r.order), 6))
	if r.pick(3) == 0 {
		i = r.pick(len(r.order))
	}
	j := r.jobs[r.order[i]]
	switch n := r.pick(10); {
	case n < 6:
		if a := r.tenant(j.tenant); a != nil {
			return j, a
		}
		return j, r.actors[0]
	case n < 8:
		return j, r.actors[0]
	default:
		for _, k := range r.rng.Perm(len(r.actors) - 1) {
			if a := r.actors[1+k]; a.name != j.tenant {
				return j, a
			}
		}
		return j, r.actors[0]
	}
}

// jobOp cancels, holds, releases or requeues a job and checks the answer
// against what the model knows.
func (r *roTest) jobOp(op string) {
	j, a := r.target()
	if j == nil {
		return
	}
	r.jobOpOn(op, j, a)
}

// jobOpOn is jobOp on job j as a.
func (r *roTest) jobOpOn(op string, j *roJob, a *roActor) {
	foreign := a.name != "admin" && a.name != j.tenant
	hold := op == "requeue" && r.pick(4) == 0
	var v *api.Job
	var err error
	switch op {
	case "cancel":
		v, err = a.c.Cancel(r.ctx, j.id)
	case "hold":
		v, err = a.c.Hold(r.ctx, j.id)
	case "release":
		v, err = a.c.Release(r.ctx, j.id)
	case "requeue":
		v, err = a.c.Requeue(r.ctx, j.id, hold)
	}
	last := "never seen"
	if j.obs != nil {
		last = j.obs.State
		if j.obs.Held {
			last += " held"
		}
	}
	r.logf("%s %s %s (last seen %s; model held %v, requeues %d)%s: %v", a.name, op, j.id, last, j.held, j.requeues, map[bool]string{true: " hold"}[hold], oneLine(err))
	var e *api.Error
	status := http.StatusOK
	if err != nil {
		if !errors.As(err, &e) {
			r.fail("%s %s %s: %v", a.name, op, j.id, err)
		}
		status = e.Status
	}
	if foreign {
		if status != http.StatusNotFound {
			r.fail("tenant %s could %s tenant %s's job %s: %d %v", a.name, op, j.tenant, j.id, status, err)
		}
		return
	}
	// What the job surely was when the request came: ended ones stay so
	// unless requeued, and held ones stay waiting.
	wasEnded := j.obs != nil && api.Terminal(j.obs.State)
	stableHeld := j.held && len(j.spec.After) == 0 && !wasEnded && !j.cancelled
	switch op {
	case "cancel":
		switch {
		case status == http.StatusOK:
			if wasEnded {
				r.fail("cancel of %s, which was %s: accepted", j.id, j.obs.State)
			}
			if v.State != api.StateCancelled {
				r.fail("cancel of %s answered state %s", j.id, v.State)
			}
			j.cancelled = true
		case status == http.StatusConflict:
			if stableHeld {
				r.fail("cancel of held job %s refused: %v", j.id, err)
			}
		default:
			r.fail("cancel of %s: %v", j.id, err)
		}
	case "hold":
		switch {
		case status == http.StatusOK:
			// (The answer is the job after the hold's commit, during which
			// a round may fail a job whose dependency failed.)
			depFailed := v.State == api.StateFailed && len(j.spec.After) > 0
			if wasEnded || (v.State != api.StatePending && v.State != api.StatePreempted && !depFailed) || !v.Held {
				r.fail("hold of %s (was %s): accepted, answering state %s, held %v", j.id, last, v.State, v.Held)
			}
			j.held = true
		case status == http.StatusConflict:
			if stableHeld {
				r.fail("hold of held job %s refused: %v", j.id, err)
			}
		default:
			r.fail("hold of %s: %v", j.id, err)
		}
	case "release":
		switch {
		case status == http.StatusOK:
			if !j.held || wasEnded || v.Held {
				r.fail("release of %s (model held %v, was %s): accepted, answering held %v", j.id, j.held, last, v.Held)
			}
			j.held = false
		case status == http.StatusConflict:
			if stableHeld {
				r.fail("release of held job %s refused: %v", j.id, err)
			}
			if !j.held || wasEnded || j.cancelled {
				break
			}
			// Held, with dependencies: refused only once they failed it.
			if g, gerr := r.actors[0].c.Job(r.ctx, j.id); gerr != nil || !api.Terminal(g.State) {
				r.fail("release of held job %s refused while it waits (%+v, %v): %v", j.id, g, gerr, err)
			}
		default:
			r.fail("release of %s: %v", j.id, err)
		}
	case "requeue":
		switch {
		case status == http.StatusOK:
			if r.tenant(j.tenant) == nil {
				r.fail("requeue of %s, a job of deleted tenant %s, accepted", j.id, j.tenant)
			}
			if v.State != api.StatePending || v.Held != hold || v.Requeues != j.requeues+1 {
				r.fail("requeue of %s answered state %s, held %v, requeues %d; want pending, held %v, requeues %d", j.id, v.State, v.Held, v.Requeues, hold, j.requeues+1)
			}
			if stableHeld {
				r.fail("requeue of %s, a job held waiting, accepted", j.id)
			}
			j.requeues++
			j.held, j.cancelled = hold, false
		case status == http.StatusConflict:
			if wasEnded && len(j.spec.After) == 0 && r.tenant(j.tenant) != nil && !(r.elastic() && isPart(&j.spec)) {
				r.fail("requeue of %s, which was %s, refused: %v", j.id, j.obs.State, err)
			}
		case status == http.StatusTooManyRequests:
			if o := r.tenant(j.tenant); o == nil || o.limits.MaxQueued == 0 {
				r.fail("requeue of %s refused 429 without a max_queued limit: %v", j.id, err)
			}
		default:
			r.fail("requeue of %s: %v", j.id, err)
		}
	}
}

// report sends a progress report for a job as its owner or the admin:
// progress and what the goodput model learns from (step times on the
// job's GPUs, gradient statistics), or a bad value, which is refused
// naming it.
func (r *roTest) report() {
	j, a := r.target()
	if j == nil {
		return
	}
	if a.name != "admin" && a.name != j.tenant {
		a = r.actors[0]
		if o := r.tenant(j.tenant); o != nil && r.pick(2) == 0 {
			a = o
		}
	}
	replicas := 1
	if j.obs != nil && len(j.obs.GPUs) > 0 {
		replicas = len(j.obs.GPUs)
	}
	p := float64(r.pick(100)) / 100
	rep := &api.Report{Progress: &p, StepTime: 0.02 + float64(r.pick(20))/100, Replicas: replicas, LocalBsz: 16 << r.pick(3),
		GradSqr: 1, GradVar: float64(1 + r.pick(1000)), Message: fmt.Sprintf("step %d", r.step)}
	rep.ComputeTime = rep.StepTime / 2
	bad := r.pick(5) == 0
	if bad {
		p = 1.5
	}
	err := a.c.Report(r.ctx, j.id, rep)
	r.logf("%s reports on %s (progress %g, step %gs on %d GPUs, local batch %d): %v", a.name, j.id, p, rep.StepTime, replicas, rep.LocalBsz, oneLine(err))
	var e *api.Error
	switch {
	case err == nil && !bad:
	case err == nil:
		r.fail("a report of progress %g on %s: accepted", p, j.id)
	case !errors.As(err, &e):
		r.fail("report on %s: %v", j.id, err)
	case e.Status == http.StatusBadRequest && bad && hasField(e, "progress"):
	case e.Status == http.StatusConflict:
		// Only once the job is over: a job held waiting is not.
		if j.held && len(j.spec.After) == 0 && !j.cancelled && (j.obs == nil || !api.Terminal(j.obs.State)) {
			r.fail("report on held job %s refused: %v", j.id, err)
		}
	default:
		r.fail("report on %s (bad %v): %v", j.id, bad, err)
	}
}

// read reads a job's detail, log or events, the usage or the cluster as
// some actor and checks what it may see.
func (r *roTest) read() {
	a := r.actors[r.pick(len(r.actors))]
	switch r.pick(4) {
	case 3:
		r.listPages(a)
	case 0:
		u, err := a.c.Usage(r.ctx, time.Time{}, time.Time{})
		r.logf("%s usage: %d jobs, %v", a.name, len(u.Jobs), oneLine(err))
		if err != nil {
			r.fail("%s usage: %v", a.name, err)
		}
		for _, ju := range u.Jobs {
			j := r.jobs[ju.Job]
			if j == nil || (a.name != "admin" && j.tenant != a.name) || ju.Tenant != j.tenant || ju.GPUHours < 0 {
				r.fail("%s usage shows %+v (model: %+v)", a.name, ju, j)
			}
		}
	case 1:
		j, _ := r.target()
		if j == nil {
			return
		}
		own := a.name == "admin" || a.name == j.tenant
		data, _, state, lerr := a.c.Logs(r.ctx, j.id, 0)
		v, err := a.c.Job(r.ctx, j.id) // after the log: it has every attempt the log names
		evs, eerr := a.c.Events(r.ctx, j.id)
		r.logf("%s reads %s: %v, log %d bytes %v, %d events %v", a.name, j.id, oneLine(err), len(data), oneLine(lerr), len(evs), oneLine(eerr))
		if !own {
			for _, e := range []error{err, lerr, eerr} {
				if !isStatus(e, http.StatusNotFound) {
					r.fail("tenant %s reads tenant %s's job %s: %v", a.name, j.tenant, j.id, e)
				}
			}
			return
		}
		if err != nil || lerr != nil || eerr != nil {
			r.fail("%s reads its job %s: %v / %v / %v", a.name, j.id, err, lerr, eerr)
		}
		if !slices.Contains(jobStatesAll, state) {
			r.fail("log of %s: state header %q", j.id, state)
		}
		if !reflect.DeepEqual(v.Spec, j.spec) {
			r.fail("job %s has spec\n%+v\naccepted\n%+v", j.id, v.Spec, j.spec)
		}
		r.checkLog(j.id, string(data), v)
		if b, err := json.Marshal(evs); err == nil {
			r.noLeak(a, "events of "+j.id, b, j.id)
		}
	default:
		r.checkCluster(a)
	}
}

// listPages lists a's jobs a page at a time (limit, after, next), all of
// them or those in some states: the pages together are a's jobs in
// submission order, each once, each in a state asked for (as it was when
// its page was read).
func (r *roTest) listPages(a *roActor) {
	limit := 1 + r.pick(4)
	var states []string
	if r.pick(2) == 0 {
		for _, k := range r.rng.Perm(len(jobStatesAll))[:1+r.pick(2)] {
			states = append(states, jobStatesAll[k])
		}
	}
	var got []string
	q := url.Values{"limit": {strconv.Itoa(limit)}}
	if states != nil {
		q.Set("state", strings.Join(states, ","))
	}
	for pages := 0; ; pages++ {
		l, err := a.c.ListJobs(r.ctx, q)
		if err != nil {
			r.fail("%s lists jobs %v: %v", a.name, q, err)
		}
		if len(l.Jobs) > limit || pages > len(r.order)+1 {
			r.fail("%s lists jobs %v: %d jobs on page %d", a.name, q, len(l.Jobs), pages)
		}
		for _, v := range l.Jobs {
			if states != nil && !slices.Contains(states, v.State) {
				r.fail("%s lists jobs in %v: %s is %s", a.name, states, v.ID, v.State)
			}
			got = append(got, v.ID)
		}
		if l.Next == "" {
			break
		}
		q.Set("after", l.Next)
	}
	r.logf("%s lists its jobs %d a page, states %v: %d", a.name, limit, states, len(got))
	var mine []string
	for _, id := range r.order {
		if a.name == "admin" || r.jobs[id].tenant == a.name {
			mine = append(mine, id)
		}
	}
	if states == nil && !slices.Equal(got, mine) {
		r.fail("%s's pages of %d list %v; its jobs are %v", a.name, limit, got, mine)
	}
	for i, id := range got {
		if !slices.Contains(mine, id) || (i > 0 && jobNum(id) <= jobNum(got[i-1])) {
			r.fail("%s's pages of %d in %v list %v; its jobs are %v", a.name, limit, states, got, mine)
		}
	}
}

var jobStatesAll = []string{api.StatePending, api.StateRunning, api.StatePreempted, api.StateFinished, api.StateFailed, api.StateCancelled, api.StateDeclined}

var gpujobLine = regexp.MustCompile(`(?m)^gpujob (\S+) attempt (\d+) gpus (\S*) n (\d*) share (\S*) batch (\d*) (\d*) (\d*)$`)

// checkLog checks a job's log: only its own attempts, each on the GPUs
// the job's view gives it (v: read after the log), told its GPU count,
// its part of each GPU (a packed job half), and a batch that its GPUs,
// local batch and accumulation steps make up, the one the API records,
// within the spec's batch sizes.
func (r *roTest) checkLog(id, log string, v *api.Job) {
	spec, err := v.Spec.Job(id, 0)
	if err != nil {
		r.fail("job %s's spec: %v", id, err)
	}
	for _, m := range gpujobLine.FindAllStringSubmatch(log, -1) {
		if m[1] != id {
			r.fail("the log of %s holds a line of job %s: %q", id, m[1], m[0])
		}
		n, _ := strconv.Atoi(m[2])
		if n < 1 || n > len(v.Attempts) {
			r.fail("the log of %s has attempt %d, the job %d attempts", id, n, len(v.Attempts))
		}
		att := v.Attempts[n-1]
		var gs []string
		for _, g := range att.GPUs {
			gs = append(gs, strconv.Itoa(g))
		}
		if got := strings.Join(gs, ","); got != m[3] {
			r.fail("job %s attempt %d ran on CUDA_VISIBLE_DEVICES=%s, the API says GPUs %s", id, n, m[3], got)
		}
		if m[4] != strconv.Itoa(len(att.GPUs)) {
			r.fail("job %s attempt %d on GPUs %v was told TIDE_GPUS=%s", id, n, att.GPUs, m[4])
		}
		switch share, _ := strconv.ParseFloat(m[5], 64); {
		case spec.Fractional():
			want, _ := spec.Demand(r.mem[att.GPUs[0]])
			if math.Abs(share-want) > 1e-5 {
				r.fail("job %s attempt %d, asking %+v of GPU %d, was told TIDE_GPU_SHARE=%q, want %g", id, n, v.Spec, att.GPUs[0], m[5], want)
			}
		case m[5] != "" && !(r.packedEver && m[5] == "0.5"):
			r.fail("job %s attempt %d, a whole-GPU job (packing %v), was told TIDE_GPU_SHARE=%q", id, n, r.packedEver, m[5])
		}
		if v.Spec.BatchSize == 0 {
			if m[6] != "" {
				r.fail("job %s attempt %d, without a batch_size, was told TIDE_BATCH_SIZE=%s", id, n, m[6])
			}
			continue
		}
		b, _ := strconv.Atoi(m[6])
		local, _ := strconv.Atoi(m[7])
		accum, _ := strconv.Atoi(m[8])
		// The batch is the spec's, or under a policy adapting batches up
		// to max_batch_size, rounded up to whole passes of equal local
		// batches.
		hi := v.Spec.BatchSize
		if r.adaptEver {
			hi = max(hi, v.Spec.MaxBatchSize)
		}
		hi += len(att.GPUs)*(accum+1) - 1
		switch {
		case b != len(att.GPUs)*local*(accum+1):
			r.fail("job %s attempt %d on %d GPUs: batch %d, local %d, %d accumulation steps", id, n, len(att.GPUs), b, local, accum)
		case b < v.Spec.BatchSize || b > hi:
			r.fail("job %s attempt %d: batch %d, want %d to %d (adapting policies %v)", id, n, b, v.Spec.BatchSize, hi, r.adaptEver)
		case v.Spec.MaxLocalBsz > 0 && local > v.Spec.MaxLocalBsz:
			r.fail("job %s attempt %d: local batch %d over max_local_bsz %d", id, n, local, v.Spec.MaxLocalBsz)
		case att.BatchSize != b || att.LocalBsz != local || att.AccumSteps != accum:
			r.fail("job %s attempt %d ran with batch %d/%d/%d, the API records %d/%d/%d", id, n, b, local, accum, att.BatchSize, att.LocalBsz, att.AccumSteps)
		}
	}
}

// foreign has a tenant try another tenant's job, or see beyond its own.
func (r *roTest) foreign() {
	a := r.actors[1+r.pick(len(r.actors)-1)]
	var other *roJob
	for _, k := range r.rng.Perm(len(r.order)) {
		if j := r.jobs[r.order[k]]; j.tenant != a.name {
			other = j
			break
		}
	}
	switch r.pick(3) {
	case 0:
		if other == nil {
			return
		}
		err := a.c.Report(r.ctx, other.id, &api.Report{Message: "not mine"})
		r.logf("%s reports on %s's %s: %v", a.name, other.tenant, other.id, oneLine(err))
		if !isStatus(err, http.StatusNotFound) {
			r.fail("tenant %s reported on tenant %s's job %s: %v", a.name, other.tenant, other.id, err)
		}
	case 1:
		name := r.actors[r.pick(len(r.actors))].name
		if name == a.name {
			name = "admin"
		}
		_, err := a.c.ListJobs(r.ctx, url.Values{"tenant": {name}})
		r.logf("%s lists %s's jobs: %v", a.name, name, oneLine(err))
		var e *api.Error
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !hasField(e, "tenant") {
			r.fail("tenant %s listing tenant %s's jobs: %v", a.name, name, err)
		}
	default:
		_, err := a.c.Job(r.ctx, "j999999")
		r.logf("%s reads j999999: %v", a.name, oneLine(err))
		if !isStatus(err, http.StatusNotFound) {
			r.fail("no such job: %v", err)
		}
	}
}

// setQuota changes a tenant's limits.
func (r *roTest) setQuota() {
	a := r.actors[1+r.pick(len(r.actors)-1)]
	l := api.Limits{}
	if r.pick(3) > 0 {
		l.MaxGPUs = 1 + r.pick(len(r.types))
	}
	if r.pick(4) == 0 {
		l.MaxQueued = 2 + r.pick(3)
	}
	cl, err := r.actors[0].c.Cluster(r.ctx)
	if err != nil {
		r.fail("cluster: %v", err)
	}
	t, err := r.actors[0].c.UpdateTenant(r.ctx, a.name, &api.TenantUpdate{Limits: &l})
	r.logf("admin sets %s's limits to %+v (round %d): %v", a.name, l, cl.Rounds, oneLine(err))
	if err != nil || t.Limits != l {
		r.fail("setting %s's limits to %+v: %+v %v", a.name, l, t, err)
	}
	// A round running now may still use the old quota.
	a.oldGPUs = quotaOf(a.limits)
	if a.quotaFrom > cl.Rounds {
		a.oldGPUs = max(a.oldGPUs, 1<<20) // the quota before is not in force yet either: no bound
	}
	a.limits, a.quotaFrom = l, cl.Rounds+2
	// A tenant with a quota under a waiting job's needs still queues it.
}

func quotaOf(l api.Limits) int {
	if l.MaxGPUs == 0 {
		return 1 << 20
	}
	return l.MaxGPUs
}

// rotate gives a tenant a new token: the old one stops working.
func (r *roTest) rotate() {
	a := r.actors[1+r.pick(len(r.actors)-1)]
	if r.pick(3) == 0 {
		// Revoked: no token works until the rotation.
		v, err := r.actors[0].c.RevokeToken(r.ctx, a.name)
		r.logf("admin revokes %s's token: %v", a.name, oneLine(err))
		if err != nil || !v.Revoked {
			r.fail("revoking %s's token: %+v %v", a.name, v, err)
		}
		if _, err := a.c.Jobs(r.ctx, ""); !isStatus(err, http.StatusUnauthorized) {
			r.fail("%s's token after a revocation: %v", a.name, err)
		}
	}
	t, err := r.actors[0].c.RotateToken(r.ctx, a.name)
	r.logf("admin rotates %s's token: %v", a.name, oneLine(err))
	if err != nil || t.Token == "" || t.Token == a.token {
		r.fail("rotating %s's token: %+v %v", a.name, t, err)
	}
	old := a.c
	a.token, a.c = t.Token, api.NewClient(r.ts.url, t.Token)
	if _, err := old.Jobs(r.ctx, ""); !isStatus(err, http.StatusUnauthorized) {
		r.fail("%s's old token after a rotation: %v", a.name, err)
	}
}

// deleteTenant deletes a tenant (refused while it has unfinished jobs,
// unless they are cancelled with it) and adds another in its place.
func (r *roTest) deleteTenant() {
	k := 1 + r.pick(len(r.actors)-1)
	a := r.actors[k]
	admin := r.actors[0]
	cancel := r.pick(3) > 0
	ids, err := admin.c.DeleteTenant(r.ctx, a.name, cancel)
	r.logf("admin deletes tenant %s (cancel jobs %v): %v %v", a.name, cancel, ids, oneLine(err))
	var open []string
	for _, id := range r.order {
		if j := r.jobs[id]; j.tenant == a.name && !api.Terminal(j.obs.State) {
			open = append(open, id)
		}
	}
	if err != nil {
		// Refused only with unfinished jobs (the last seen are still
		// open, or some ended since).
		if cancel || !isStatus(err, http.StatusConflict) || len(open) == 0 {
			r.fail("deleting tenant %s (cancel jobs %v, open %v): %v", a.name, cancel, open, err)
		}
		return
	}
	for _, id := range ids {
		j := r.jobs[id]
		if j == nil || j.tenant != a.name {
			r.fail("deleting tenant %s cancelled job %s (model %+v)", a.name, id, j)
		}
		j.cancelled = true
	}
	if _, err := a.c.Jobs(r.ctx, ""); !isStatus(err, http.StatusUnauthorized) {
		r.fail("the token of deleted tenant %s: %v", a.name, err)
	}
	l, err := admin.c.ListJobs(r.ctx, url.Values{"tenant": {a.name}})
	var e *api.Error
	switch {
	case err != nil && !slices.ContainsFunc(r.order, func(id string) bool { return r.jobs[id].tenant == a.name }):
		// Without jobs, the tenant is no more (400 naming it).
		if !errors.As(err, &e) || e.Status != http.StatusBadRequest || !hasField(e, "tenant") {
			r.fail("the admin lists deleted tenant %s's jobs (it had none): %v", a.name, err)
		}
	case err != nil:
		r.fail("the admin lists deleted tenant %s's jobs: %v", a.name, err)
	default:
		for _, v := range l.Jobs {
			if v.Tenant != a.name || !api.Terminal(v.State) {
				r.fail("listing deleted tenant %s's jobs shows %s of %s, %s", a.name, v.ID, v.Tenant, v.State)
			}
		}
	}
	name := fmt.Sprintf("t%d", r.step)
	ten, err := admin.c.CreateTenant(r.ctx, name)
	if err != nil {
		r.fail("creating tenant %s: %v", name, err)
	}
	r.actors[k] = &roActor{name: name, token: ten.Token, c: api.NewClient(r.ts.url, ten.Token)}
	r.logf("tenant %s", name)
}

// restart closes the server and starts another on the same database.
func (r *roTest) restart() {
	r.ts.close(r.t)
	switch n := r.pick(6); {
	case n < 2:
		// Another policy: the state the last one saved must not break it.
		r.cfg.Policy = r.randomPolicy()
	case n == 2:
		// A policy tide serve refuses: the error says why, and the
		// database is left for the next start.
		bad := r.cfg
		// (tiresias-gittins without dist=FILE learns from the jobs there
		// are: refused only without any.)
		bad.Policy = []string{"tiresias-gittins", "nosuch", "fifo:nosuchknob=1", "gavel-fifo:space_sharing=true"}[r.pick(4)]
		if bad.Policy == "tiresias-gittins" && len(r.order) > 0 {
			bad.Policy = "nosuch"
		}
		s, err := New(bad)
		if err == nil {
			_ = s.Close(r.ctx)
			r.fail("tide serve started with --policy %s", bad.Policy)
		}
		if msg := err.Error(); !strings.Contains(msg, "--policy") || !strings.Contains(msg, strings.SplitN(bad.Policy, ":", 2)[0]) {
			r.fail("tide serve refused --policy %s with an error naming neither the flag nor the policy: %v", bad.Policy, err)
		}
		r.logf("--policy %s refused: %v", bad.Policy, oneLine(err))
	}
	r.logf("restart under %s", r.cfg.Policy)
	r.packedEver = r.packedEver || r.packing()
	r.adaptEver = r.adaptEver || r.adapts()
	r.ts = startServer(r.t, r.cfg)
	r.reconnect()
}

// reconnect points the actors' clients at the new server, whose rounds
// apply the quotas afresh.
func (r *roTest) reconnect() {
	// A new server gives its reasons from its first round on, whatever
	// round count it restored with the policy's state.
	for _, j := range r.jobs {
		j.waitRound = -1
	}
	for _, a := range r.actors {
		a.c = api.NewClient(r.ts.url, a.token)
	}
	r.actors[0].token = r.ts.token
	r.actors[0].c = r.ts.admin
	cl, err := r.actors[0].c.Cluster(r.ctx)
	if err != nil {
		r.fail("cluster after the restart: %v", err)
	}
	for _, a := range r.actors[1:] {
		// Jobs re-adopted run whatever the quota until a round.
		a.oldGPUs, a.quotaFrom = 1<<20, cl.Rounds+2
	}
}

// check compares what the server shows with the model.
func (r *roTest) check() {
	admin := r.actors[0]
	cl, err := admin.c.Cluster(r.ctx)
	if err != nil {
		r.fail("cluster: %v", err)
	}
	r.checkClusterView(admin, cl)
	r.rounds = cl.Rounds
	list, err := admin.c.ListJobs(r.ctx, nil)
	if err != nil {
		r.fail("list: %v", err)
	}
	listed := time.Now()
	var ids []string
	for i := range list.Jobs {
		ids = append(ids, list.Jobs[i].ID)
	}
	if !slices.Equal(ids, r.order) {
		r.fail("the admin lists jobs %v; accepted %v", ids, r.order)
	}
	used := map[string]int{} // tenant -> GPUs
	for i := range list.Jobs {
		v := &list.Jobs[i]
		j := r.jobs[v.ID]
		r.checkJob(j, v, list)
		used[v.Tenant] += len(v.GPUs)
	}
	r.checkSharing(list.Jobs, cl)
	for i := range list.Jobs {
		j := r.jobs[list.Jobs[i].ID]
		j.obs, j.obsAt = &list.Jobs[i], listed
	}
	for _, a := range r.actors[1:] {
		q := quotaOf(a.limits)
		if cl.Rounds < a.quotaFrom {
			q = max(q, a.oldGPUs)
		}
		if used[a.name] > q {
			r.fail("tenant %s holds %d GPUs, over its quota of %d (limits %+v)", a.name, used[a.name], q, a.limits)
		}
		mine, err := a.c.Jobs(r.ctx, "")
		if err != nil {
			r.fail("%s lists its jobs: %v", a.name, err)
		}
		if b, err := json.Marshal(mine); err == nil {
			r.noLeak(a, "job list", b) // their reasons too
		}
		var got, want []string
		for _, v := range mine {
			got = append(got, v.ID)
		}
		for _, id := range r.order {
			if r.jobs[id].tenant == a.name {
				want = append(want, id)
			}
		}
		if !slices.Equal(got, want) {
			r.fail("tenant %s lists %v; its jobs are %v", a.name, got, want)
		}
	}
	if data, err := os.ReadFile(filepath.Join(r.locks, "conflicts")); err == nil {
		r.fail("two processes held a GPU at once:\n%s", data)
	}
}

// checkSharing checks who holds each GPU, by the jobs' views: whole-GPU
// jobs alone, or two of them packed where a packing policy ran, their
// job types measured; or parts, their shares summing to at most the GPU
// and their memory to at most its memory; never parts beside a whole-GPU
// job. The cluster view lists the same holders, counting a GPU once.
func (r *roTest) checkSharing(jobs []api.Job, cl *api.Cluster) {
	type holders struct {
		ids         []string
		whole, frac int
		share, mem  float64
		types       []string
	}
	by := map[int]*holders{}
	for i := range jobs {
		v := &jobs[i]
		j, err := v.Spec.Job(v.ID, 0)
		if err != nil {
			r.fail("job %s's spec: %v", v.ID, err)
		}
		for _, g := range v.GPUs {
			h := by[g]
			if h == nil {
				h = &holders{}
				by[g] = h
			}
			h.ids = append(h.ids, v.ID)
			if !j.Fractional() {
				h.whole++
				h.types = append(h.types, v.Spec.JobType)
				continue
			}
			share, mem := j.Demand(r.mem[g])
			h.frac++
			h.share += share
			h.mem += mem
		}
	}
	for g, h := range by {
		switch {
		case h.whole > 0 && h.frac > 0:
			r.fail("GPU %d holds whole-GPU jobs and parts at once: %v", g, h.ids)
		case h.whole > 2 || (h.whole == 2 && !r.packedEver):
			r.fail("GPU %d is held by %v (packing: %v)", g, h.ids, r.packedEver)
		case h.whole == 2 && (h.types[0] == "" || h.types[1] == ""):
			r.fail("GPU %d packs %v, job types %q: a pair the file does not measure", g, h.ids, h.types)
		case h.share > 1+1e-9 || h.mem > r.mem[g]+1e-9:
			r.fail("GPU %d's parts (%v) sum to %.3g of its compute and %.3g GiB of its %.3g GiB", g, h.ids, h.share, h.mem, r.mem[g])
		}
	}
	// The cluster read before and after the list: when both agree, the
	// list, read between them, names the same holders.
	after, err := r.actors[0].c.Cluster(r.ctx)
	if err != nil {
		r.fail("cluster: %v", err)
	}
	if !reflect.DeepEqual(holdersOf(cl), holdersOf(after)) {
		return
	}
	for g, got := range holdersOf(cl) {
		var want []string
		if h := by[g]; h != nil {
			want = h.ids
		}
		if !slices.Equal(got, want) {
			r.fail("cluster: GPU %d held by %v, the jobs' views say %v", g, got, want)
		}
	}
}

// holdersOf is who holds each GPU in a cluster view, by CUDA index.
func holdersOf(cl *api.Cluster) map[int][]string {
	m := map[int][]string{}
	for _, g := range cl.GPUs {
		switch {
		case len(g.Jobs) > 0:
			m[g.Index] = g.Jobs
		case g.Job != "":
			m[g.Index] = []string{g.Job}
		default:
			m[g.Index] = nil
		}
	}
	return m
}

// checkJob checks one job's view against the model and its last one.
func (r *roTest) checkJob(j *roJob, v *api.Job, list *api.JobList) {
	if !reflect.DeepEqual(v.Spec, j.spec) || v.Tenant != j.tenant {
		r.fail("job %s shows tenant %s, spec\n%+v\naccepted for %s with\n%+v", v.ID, v.Tenant, v.Spec, j.tenant, j.spec)
	}
	if v.Requeues != j.requeues {
		r.fail("job %s has %d requeues, %d accepted", v.ID, v.Requeues, j.requeues)
	}
	if !slices.Contains(jobStatesAll, v.State) {
		r.fail("job %s in state %q", v.ID, v.State)
	}
	if (v.State == api.StateCancelled) != j.cancelled {
		r.fail("job %s is %s (%s); cancelled by a request: %v", v.ID, v.State, v.Reason, j.cancelled)
	}
	if !api.Terminal(v.State) && v.Held != j.held {
		r.fail("job %s (%s) shows held %v; the requests made it %v", v.ID, v.State, v.Held, j.held)
	}
	if v.Held && v.State == api.StateRunning {
		r.fail("job %s is running while held", v.ID)
	}
	// GPUs: a running job holds between its min and max, of its type.
	g := v.Spec.GPUs
	if g == 0 {
		g = v.Spec.MaxGPUs
	}
	lo, hi := v.Spec.MinGPUs, v.Spec.MaxGPUs
	if lo == 0 {
		lo = g
	}
	if hi == 0 {
		hi = g
	}
	if (v.State == api.StateRunning) != (len(v.GPUs) > 0) {
		r.fail("job %s is %s holding GPUs %v", v.ID, v.State, v.GPUs)
	}
	if len(v.GPUs) > 0 && (len(v.GPUs) < lo || len(v.GPUs) > hi) {
		r.fail("job %s holds %d GPUs %v, wants %d to %d", v.ID, len(v.GPUs), v.GPUs, lo, hi)
	}
	var typ string
	for _, d := range v.GPUs {
		t, ok := r.types[d]
		if !ok || (typ != "" && t != typ) || (v.Spec.GPUType != "" && t != v.Spec.GPUType) {
			r.fail("job %s (gpu_type %q) holds GPUs %v of types %v", v.ID, v.Spec.GPUType, v.GPUs, r.types)
		}
		typ = t
	}
	// Dependencies: started only once each finished (or was requeued
	// after finishing, which the model saw as an increase).
	if o := j.obs; v.Started != nil && (o == nil || o.Started == nil) && j.requeues == 0 {
		for _, d := range v.Spec.After {
			dj := r.jobs[d]
			var now *api.Job
			for i := range list.Jobs {
				if list.Jobs[i].ID == d {
					now = &list.Jobs[i]
				}
			}
			if dj == nil || now == nil {
				r.fail("job %s started after unknown job %s", v.ID, d)
			}
			requeued := dj.obs != nil && now.Requeues > dj.obs.Requeues
			if now.State != api.StateFinished && !requeued {
				r.fail("job %s started while its dependency %s is %s", v.ID, d, now.State)
			}
		}
	}
	// Why: a job a policy declined or that failed says so; one waiting
	// through two rounds says what it waits for.
	switch {
	case v.State == api.StateDeclined && (v.Spec.Deadline == "" || !strings.Contains(v.Reason, "deadline")):
		r.fail("job %s (deadline %q) declined with reason %q: want the deadline named", v.ID, v.Spec.Deadline, v.Reason)
	case v.State == api.StateFailed && v.Reason == "":
		r.fail("job %s failed without a reason", v.ID)
	case v.State != api.StatePending && v.State != api.StatePreempted:
		j.waitRound = -1
	case j.waitRound < 0 || (j.obs != nil && (j.obs.State != v.State || j.obs.Requeues != v.Requeues)):
		j.waitRound = r.rounds
	case r.rounds >= j.waitRound+2 && v.Reason == "" && v.Waiting == "":
		r.fail("job %s, %s (held %v) since round %d, is at round %d without a reason", v.ID, v.State, v.Held, j.waitRound, r.rounds)
	}
	o := j.obs
	if v.Held && !api.Terminal(v.State) && (o == nil || !o.Held || o.Requeues != v.Requeues) {
		j.heldAttempts = r.attempts(v.ID)
	}
	if o == nil || o.Requeues != v.Requeues {
		return
	}
	// Same run as last seen.
	if api.Terminal(o.State) {
		if v.State != o.State || !timeEq(v.Ended, o.Ended) || v.Restarts != o.Restarts || v.Failures != o.Failures || !timeEq(v.Started, o.Started) {
			r.fail("job %s, %s (ended %v, started %v, %d restarts, %d failures), became %s (ended %v, started %v, %d restarts, %d failures) without a requeue",
				v.ID, o.State, o.Ended, o.Started, o.Restarts, o.Failures, v.State, v.Ended, v.Started, v.Restarts, v.Failures)
		}
		return
	}
	if o.Held && v.Held {
		// No new attempt while held. (A launch begun before a requeue
		// with hold may still record the job's first start: its
		// attempt, of the run before, is stopped once launched.)
		if n := r.attempts(v.ID); v.State == api.StateRunning || v.Restarts != o.Restarts || n != j.heldAttempts {
			r.fail("held job %s started: was %s (%d restarts, %d attempts), now %s (%d restarts, %d attempts)", v.ID, o.State, o.Restarts, j.heldAttempts, v.State, v.Restarts, n)
		}
	}
	if o.Started != nil && !timeEq(v.Started, o.Started) {
		r.fail("job %s first started at %v, now %v", v.ID, o.Started, v.Started)
	}
	if v.Restarts < o.Restarts || v.Failures < o.Failures || v.Preemptions < o.Preemptions {
		r.fail("job %s's counters went back: restarts %d -> %d, failures %d -> %d, preemptions %d -> %d",
			v.ID, o.Restarts, v.Restarts, o.Failures, v.Failures, o.Preemptions, v.Preemptions)
	}
}

// attempts is the number of attempts job id has had.
func (r *roTest) attempts(id string) int {
	v, err := r.actors[0].c.Job(r.ctx, id)
	if err != nil {
		r.fail("job %s: %v", id, err)
	}
	return len(v.Attempts)
}

func timeEq(a, b *time.Time) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Equal(*b)
}

func (r *roTest) checkCluster(a *roActor) {
	cl, err := a.c.Cluster(r.ctx)
	r.logf("%s reads the cluster: %v", a.name, oneLine(err))
	if err != nil {
		r.fail("%s cluster: %v", a.name, err)
	}
	r.checkClusterView(a, cl)
}

// checkClusterView checks the cluster as a sees it: each GPU held by at
// most one job, a's jobs named, the others' not.
func (r *roTest) checkClusterView(a *roActor, cl *api.Cluster) {
	if cl.Total != len(r.types) || len(cl.GPUs) != len(r.types) || cl.Allocated > cl.Total {
		r.fail("cluster: %d GPUs listed, total %d, allocated %d; the server has %d", len(cl.GPUs), cl.Total, cl.Allocated, len(r.types))
	}
	n := 0
	for _, g := range cl.GPUs {
		if r.types[g.Index] != g.Type {
			r.fail("cluster: GPU %d of type %s, configured %s", g.Index, g.Type, r.types[g.Index])
		}
		if len(g.Jobs) > 0 && (g.Job != g.Jobs[0] || len(g.Jobs) == 1) {
			r.fail("cluster: GPU %d: job %q, jobs %v: want jobs only when shared, job their first", g.Index, g.Job, g.Jobs)
		}
		for _, id := range g.Jobs {
			if j := r.jobs[id]; id != "(other tenant)" && (j == nil || (a.name != "admin" && j.tenant != a.name)) {
				r.fail("%s's cluster view shows GPU %d shared by %v (model %+v)", a.name, g.Index, g.Jobs, j)
			}
			if id == "(other tenant)" && a.name == "admin" {
				r.fail("the admin's cluster view hides GPU %d's jobs %v", g.Index, g.Jobs)
			}
		}
		if g.Job == "" {
			continue
		}
		n++
		if g.Job == "(other tenant)" {
			if a.name == "admin" {
				r.fail("the admin's cluster view hides GPU %d's job", g.Index)
			}
			continue
		}
		j := r.jobs[g.Job]
		if j == nil || (a.name != "admin" && j.tenant != a.name) {
			r.fail("%s's cluster view shows GPU %d held by %s (model %+v)", a.name, g.Index, g.Job, j)
		}
	}
	if n != cl.Allocated {
		r.fail("cluster: %d GPUs held, allocated says %d", n, cl.Allocated)
	}
}

// finish releases every held job and lifts the quotas, then waits until
// every job has ended (nothing may wait for ever on free GPUs), and
// checks the logs.
func (r *roTest) finish() {
	r.step = 0
	r.logf("finish: releasing, lifting quotas")
	admin := r.actors[0]
	for _, a := range r.actors[1:] {
		if _, err := admin.c.UpdateTenant(r.ctx, a.name, &api.TenantUpdate{Limits: &api.Limits{}}); err != nil {
			r.fail("lifting %s's limits: %v", a.name, err)
		}
		a.limits = api.Limits{}
	}
	for _, id := range r.order {
		j := r.jobs[id]
		if !j.held {
			continue
		}
		_, err := admin.c.Release(r.ctx, id)
		if err == nil {
			j.held = false
		} else if !isStatus(err, http.StatusConflict) || !api.Terminal(r.jobs[id].obs.State) && len(j.spec.After) == 0 {
			r.fail("release of %s at the end: %v", id, err)
		}
	}
	if r.elastic() && slices.ContainsFunc(r.order, func(id string) bool {
		j := r.jobs[id]
		return isPart(&j.spec) && !api.Terminal(j.obs.State)
	}) {
		// Parts wait under an elastic policy: back to one that runs them.
		for r.elastic() {
			r.cfg.Policy = r.randomPolicy()
		}
		r.ts.close(r.t)
		r.logf("restart under %s, for the parts", r.cfg.Policy)
		r.packedEver = r.packedEver || r.packing()
		r.adaptEver = r.adaptEver || r.adapts()
		r.ts = startServer(r.t, r.cfg)
		r.reconnect()
	}
	if i, _ := policy.Lookup(r.cfg.Policy); i.Name == "pollux" && !strings.Contains(r.cfg.Policy, "restart_penalty") {
		// Pollux leaves a waiting job whose restart factor is 0 (young,
		// restarted often) off free GPUs until its age outgrows D x
		// restarts, by design (elastic.TestPolluxRestartPenaltyFromCosts):
		// minutes here. Without the penalty every job ends promptly.
		r.ts.close(r.t)
		r.cfg.Policy += ":restart_penalty=0"
		r.logf("restart under %s, for the jobs restarted often", r.cfg.Policy)
		r.ts = startServer(r.t, r.cfg)
		r.reconnect()
	}
	deadline := time.Now().Add(90 * time.Second)
	for {
		r.check()
		var open []string
		for _, id := range r.order {
			if v := r.jobs[id].obs; !api.Terminal(v.State) {
				var evs []string
				if es, err := admin.c.Events(r.ctx, id); err == nil {
					for _, e := range es {
						evs = append(evs, e.Kind+" "+e.Message)
					}
				}
				open = append(open, fmt.Sprintf("%s %s held %v waiting %q reason %q; events:\n    %s", id, v.State, v.Held, v.Waiting, v.Reason, strings.Join(evs, "\n    ")))
			}
		}
		if len(open) == 0 {
			break
		}
		if time.Now().After(deadline) {
			cl, _ := admin.c.Cluster(r.ctx)
			r.fail("jobs still open after 90 s with holds released and quotas lifted (cluster %+v):\n%s", cl, strings.Join(open, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Every process gone: each attempt launched has ended.
	views := map[string]*api.Job{}
	for _, id := range r.order {
		for {
			v, err := admin.c.Job(r.ctx, id)
			if err != nil {
				r.fail("job %s: %v", id, err)
			}
			views[id] = v
			if !slices.ContainsFunc(v.Attempts, func(a api.Attempt) bool { return a.Started != nil && a.Ended == nil }) {
				break
			}
			if time.Now().After(deadline) {
				r.fail("job %s, %s, has attempts still running: %+v", id, v.State, v.Attempts)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	for _, id := range r.order {
		data, _, _, err := admin.c.Logs(r.ctx, id, 0)
		if err != nil {
			r.fail("log of %s: %v", id, err)
		}
		r.checkLog(id, string(data), views[id])
		r.checkEvents(id)
	}
	r.checkAttempts(views)
	r.checkMPS(deadline)
	states := map[string]int{}
	for _, id := range r.order {
		states[r.jobs[id].obs.State]++
	}
	r.t.Logf("seed %d: %d jobs accepted, ended %v", r.seed, len(r.order), states)
	if os.Getenv("TIDE_RANDOM_OPS_LOG") != "" {
		r.t.Logf("steps:\n  %s", strings.Join(r.hist, "\n  "))
		if r.mpsCalls != "" {
			b, _ := os.ReadFile(r.mpsCalls)
			r.t.Logf("MPS control calls:\n%s", b)
		}
	}
}

// checkMPS checks the stand-in MPS control program's calls once every
// job has ended: on each GPU a daemon started and stopped in turn, each
// one stopped by now.
func (r *roTest) checkMPS(deadline time.Time) {
	if r.mpsCalls == "" {
		return
	}
	for {
		b, err := os.ReadFile(r.mpsCalls)
		if errors.Is(err, os.ErrNotExist) {
			return // no GPU was shared
		}
		state := map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			// "GPU start|quit time"
			f := append(strings.Fields(l), "", "")
			dev, what := f[0], f[1]
			if (what == "start") == (state[dev] == "start") {
				r.fail("MPS control calls out of turn: %q after %q on GPU %s:\n%s", what, state[dev], dev, b)
			}
			state[dev] = what
		}
		var running []string
		for dev, st := range state {
			if st == "start" {
				running = append(running, dev)
			}
		}
		if len(running) == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.fail("every job ended, the MPS daemons of GPUs %v still run:\n%s", running, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// eventKinds are the job events docs/api.md lists.
var eventKinds = []string{"submitted", "start", "restart", "launched", "adopted", "preempted", "resized", "stopped", "stopping",
	"attempt-failed", "attempt-lost", "retry", "finished", "failed", "cancelled", "declined", "held", "released", "time-limit", "requeued", "purged"}

// checkEvents checks a job's event log: it begins with its submission,
// names documented kinds, and has each run end at most once.
func (r *roTest) checkEvents(id string) {
	evs, err := r.actors[0].c.Events(r.ctx, id)
	if err != nil {
		r.fail("events of %s: %v", id, err)
	}
	if len(evs) == 0 || evs[0].Kind != "submitted" {
		r.fail("events of %s do not begin with its submission: %+v", id, evs)
	}
	ends := 0
	for i, e := range evs {
		if !slices.Contains(eventKinds, e.Kind) && !strings.HasPrefix(e.Kind, "policy-") {
			r.fail("job %s has an event of kind %q: %+v", id, e.Kind, e)
		}
		if e.Job != id || (i > 0 && e.Seq <= evs[i-1].Seq) {
			r.fail("events of %s out of order or of another job: %+v", id, evs)
		}
		switch e.Kind {
		case "requeued":
			ends = 0
		case "finished", "failed", "cancelled", "declined", "time-limit":
			if ends++; ends > 1 {
				r.fail("job %s ended twice in one run: %+v", id, evs)
			}
		}
	}
}

// checkAttempts checks that no two attempts held a GPU at once, as the
// API records them: an attempt's GPUs go to the next only once it has
// ended, and its end is recorded before (a job's own attempts too).
func (r *roTest) checkAttempts(views map[string]*api.Job) {
	type span struct {
		job        string
		n          int
		start, end time.Time
		// shared: a part of a GPU; packable: a whole-GPU job a packing
		// policy may pair (its job type measured).
		shared, packable bool
	}
	byGPU := map[int][]span{}
	for id, v := range views {
		for _, a := range v.Attempts {
			if a.Started == nil {
				continue
			}
			if a.Ended == nil || a.Ended.Before(*a.Started) {
				r.fail("job %s attempt %d: started %v, ended %v", id, a.N, a.Started, a.Ended)
			}
			for _, g := range a.GPUs {
				byGPU[g] = append(byGPU[g], span{id, a.N, *a.Started, *a.Ended, isPart(&v.Spec), r.packedEver && !isPart(&v.Spec) && v.Spec.JobType != ""})
			}
		}
	}
	for g, ss := range byGPU {
		sort.Slice(ss, func(i, j int) bool { return ss[i].start.Before(ss[j].start) })
		// Parts overlap parts, and packable jobs packable ones (at most
		// two at once), never anything else.
		for i, c := range ss {
			var beside []string
			for _, p := range ss[:i] {
				if !c.start.Before(p.end) {
					continue
				}
				if (c.shared && p.shared) || (c.packable && p.packable) {
					beside = append(beside, p.job)
					continue
				}
				r.fail("GPU %d: job %s attempt %d started at %v, before job %s attempt %d ended at %v", g, c.job, c.n, c.start, p.job, p.n, p.end)
			}
			if c.packable && len(beside) > 1 {
				r.fail("GPU %d: job %s attempt %d started at %v beside %v: more than a pair", g, c.job, c.n, c.start, beside)
			}
		}
	}
}
