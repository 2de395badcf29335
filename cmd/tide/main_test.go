package main

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// tide runs the command in-process and returns its exit code and output.
func tide(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(args, &out, &errb)
	return code, out.String(), errb.String()
}

type jsonOut struct {
	Trace    string                   `json:"trace"`
	Jobs     int                      `json:"jobs"`
	Policies []map[string]interface{} `json:"policies"`
}

func decode(t *testing.T, s string) jsonOut {
	t.Helper()
	var o jsonOut
	if err := json.Unmarshal([]byte(s), &o); err != nil {
		t.Fatalf("output is not one JSON object: %v\n%s", err, s)
	}
	return o
}

// TestSimDefault is the newcomer's first command: workload-6 on 64 T4 under
// FIFO, SRTF and Tiresias, as JSON. The keys scripts rely on must be there,
// and the figures must be sane: every job done, no average below the
// no-contention bound, and the oracle SRTF ahead of FIFO (on this trace
// FIFO's head-of-line blocking costs hours; see the README).
func TestSimDefault(t *testing.T) {
	code, out, errs := tide(t, "sim", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	o := decode(t, out)
	if o.Jobs != 160 || len(o.Policies) != 3 {
		t.Fatalf("%d jobs, %d policies; want 160 and 3", o.Jobs, len(o.Policies))
	}
	avg := map[string]float64{}
	for i, p := range o.Policies {
		for _, k := range []string{"name", "jobs", "avg_jct_s", "p99_jct_s", "makespan_s", "utilization", "deadline_met_frac"} {
			if _, ok := p[k]; !ok {
				t.Errorf("policy %d lacks %q", i, k)
			}
		}
		name, _ := p["name"].(string)
		a, _ := p["avg_jct_s"].(float64)
		lb, _ := p["lower_bound_avg_jct_s"].(float64)
		u, _ := p["utilization"].(float64)
		if p["jobs"] != 160.0 || p["finished"] != 160.0 {
			t.Errorf("%s: jobs %v finished %v, want 160", name, p["jobs"], p["finished"])
		}
		if !(a >= lb && lb > 0) || !(u > 0 && u <= 1) {
			t.Errorf("%s: avg JCT %v, lower bound %v, utilisation %v", name, a, lb, u)
		}
		if p["deadline_met_frac"] != nil {
			t.Errorf("%s: deadline_met_frac %v on a trace without deadlines, want null", name, p["deadline_met_frac"])
		}
		avg[strings.SplitN(name, ":", 2)[0]] = a
	}
	if !(avg["srtf"] < avg["fifo"]) {
		t.Errorf("SRTF avg JCT %v not below FIFO's %v", avg["srtf"], avg["fifo"])
	}
	if strings.Contains(errs, "\r") {
		t.Errorf("progress bar printed to a pipe: %q", errs)
	}
}

// TestSimDeterministic: the same command prints the same bytes.
func TestSimDeterministic(t *testing.T) {
	args := []string{"sim", "--policy", "tiresias,tiresias-gittins,edf", "--cluster", "12x4:t4,4x4:v100"}
	_, a, _ := tide(t, args...)
	_, b, _ := tide(t, args...)
	if a != b || !strings.Contains(a, "avg JCT") {
		t.Fatal("two identical runs printed different output")
	}
}

// TestPresetPolluxArtifact: the artifact's rules reproduce its Tiresias
// average JCT on workload-6 (3,469.69 s, from the per-job JCTs in
// sim/testdata) within the 3% the project promises.
func TestPresetPolluxArtifact(t *testing.T) {
	code, out, errs := tide(t, "sim", "--preset", "pollux-artifact", "--policy", "tiresias", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	o := decode(t, out)
	a := o.Policies[0]["avg_jct_s"].(float64)
	if math.Abs(a-3469.69375)/3469.69375 > 0.03 {
		t.Errorf("avg JCT %v, artifact 3469.69", a)
	}
}

// TestSimTableAndReport checks the side-by-side table and the report files,
// and that the HTML needs nothing from the network.
func TestSimTableAndReport(t *testing.T) {
	dir := t.TempDir()
	code, out, errs := tide(t, "sim", "--policy", "fifo,tiresias", "--report", dir)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, want := range []string{"avg JCT", "p99 JCT", "lower-bound avg JCT", "GPU utilisation", "preemptions per job", "fifo", "tiresias"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	html, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []string{"<script src", "<link ", "url(http", `src="http`} {
		if bytes.Contains(html, []byte(bad)) {
			t.Errorf("report.html references an outside resource (%q)", bad)
		}
	}
	if !bytes.Contains(html, []byte("<svg")) {
		t.Error("report.html has no plot")
	}
	for _, f := range []string{"summary.json", "jobs-fifo.csv", "jobs-tiresias.csv"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("report file missing: %v", err)
		}
	}
}

// TestSimTideCSV replays a trace in tide's own format, with deadlines, on a
// YAML cluster spec: EDF must meet both deadlines, which are loose enough
// for either order.
func TestSimTideCSV(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.csv")
	os.WriteFile(tr, []byte("id,submit,gpus,duration,deadline\na,0,2,100,1000\nb,10,2,50,400\n"), 0o644)
	spec := filepath.Join(dir, "c.yaml")
	os.WriteFile(spec, []byte("sites:\n- name: s\n  racks:\n  - name: r\n    nodes:\n    - count: 1\n      gpus: 2\n      gpu: t4\n"), 0o644)
	code, out, errs := tide(t, "sim", "--trace", tr, "--cluster", spec, "--policy", "edf", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	p := decode(t, out).Policies[0]
	if p["deadline_met_frac"] != 1.0 {
		t.Errorf("deadline_met_frac %v, want 1", p["deadline_met_frac"])
	}
}

// TestErrors: mistakes get a clear message and exit code 2 (usage) or 1
// (bad input), naming what was wrong.
func TestErrors(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("id,submit,gpus,duration\na,0,2,100\nb,10,two,50\n"), 0o644)
	tests := []struct {
		args []string
		code int
		want []string
	}{
		{[]string{"sim", "--cluster", "4x"}, 2, []string{"--cluster"}},
		{[]string{"sim", "--policy", "nosuch"}, 2, []string{"nosuch"}},
		{[]string{"sim", "--policy", "tiresias:knob=x"}, 2, []string{"knob"}},
		{[]string{"sim", "--round", "-5"}, 2, []string{"--round"}},
		{[]string{"sim", "--trace", bad}, 1, []string{"bad.csv", "line 3", "gpus"}},
		{[]string{"sim", "--trace", filepath.Join(dir, "missing.csv")}, 1, []string{"missing.csv"}},
		{[]string{"sim", "--jobs-window", "5:2"}, 2, []string{"--jobs-window"}},
		{[]string{"sim", "extra"}, 2, []string{"extra"}},
		{[]string{"frobnicate"}, 2, []string{"unknown command"}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			code, _, errs := tide(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit %d, want %d; stderr: %s", code, tc.code, errs)
			}
			for _, w := range tc.want {
				if !strings.Contains(errs, w) {
					t.Errorf("stderr lacks %q: %s", w, errs)
				}
			}
		})
	}
}

// TestSkipBad: --skip-bad replays the good rows and warns about the bad one.
func TestSkipBad(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "bad.csv")
	os.WriteFile(bad, []byte("id,submit,gpus,duration\na,0,2,100\nb,10,two,50\n"), 0o644)
	code, out, errs := tide(t, "sim", "--trace", bad, "--skip-bad", "--policy", "fifo", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if o := decode(t, out); o.Jobs != 1 {
		t.Errorf("%d jobs replayed, want 1", o.Jobs)
	}
	if !strings.Contains(errs, "line 3") {
		t.Errorf("no warning naming line 3: %s", errs)
	}
}

// TestHelpAndLists: help explains the flags; policies lists every policy.
func TestHelpAndLists(t *testing.T) {
	code, _, errs := tide(t, "help", "sim")
	if code != 0 || !strings.Contains(errs, "--trace") && !strings.Contains(errs, "-trace") {
		t.Errorf("help sim: exit %d, %s", code, errs)
	}
	// sweep's help listed sim's --trace, which sweep refuses.
	if code, _, errs := tide(t, "sweep", "--round", "5", "-h"); code != 0 || !strings.Contains(errs, "-traces GLOB") || strings.Contains(errs, "-trace FILE") ||
		!strings.Contains(errs, "scheduling rounds (default 60)") {
		t.Errorf("tide sweep -h: exit %d, %s", code, errs)
	}
	// tide help help (or -h -h) printed tide help -h forever: a stack
	// overflow; tide help policies said there was no policy "-h".
	for _, args := range [][]string{{"help", "help"}, {"-h", "--help"}, {"help", "-h"}} {
		if code, out, errs := tide(t, args...); code != 0 || !strings.Contains(out, "tide sim [flags]") {
			t.Errorf("tide %s: exit %d, %s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	for _, args := range [][]string{{"help", "policies"}, {"policies", "-h"}, {"policies", "--help"}} {
		if code, out, errs := tide(t, args...); code != 0 || !strings.Contains(out, "Usage: tide policies [NAME]") {
			t.Errorf("tide %s: exit %d, %s%s", strings.Join(args, " "), code, out, errs)
		}
	}
	if code, _, errs := tide(t, "policies", "fifo", "srtf"); code != 2 || errs != "tide policies: want at most one policy name, got [\"fifo\" \"srtf\"]\n" {
		t.Errorf("policies fifo srtf: exit %d, %q", code, errs)
	}
	code, out, _ := tide(t, "policies")
	for _, p := range []string{"fifo", "srtf", "edf", "tiresias", "tiresias-gittins"} {
		if code != 0 || !strings.Contains(out, p) {
			t.Errorf("policies lacks %s", p)
		}
	}
	for _, line := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if n := len([]rune(line)); n > 100 {
			t.Errorf("policies: a line of %d columns (at most 100): %q", n, line)
		}
	}
	if code, out, _ := tide(t, "policies", "fifo"); code != 0 || !strings.Contains(out, "backfill=false") || !strings.Contains(out, "priority=off") {
		t.Errorf("policies fifo: exit %d\n%s", code, out)
	}
	if code, out, _ := tide(t, "policies", "tiresias"); code != 0 || !strings.Contains(out, "  preset=paper (paper: limits") {
		t.Errorf("policies tiresias: exit %d, want its preset knob as 'preset=paper (paper: ...)':\n%s", code, out)
	}
	if code, _, errs := tide(t, "policies", "nope"); code == 0 || !strings.Contains(errs, "want one of") {
		t.Errorf("policies nope: exit %d, %s", code, errs)
	}
	code, out, errs = tide(t, "bench", "--repeat", "1")
	if code != 0 || !strings.Contains(out, "events/s") {
		t.Errorf("bench: exit %d\n%s%s", code, out, errs)
	}
}

// TestRestartCostOverride: --restart-cost N charges N s for every start on a
// duration trace: a lone 100 s job finishes at 107 with N = 7.
func TestRestartCostOverride(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "one.csv")
	os.WriteFile(tr, []byte("id,submit,gpus,duration\na,0,1,100\n"), 0o644)
	for _, tc := range []struct {
		cost string
		want float64
	}{{"", 100}, {"7", 107}} {
		args := []string{"sim", "--trace", tr, "--cluster", "1x1:t4", "--policy", "fifo", "--json"}
		if tc.cost != "" {
			args = append(args, "--restart-cost", tc.cost)
		}
		code, out, errs := tide(t, args...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if got := decode(t, out).Policies[0]["avg_jct_s"]; got != tc.want {
			t.Errorf("--restart-cost %q: avg JCT %v, want %v", tc.cost, got, tc.want)
		}
	}
}

// TestProgress: --progress on draws a bar on stderr and clears it; the
// default (auto) draws nothing when stderr is not a terminal, as in every
// other test here.
func TestProgress(t *testing.T) {
	code, _, errs := tide(t, "sim", "--policy", "fifo", "--progress", "on")
	if code != 0 || !strings.Contains(errs, "\r[") || !strings.Contains(errs, "jobs") {
		t.Errorf("exit %d, no progress bar on stderr: %q", code, errs)
	}
	code, _, errs = tide(t, "sim", "--policy", "fifo", "--progress", "sometimes")
	if code != 2 || !strings.Contains(errs, "--progress") {
		t.Errorf("bad --progress: exit %d, %s", code, errs)
	}
}

// TestSweep: one row per matched trace, in name order, and the mean, on 1
// GPU with the duration model (free start, 30 s restart).
//
// a.csv: one 1-GPU job of 50 s: avg JCT 50 under both.
// b.csv: x (100 s at 0), y (10 s at 1). FIFO: x 0-100, y 100-110: JCTs
// 100 and 109, avg 104.5. SRTF preempts x at 1 (x has 99 s left, y 10):
// y 1-11, x resumes at 11 paying the 30 s restart cost, ends at 11+30+99 =
// 140: JCTs 140 and 10, avg 75. Means: 77.25 (printed 77.2) and 62.5.
func TestSweep(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "a.csv"), []byte("id,submit,gpus,duration\na,0,1,50\n"), 0o644)
	os.WriteFile(filepath.Join(dir, "b.csv"), []byte("id,submit,gpus,duration\nx,0,1,100\ny,1,1,10\n"), 0o644)
	code, out, errs := tide(t, "sweep", "--traces", filepath.Join(dir, "*.csv"), "--cluster", "1x1:t4", "--policy", "fifo,srtf")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 4 {
		t.Fatalf("want header, 2 traces and the mean:\n%s", out)
	}
	for i, want := range [][]string{{"a.csv", "50.0", "50.0"}, {"b.csv", "104.5", "75.0"}, {"mean", "77.2", "62.5"}} {
		f := strings.Fields(lines[i+1])
		if !strings.HasSuffix(f[0], want[0]) || f[1] != want[1] || f[2] != want[2] {
			t.Errorf("row %d: %q, want %v", i+1, lines[i+1], want)
		}
	}
}

// TestPresetPolluxArtifactOptimus: the artifact's Optimus on workload-6
// averages 5,301.88 s (results-jobload/optimus-1.0/summary.json of
// petuum/adaptdl osdi21-artifact, quoted in the issue); tide's, under the
// same rules, must be within 3%.
func TestPresetPolluxArtifactOptimus(t *testing.T) {
	code, out, errs := tide(t, "sim", "--preset", "pollux-artifact", "--policy", "optimus", "--json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	p := decode(t, out).Policies[0]
	if p["name"] != "optimus:oracle=true" {
		t.Errorf("preset ran %v, want optimus:oracle=true", p["name"])
	}
	if a := p["avg_jct_s"].(float64); math.Abs(a-5301.88)/5301.88 > 0.03 {
		t.Errorf("avg JCT %v, artifact 5301.88", a)
	}
}

// TestSpeedFactors: --speed makes a duration trace heterogeneous. One job of
// 100 s alone on a cluster of one k80 (factor 0.25) takes 400 s; on a v100
// (factor 1) 100 s; fifo-perf picks the v100 when both exist.
func TestSpeedFactors(t *testing.T) {
	dir := t.TempDir()
	tr := filepath.Join(dir, "t.csv")
	os.WriteFile(tr, []byte("id,submit,gpus,duration\na,0,1,100\n"), 0o644)
	for _, c := range []struct {
		cluster string
		want    float64
	}{{"1x1:k80", 400}, {"1x1:v100", 100}, {"1x1:k80,1x1:v100", 100}} {
		code, out, errs := tide(t, "sim", "--trace", tr, "--cluster", c.cluster, "--speed", "v100=1,K80=0.25",
			"--policy", "fifo-perf:reset=0", "--on-events", "--json")
		if code != 0 {
			t.Fatalf("%s: exit %d: %s", c.cluster, code, errs)
		}
		if got := decode(t, out).Policies[0]["avg_jct_s"]; got != c.want {
			t.Errorf("%s: avg JCT %v, want %v", c.cluster, got, c.want)
		}
	}
	if code, _, errs := tide(t, "sim", "--speed", "v100=0"); code != 2 || !strings.Contains(errs, "--speed") {
		t.Errorf("bad --speed: exit %d, %s", code, errs)
	}
	if code, _, errs := tide(t, "sim", "--speed", "t4=2"); code != 2 || !strings.Contains(errs, "already knows its GPU type") {
		t.Errorf("--speed with the Pollux model: exit %d, %s", code, errs)
	}
}

// TestSimQuota: --quota wraps the policy in tenants' quotas, as tide kube
// does. One node of 4 GPUs; tenant A's a0 (4 GPUs, 100 s) at 0, tenant B's
// b0 (2 GPUs, 100 s) at 10. FIFO alone: a0 0-100, b0 100-200, JCTs 100 and
// 190, average 145, no preemption. With quotas A=2, B=2 and borrowing, a0
// borrows B's idle 2 GPUs, B takes them back at 10 by preempting a0, b0
// runs 10-110, a0 resumes at 110 with 90 s left (no restart cost): JCTs 200
// and 100, average 150, one preemption in two jobs. Without borrowing a0
// can never run on its tenant's 2 GPUs: the run fails naming it.
func TestSimQuota(t *testing.T) {
	tr := filepath.Join(t.TempDir(), "q.csv")
	if err := os.WriteFile(tr, []byte("id,submit,gpus,duration,tenant\na0,0,4,100,A\nb0,10,2,100,B\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		quota       []string
		jct, preemp float64
	}{{nil, 145, 0}, {[]string{"--quota", "A=2,B=2"}, 150, 0.5}} {
		args := append([]string{"sim", "--trace", tr, "--cluster", "1x4:t4", "--policy", "fifo", "--restart-cost", "0", "--json"}, c.quota...)
		code, out, errs := tide(t, args...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", c.quota, code, errs)
		}
		p := decode(t, out).Policies[0]
		if p["avg_jct_s"] != c.jct || p["preemptions_per_job"] != c.preemp {
			t.Errorf("%v: avg JCT %v, preemptions per job %v; want %v, %v", c.quota, p["avg_jct_s"], p["preemptions_per_job"], c.jct, c.preemp)
		}
	}
	code, _, errs := tide(t, "sim", "--trace", tr, "--cluster", "1x4:t4", "--policy", "fifo", "--quota", "A=2,B=2", "--borrow=false")
	if code == 0 || !strings.Contains(errs, "a0") {
		t.Errorf("no borrowing: exit %d, %s; want a failure naming a0", code, errs)
	}
	if code, _, errs := tide(t, "sim", "--quota", "A=x"); code != 2 || !strings.Contains(errs, "--quota") {
		t.Errorf("bad --quota: exit %d, %s", code, errs)
	}
}

// TestSimCPUProfile: --cpuprofile writes a profile (gzip-compressed
// protobuf) of the run, report included; a path it cannot create fails.
func TestSimCPUProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "cpu.prof")
	if code, _, errs := tide(t, "sim", "--policy", "fifo", "--cpuprofile", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 2 || b[0] != 0x1f || b[1] != 0x8b {
		t.Errorf("profile of %d bytes does not start like gzip", len(b))
	}
	code, _, errs := tide(t, "sim", "--policy", "fifo", "--cpuprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"))
	if code == 0 || !strings.Contains(errs, "--cpuprofile") {
		t.Errorf("uncreatable profile: exit %d, %s", code, errs)
	}
}

// TestSimMemProfile: --memprofile writes a heap profile (gzip-compressed
// protobuf naming its in-use samples) when the simulation ends; a path it
// cannot create fails.
func TestSimMemProfile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "heap.prof")
	if code, _, errs := tide(t, "sim", "--policy", "fifo", "--memprofile", path); code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatalf("profile is not gzip: %v", err)
	}
	b, err := io.ReadAll(z)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(b, []byte("inuse_space")) {
		t.Errorf("profile of %d bytes names no inuse_space samples", len(b))
	}
	code, _, errs := tide(t, "sim", "--policy", "fifo", "--memprofile", filepath.Join(t.TempDir(), "no", "such", "dir", "p"))
	if code == 0 || !strings.Contains(errs, "--memprofile") {
		t.Errorf("uncreatable profile: exit %d, %s", code, errs)
	}
}

// TestFlagMistakes: a flag that does not exist or a value that does not
// parse is one line, exit 2, naming the flag and where the help is, in
// every command (the whole help printed after it hid it, and the client
// commands exited 1); -h still prints the help.
func TestFlagMistakes(t *testing.T) {
	for _, args := range [][]string{
		{"sim", "--bogus"}, {"sweep", "--bogus"}, {"bench", "--bogus"}, {"trace", "tile", "--bogus"},
		{"serve", "--round", "soon"}, {"submit", "--time-limit", "forever", "--", "true"},
		{"jobs", "--bogus"}, {"job", "--bogus", "j1"}, {"logs", "--bogus", "j1"}, {"cancel", "--bogus", "j1"},
		{"cluster", "--bogus"}, {"usage", "--bogus"}, {"tenant", "add", "x", "--bogus"}, {"hold", "--bogus", "j1"},
	} {
		code, out, errs := tide(t, args...)
		lines := strings.Split(strings.TrimSpace(errs), "\n")
		named := "unknown flag --bogus"
		switch args[0] {
		case "serve":
			named = `--round "soon": want a duration`
		case "submit":
			named = `--time-limit "forever": want a duration`
		}
		if code != 2 || out != "" || len(lines) != 1 || !strings.Contains(errs, named) || !strings.Contains(errs, "for every flag") {
			t.Errorf("tide %s: exit %d, stdout %q, stderr:\n%s\nwant exit 2 and one line saying %q and where the help is", strings.Join(args, " "), code, out, errs, named)
		}
	}
	// --format without --trace replayed the embedded trace, the format ignored.
	if code, out, errs := tide(t, "sim", "--format", "philly"); code != 2 || out != "" || !strings.Contains(errs, `--format "philly"`) || !strings.Contains(errs, "no --trace given") {
		t.Errorf("tide sim --format philly: exit %d, stdout %q, stderr %q; want exit 2 saying no --trace was given", code, out, errs)
	}
	code, _, errs := tide(t, "sim", "-h")
	if code != 0 || !strings.Contains(errs, "Usage: tide sim") || !strings.Contains(errs, "-policy") {
		t.Errorf("tide sim -h: exit %d, %q", code, errs)
	}
}

// TestErrorNamesCommand: an error names the command and subcommand that
// failed, and a missing trace file names itself as the trace.
func TestErrorNamesCommand(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.csv")
	for _, tc := range []struct {
		args []string
		want string // the start of stderr
	}{
		{[]string{"trace", "tile", "--trace", missing}, "tide trace tile: trace: open " + missing},
		{[]string{"sim", "--trace", missing}, "tide sim: trace: open " + missing},
		{[]string{"tenant", "bogus"}, "tide tenant: want 'add NAME'"},
	} {
		if code, _, errs := tide(t, tc.args...); code == 0 || !strings.HasPrefix(errs, tc.want) {
			t.Errorf("tide %s: exit %d, %q; want an error starting %q", strings.Join(tc.args, " "), code, errs, tc.want)
		}
	}
}

// TestSubmitFileThenFlags: tide submit job.yaml --gpus 2 took the file and
// the flags for a command and the server answered that job.yaml is not an
// executable file; it is a usage error saying flags come first. After --,
// the same words are a command.
func TestSubmitFileThenFlags(t *testing.T) {
	t.Setenv("TIDE_SERVER", "http://127.0.0.1:1")
	t.Setenv("TIDE_TOKEN", "tide_x")
	code, out, errs := tide(t, "submit", "job.yaml", "--gpus", "2")
	if code != 2 || out != "" || !strings.Contains(errs, "flags come before arguments (tide submit -f job.yaml --gpus 2)") {
		t.Errorf("tide submit job.yaml --gpus 2: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if _, _, errs := tide(t, "submit", "--", "job.yaml", "--gpus", "2"); strings.Contains(errs, "flags come before") {
		t.Errorf("tide submit -- job.yaml --gpus 2 (a command): %s", errs)
	}
}
