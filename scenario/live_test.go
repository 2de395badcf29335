package scenario

import (
	"bytes"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
)

// TestLive gives a live run the inputs Run simulates (the same cluster,
// jobs and capacity), refuses a sweep, and WriteJSON prints what
// `tide sim --scenario --json` prints.
func TestLive(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.csv"), "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"+
		"a,100,10,resnet50,9000,64,2,3600\nb,700,10,bert,20000,32,1,1800\n")
	yaml := `name: live
cluster:
  sites:
    - {name: dc, nodes: [{count: 1, gpus: 4, gpu: a100}]}
    - {name: serve, kind: inference, nodes: [{count: 1, gpus: 4, gpu: a100}]}
availability:
  diurnal: [{site: serve, measure: inference, period: 7200, trough: 0, peak: 4, step: 600, seed: 1}]
trace: {file: t.csv, format: itp}
model: {kind: duration}
policies: [deepboot]
`
	write(t, filepath.Join(dir, "s.yaml"), yaml)
	sc, err := Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	lv, err := sc.Live()
	if err != nil {
		t.Fatal(err)
	}
	in := lv.Inputs
	if got := in.Cluster.String(); got != "8 GPUs (2 nodes): 8 a100" || len(in.Cluster.Sites()) != 2 || in.Cluster.Sites()[1].Kind != "inference" {
		t.Errorf("cluster %s, sites %+v; want the file's two sites", got, in.Cluster.Sites())
	}
	if len(in.Jobs) != 2 || in.Jobs[0].Submit != 0 || in.Jobs[1].Submit != 600 || in.Jobs[0].Deadline != 8900 {
		t.Errorf("jobs %+v %+v: want both, submissions from the first's (0, 600), deadlines moved with them", in.Jobs[0], in.Jobs[1])
	}
	if in.Sites == nil || len(in.Sites.Diurnal) != 1 || in.Sites.Diurnal[0].Site != "serve" {
		t.Errorf("capacity %+v, want the serve site's wave", in.Sites)
	}
	res, err := sc.Run(nil)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, sc, res); err != nil {
		t.Fatal(err)
	}
	var out struct {
		Scenario string
		Points   []struct {
			Jobs     int
			Policies []struct{ Name string }
		}
	}
	if err := json.Unmarshal(b.Bytes(), &out); err != nil {
		t.Fatal(err)
	}
	if out.Scenario != "live" || len(out.Points) != 1 || out.Points[0].Jobs != 2 || out.Points[0].Policies[0].Name != "deepboot" {
		t.Errorf("JSON %s, want one point of 2 jobs under deepboot", b.String())
	}
	write(t, filepath.Join(dir, "w.yaml"), yaml+"sweep: {param: arrival_scale, values: [1, 2]}\n")
	sc, err = Load(filepath.Join(dir, "w.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := sc.Live(); err == nil || !strings.Contains(err.Error(), "sweep") {
		t.Errorf("Live with a sweep: %v, want an error naming the sweep", err)
	}
}
