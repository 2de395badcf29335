package scenario

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/report"
)

func TestParseErrors(t *testing.T) {
	base := "trace: {file: t.csv}\npolicies: [edf]\n"
	for _, tc := range []struct{ in, want string }{
		{"", "s.yaml: empty file"},
		{"policies: [edf]\n", "s.yaml line 1 field trace.file: missing"},
		{"trace: {file: t.csv}\n", "field policies: missing"},
		{base + "bogus: 1\n", "s.yaml line 3: field bogus not found"},
		{base + "round: -5\n", "s.yaml line 3 field round: want seconds > 0"},
		{base + "model: {kind: magic}\n", "line 3 field model.kind: \"magic\""},
		{base + "model:\n  kind: elasticflow\n", "line 4 field model.tables: missing"},
		{base + "model: {kind: duration}\nsweep: {param: nodes, values: [1]}\n", "line 4 field sweep.param: \"nodes\""},
		{base + "model: {kind: duration}\nsweep:\n  param: lambda\n  values: [0.5, -1]\n", "line 6 field sweep.values[1]"},
		{base + "model: {kind: elasticflow, tables: [nodir]}\n", "field model.tables[0]: \"nodir\": want DIR@TYPE"},
		{base + "model: {kind: duration, edge: {type: v100, ref: a100, lambda: 2}}\n", "field model.edge.lambda"},
		{base + "model: {kind: duration}\navailability:\n  faults:\n    - {site: cloud, mtbf: 0}\n", "line 6 field availability.faults[0].mtbf"},
		{base + "model: {kind: duration}\navailability:\n  diurnal:\n    - {site: edge, measure: servers}\n", "field availability.diurnal[0].measure"},
		{base + "model: {kind: duration}\npriorities: {classes: [1, 0], weights: [1]}\n", "field priorities.weights: 1 weights for 2 classes"},
		{base + "model: {kind: duration}\nmigration: {remote_gibps: -1}\n", "field migration.remote_gibps"},
		// Each of these once hung a run or took tens of GB before it.
		{base + "model: {kind: duration}\nmigration: {local_gibps: 1e-300}\n", "line 4 field migration.local_gibps: want at least"},
		{base + "model: {kind: duration}\navailability:\n  diurnal:\n    - {site: edge, measure: available, step: 0.001}\n", "line 6 field availability.diurnal[0].step: want at least 1 second"},
		{base + "model: {kind: duration}\navailability:\n  faults:\n    - {site: cloud, mtbf: 1e-300, mttr: 1e-300}\n", "line 6 field availability.faults[0].mtbf: want a finite number of seconds >= 1"},
		{base + "model: {kind: duration}\navailability:\n  faults:\n    - {site: cloud, mtbf: 60, mttr: 0.5}\n", "line 6 field availability.faults[0].mttr"},
		{base + "model: {kind: duration}\navailability:\n  faults:\n    - {mtbf: 60}\n", "line 6 field availability.faults[0].site: missing"},
		{base + "model: {kind: duration}\navailability:\n  diurnal:\n    - {site: edge, measure: available, period: 1e300}\n", "field availability.diurnal[0].period"},
		{base + "trace: {file: x}\n", "line 3: mapping key \"trace\" already defined"},
		{base + "---\npolicies: [x]\n", "more than one YAML document"},
		{base + "model: {kind: duration}\ntrace: {file: t.csv, arrival_scale: -1}\n", "already defined"},
	} {
		_, err := Parse([]byte(tc.in), "s.yaml")
		var se *Error
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n  error %v\n  want %q", tc.in, err, tc.want)
		}
	}
}

// TestRunSmall runs a scenario on a tiny trace written here: a cloud and an
// edge site, a sweep over edge servers, the duration model.
func TestRunSmall(t *testing.T) {
	dir := t.TempDir()
	tr := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	for i := 0; i < 12; i++ {
		tr += strings.Join([]string{itoa(i), itoa(i * 30), "100", "bert", itoa(i*30 + 1300), "64", "1", "600"}, ",") + "\n"
	}
	write(t, filepath.Join(dir, "t.csv"), tr)
	write(t, filepath.Join(dir, "edge.csv"), "time,site,available\n0,edge,2\n500,edge,1\n")
	write(t, filepath.Join(dir, "s.yaml"), `name: small
cluster:
  sites:
    - {name: cloud, nodes: [{count: 1, gpus: 4, gpu: a100}]}
    - {name: edge, kind: edge, nodes: [{count: 2, gpus: 1, gpu: v100}]}
availability: {file: edge.csv}
trace: {file: t.csv, format: elasticflow}
model: {kind: duration, costs: "5", edge: {type: v100, ref: a100, lambda: 0.5}}
priorities: {classes: [1, 0], seed: 3}
policies: [elasticflow, edgeflow, edf]
sweep: {param: edge_servers, values: [0, 2]}
`)
	sc, err := Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	runs := 0
	res, err := sc.Run(func() { runs++ })
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 2 || runs != 6 || sc.Runs() != 6 {
		t.Fatalf("%d points, %d runs", len(res), runs)
	}
	if strings.Contains(res[0].Cluster, "v100") || !strings.Contains(res[1].Cluster, "2 v100") {
		t.Errorf("clusters %q, %q", res[0].Cluster, res[1].Cluster)
	}
	prio := map[int]bool{}
	for _, j := range res[1].Runs[0].Jobs {
		prio[j.Priority] = true
	}
	if !prio[0] || !prio[1] {
		t.Errorf("priorities drawn: %v", prio)
	}
	s := report.Summarize(res[1].Runs[1])
	if s.Sites == nil || s.Sites.HarvestedEdgeGPUHours <= 0 {
		t.Errorf("edgeflow with 2 edge servers harvested nothing: %+v", s.Sites)
	}
	if e := report.Summarize(res[0].Runs[1]); *s.DeadlineMetFrac < *e.DeadlineMetFrac {
		t.Errorf("edge servers lowered edgeflow's deadlines met: %v < %v", *s.DeadlineMetFrac, *e.DeadlineMetFrac)
	}
}

// TestShippedScenarios parses every scenario under scenarios/; with the
// shared data present it runs the smallest one end to end.
func TestShippedScenarios(t *testing.T) {
	files, _ := filepath.Glob("../scenarios/*.yaml")
	if len(files) == 0 {
		t.Fatal("no scenarios shipped")
	}
	// Descriptions are for users: no words from the project's planning.
	planning := regexp.MustCompile(`(?i)\bissue \d|\bpoint \d`)
	for _, f := range files {
		sc, err := Load(f)
		if err != nil {
			t.Errorf("%s: %v", f, err)
			continue
		}
		if w := planning.FindString(sc.Description); w != "" {
			t.Errorf("%s: description says %q (planning, not what the scenario shows)", f, w)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

func write(t *testing.T, path, s string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("trace: {file: t.csv}\npolicies: [edf]\nmodel: {kind: duration}\n")
	f.Add("trace: {file: t.csv}\npolicies: [edf]\nmodel: {kind: elasticflow, tables: [a@b]}\nsweep: {param: lambda, values: [0.5]}\n")
	f.Add("cluster: 2x8:a100\ntrace: {file: t}\npolicies: [x]\nmodel: {kind: duration}\npriorities: {classes: [1]}\n")
	f.Fuzz(func(t *testing.T, in string) {
		sc, err := Parse([]byte(in), "f.yaml")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "scenario f.yaml") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		if sc.Trace.File == "" || len(sc.Policies) == 0 || !(sc.Round > 0) || !(sc.Trace.ArrivalScale > 0) {
			t.Fatalf("accepted %+v", sc)
		}
	})
}

// TestElasticFlowMeetsMoreDeadlines is issue 4's point 5(a) on the shipped
// scenario: ElasticFlow meets more deadlines than EDF, Gandiva, Tiresias and
// AFS on 128 A100s (the paper, ASPLOS'23 fig. 7-8: 1.46-7.65x more than its
// baselines). Needs ../shared/data.
func TestElasticFlowMeetsMoreDeadlines(t *testing.T) {
	if testing.Short() {
		t.Skip("runs five policies on the 195-job trace")
	}
	needITPTrace(t)
	sc, err := Load("../scenarios/elasticflow-128.yaml")
	if err != nil {
		t.Fatal(err)
	}
	res, err := sc.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	met := map[string]float64{}
	for k, r := range res[0].Runs {
		met[sc.Policies[k]] = *report.Summarize(r).DeadlineMetFrac
	}
	for p, m := range met {
		if p != "elasticflow" && m >= met["elasticflow"] {
			t.Errorf("%s met %.3f of deadlines, elasticflow %.3f", p, m, met["elasticflow"])
		}
	}
	t.Logf("deadlines met: %v", met)
}

// TestEdgeFlowSweeps is issue 4's point 5(b) on the shipped sweeps, EdgeFlow's
// sensitivity ranges (scenarios/edgeflow-{arrival,cloud,edge-servers}.yaml:
// arrival rate x0.5-4, 16-128 cloud GPUs, 0-16 idle edge servers). At every
// point EdgeFlow meets at least as many deadlines as ElasticFlow, and with
// two or more idle edge servers strictly more wherever ElasticFlow misses
// any. One point is let off with equal, and only while no job ElasticFlow
// loses there could end in time alone on an edge server (edgeSavable): half
// the base arrival rate, where the 11 jobs both decline come in one burst and
// each needs 2-4.7x its window on one edge GPU, or more memory than it has
// (docs/deadlines.md, 5(b)). Needs ../shared/data.
func TestEdgeFlowSweeps(t *testing.T) {
	if testing.Short() {
		t.Skip("runs two policies at 14 points on the 195-job trace")
	}
	needITPTrace(t)
	equalOK := map[string]bool{"edgeflow-arrival arrival_scale=0.5": true}
	for _, f := range []string{"edgeflow-arrival", "edgeflow-cloud", "edgeflow-edge-servers"} {
		sc, err := Load("../scenarios/" + f + ".yaml")
		if err != nil {
			t.Fatal(err)
		}
		sc.Policies = []string{"elasticflow", "edgeflow"}
		in, err := sc.read()
		if err != nil {
			t.Fatal(err)
		}
		pts, err := sc.points(in)
		if err != nil {
			t.Fatal(err)
		}
		res, err := sc.Run(nil)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			at := fmt.Sprintf("%s %s=%v", f, r.Param, r.Value)
			cloud := *report.Summarize(r.Runs[0]).DeadlineMetFrac
			edge := *report.Summarize(r.Runs[1]).DeadlineMetFrac
			servers, savable := edgeSavable(pts[i], r.Runs[0])
			t.Logf("%s: elasticflow %.3f, edgeflow %.3f; %d edge servers, %d of elasticflow's lost jobs could end in time on one",
				at, cloud, edge, servers, savable)
			if edge < cloud {
				t.Errorf("%s: edgeflow met %.3f of deadlines, elasticflow %.3f", at, edge, cloud)
			}
			if servers >= 2 && cloud < 1 && edge <= cloud && !(equalOK[at] && savable == 0) {
				t.Errorf("%s: edgeflow met %.3f of deadlines with %d idle edge servers, no more than elasticflow's %.3f (%d of the jobs it lost could end in time on one)",
					at, edge, servers, cloud, savable)
			}
		}
	}
}

// edgeSavable counts pt's edge servers and the jobs of run that were lost
// (declined, unfinished or late) though one of those servers could finish
// them alone by their deadline from submission, start cost included.
func edgeSavable(pt *point, run *report.Run) (servers, savable int) {
	var edges []cluster.Node
	for _, n := range pt.c.Nodes {
		if n.SiteKind == cluster.SiteEdge {
			edges = append(edges, n)
		}
	}
	lost := map[string]bool{}
	for _, j := range run.Jobs {
		if j.Finish < 0 || j.Finish > j.Deadline {
			lost[j.ID] = true
		}
	}
	for _, j := range pt.jobs {
		if !lost[j.ID] {
			continue
		}
		for _, n := range edges {
			if need, ok := perf.TrainMemGiB[j.Model]; ok && n.GPUMem > 0 && need > n.GPUMem {
				continue
			}
			left := perf.Remaining(pt.model, j, perf.Packed(n.GPUType, 1, n.GPUs), 0)
			if j.Submit+pt.model.Costs(j).Start+left <= j.Deadline {
				savable++
				break
			}
		}
	}
	return len(edges), savable
}

// TestPolluxModelRunsAgents: with the Pollux model a scenario runs job
// agents for elastic policies, as `tide sim` does. Pollux keeps a job that
// has reported nothing at one GPU (it explores up to twice the replicas it
// has seen), so a job that grows shows its agent reported goodput models.
func TestPolluxModelRunsAgents(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.csv"), "name,time,application,num_replicas,batch_size\ncifar10-0,0,cifar10,1,128\n")
	write(t, filepath.Join(dir, "s.yaml"), "cluster: 1x8:t4\ntrace: {file: t.csv, format: pollux}\nmodel: {kind: pollux}\npolicies: [pollux]\n")
	sc, err := Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	res, err := sc.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	j := res[0].Runs[0].Jobs[0]
	if j.State != "finished" || j.Resizes == 0 {
		t.Errorf("job %s %s after %d resizes: want it finished, grown beyond one GPU", j.ID, j.State, j.Resizes)
	}

	write(t, filepath.Join(dir, "bad.yaml"), "cluster: 1x8:t4\ntrace: {file: t.csv, format: pollux}\nmodel: {kind: pollux, dir: nowhere}\npolicies: [pollux]\n")
	sc, err = Load(filepath.Join(dir, "bad.yaml"))
	if err == nil {
		_, err = sc.Run(nil)
	}
	if err == nil || !strings.Contains(err.Error(), "model.dir") {
		t.Errorf("missing profiles directory: error %v, want one naming model.dir", err)
	}
}

// itpTrace is the ITP deadline trace the shipped deadline scenarios read.
const itpTrace = "../../shared/data/itp-2021/deadline/195job.csv"

// needITPTrace skips t when ../shared/data is absent (a user's clone).
func needITPTrace(t *testing.T) {
	t.Helper()
	if _, err := os.Stat(itpTrace); err != nil {
		t.Skip("../shared/data absent: ", err)
	}
}

// TestScaledPastMaxTime: a scale or sweep value that would move a job past
// job.MaxTime, or an MTBF point under a second, is an error naming the
// field, before any run (the simulator would otherwise name only the job,
// or hang).
func TestScaledPastMaxTime(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.csv"), "id,submit,gpus,duration,deadline\na,0,1,100,500\nb,60,1,100,900\n")
	head := "cluster:\n  sites:\n    - {name: cloud, nodes: [{count: 1, gpus: 2, gpu: a100}]}\nmodel: {kind: duration}\npolicies: [edf]\n"
	runErrors(t, dir, head, []runError{
		{"trace: {file: t.csv, deadline_scale: 1e300}\n", "line 6 field trace.deadline_scale: job a would arrive or be due at 5e+302 s"},
		// arrival_scale multiplies the rate: a tiny one spreads arrivals out.
		{"trace: {file: t.csv, arrival_scale: 1e-300}\n", "line 6 field trace.arrival_scale: job b would arrive or be due at 6e+301 s"},
		{"trace: {file: t.csv}\nsweep: {param: arrival_scale, values: [1, 1e-300]}\n", "field sweep.values: arrival_scale 1e-300: job b"},
		{"trace: {file: t.csv}\navailability:\n  faults: [{site: cloud, mtbf: 3600}]\nsweep: {param: mtbf, values: [0, 0.5]}\n", "field sweep.values: mtbf 0.5: want 0 (no faults) or seconds >= 1"},
	})
}

// TestAvailabilityUnknownSite: a diurnal wave or faults on a site the
// cluster lacks is an error naming the line, the field and the sites there
// are; the simulator said only "sim: diurnal: no site "edgy" in the
// cluster".
func TestAvailabilityUnknownSite(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.csv"), "id,submit,gpus,duration,deadline\na,0,1,100,500\n")
	head := "cluster:\n  sites:\n    - {name: cloud, nodes: [{count: 1, gpus: 2, gpu: a100}]}\nmodel: {kind: duration}\npolicies: [edf]\ntrace: {file: t.csv}\navailability:\n"
	runErrors(t, dir, head, []runError{
		{"  diurnal:\n    - {site: edgy, measure: available, period: 86400, trough: 0, peak: 2, step: 600}\n", `line 9 field availability.diurnal[0].site: no site "edgy" in the cluster (its sites: cloud)`},
		{"  faults:\n    - {site: cloud, mtbf: 3600, mttr: 60}\n    - {site: edgy, mtbf: 3600, mttr: 60}\n", `line 10 field availability.faults[1].site: no site "edgy" in the cluster (its sites: cloud)`},
	})
}

// TestTraceFieldErrors: an unknown trace format or a missing trace file
// names the line and field (they said "scenario F: trace: trace ...: unknown
// format" and "trace: trace: open ...", no line); a bad row still names the
// trace's own file, line and field.
func TestTraceFieldErrors(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.csv"), "id,submit,gpus,duration\na,0,1,abc\n")
	head := "cluster: 1x2:a100\nmodel: {kind: duration}\npolicies: [fifo]\n"
	runErrors(t, dir, head, []runError{
		{"trace:\n  file: t.csv\n  format: itpp\n", `s.yaml line 6 field trace.format: unknown format "itpp"; want one of pollux,`},
		{"trace:\n  file: none.csv\n", "s.yaml line 5 field trace.file: open " + filepath.Join(dir, "none.csv") + ": no such file"},
		{"trace:\n  file: t.csv\n", "s.yaml: trace " + filepath.Join(dir, "t.csv") + " line 2 field duration: bad number"},
	})
}

// runError is a scenario's text after a common head and what its error,
// when loaded or run, must contain.
type runError struct{ rest, want string }

// runErrors writes each case's head+rest to dir/s.yaml, loads and runs it,
// and wants an error containing the case's want.
func runErrors(t *testing.T, dir, head string, cases []runError) {
	t.Helper()
	for _, tc := range cases {
		write(t, filepath.Join(dir, "s.yaml"), head+tc.rest)
		sc, err := Load(filepath.Join(dir, "s.yaml"))
		if err == nil {
			_, err = sc.Run(nil)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q:\n  error %v\n  want %q", tc.rest, err, tc.want)
		}
	}
}
