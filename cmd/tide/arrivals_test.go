package main

import (
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
)

// TestArrivalScale: --arrival-scale 0.25 on a trace gives the same results
// as the trace written with a quarter of its submission times (deadlines
// moved with their jobs), and different ones from the trace as it is (the
// jobs now overlap on the one GPU).
func TestArrivalScale(t *testing.T) {
	dir := t.TempDir()
	sparse, dense := filepath.Join(dir, "sparse.csv"), filepath.Join(dir, "dense.csv")
	os.WriteFile(sparse, []byte("id,submit,gpus,duration,deadline\na,0,1,100,150\nb,400,1,100,700\nc,800,1,100,1000\n"), 0o644)
	os.WriteFile(dense, []byte("id,submit,gpus,duration,deadline\na,0,1,100,150\nb,100,1,100,400\nc,200,1,100,400\n"), 0o644)
	sim := func(args ...string) []map[string]any {
		t.Helper()
		code, out, errs := tide(t, append([]string{"sim", "--cluster", "1x1:t4", "--policy", "fifo,edf", "--json"}, args...)...)
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		return decode(t, out).Policies
	}
	scaled, want, asIs := sim("--trace", sparse, "--arrival-scale", "0.25"), sim("--trace", dense), sim("--trace", sparse)
	if !reflect.DeepEqual(scaled, want) {
		t.Errorf("--arrival-scale 0.25:\n%v\nwant the dense trace's\n%v", scaled, want)
	}
	if reflect.DeepEqual(scaled, asIs) {
		t.Error("--arrival-scale 0.25 changed nothing")
	}
	for _, bad := range []string{"0", "-1", "NaN", "+Inf", "1e300"} { // 1e300 once hung the run
		code, _, errs := tide(t, "sim", "--trace", sparse, "--arrival-scale", bad)
		if code != 2 || !strings.Contains(errs, "--arrival-scale") {
			t.Errorf("--arrival-scale %s: exit %d, %q; want 2 naming the flag", bad, code, errs)
		}
	}
}

func TestScaleArrivalsKeepsTrace(t *testing.T) {
	j := &job.Job{ID: "a", Submit: 100, Deadline: 300, Utility: &job.Utility{Deadlines: []float64{300, 500}, Values: []float64{1, 0.5}}}
	out, err := scaleArrivals([]*job.Job{j}, 0.5)
	if err != nil {
		t.Fatal(err)
	}
	got := out[0]
	if got.Submit != 50 || got.Deadline != 250 || !reflect.DeepEqual(got.Utility.Deadlines, []float64{250, 450}) {
		t.Errorf("scaled: submit %v, deadline %v, utility %v; want 50, 250, [250 450]", got.Submit, got.Deadline, got.Utility.Deadlines)
	}
	if j.Submit != 100 || j.Deadline != 300 || j.Utility.Deadlines[0] != 300 {
		t.Errorf("the input job changed: %+v", j)
	}
}
