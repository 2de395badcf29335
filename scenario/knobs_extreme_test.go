package scenario

import (
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/solver"
)

// TestKnobExtremes: every numeric knob of every policy, set to a value a
// user might mistype (negative, zero, huge, not a number), either fails to
// build with an error or runs to the end on a cluster whose capacity
// varies on every kind of site; never a panic or a run that does not end.
// Policies are built from user input (--policy, scenario files, tide
// serve's --policy), and FuzzParse builds them but does not run them.
func TestKnobExtremes(t *testing.T) {
	if testing.Short() {
		t.Skip("runs every knob of every policy")
	}
	dir := t.TempDir()
	tr := "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"
	for i := 0; i < 16; i++ {
		sub := i * 2400
		tr += fmt.Sprintf("%d,%d,100,bert,%d,64,%d,%d\n", i, sub, sub+4000+600*(i%5), 1+i%3, 900+300*(i%4))
	}
	write(t, filepath.Join(dir, "t.csv"), tr)
	write(t, filepath.Join(dir, "s.yaml"), `name: extremes
cluster:
  sites:
    - {name: cloud, nodes: [{count: 2, gpus: 4, gpu: a100}]}
    - {name: edge, kind: edge, nodes: [{count: 4, gpus: 1, gpu: v100}]}
    - {name: infer, kind: inference, nodes: [{count: 1, gpus: 4, gpu: a100}]}
availability:
  diurnal:
    - {site: edge, measure: available, period: 14400, trough: 0, peak: 4, noise: 1, step: 600, seed: 1}
    - {site: infer, measure: inference, period: 14400, trough: 0, peak: 4, noise: 1, step: 600, seed: 2}
  faults:
    - {site: cloud, mtbf: 10800, mttr: 1800, seed: 3}
trace: {file: t.csv, format: elasticflow}
model: {kind: duration, costs: "5", edge: {type: v100, ref: a100, lambda: 0.5}}
round: 300
policies: [fifo]
`)
	sc, err := Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	in, pts, err := sc.readPoints()
	if err != nil {
		t.Fatal(err)
	}
	ins, err := sc.inputs(in, pts[0])
	if err != nil {
		t.Fatal(err)
	}
	values := []string{"-1", "0", "0.5", "3", "10", "-10", "1e12", "-1e12", "NaN", "Inf"}
	for _, info := range policy.All() {
		if info.NeedsSolver && solver.Available() != nil {
			continue
		}
		specs := []string{info.Name}
		if info.Name == "tidal" {
			// Knobs that act only with another set: the forecast made wrong.
			for _, v := range values {
				specs = append(specs, "tidal:wrong=shift:shift_h="+v)
			}
			specs = append(specs, "tidal:wrong=collapse", "tidal:wrong=noise", "tidal:forecast=oracle", "tidal:forecast=off")
		}
		for _, k := range info.KnobList() {
			if _, err := strconv.ParseFloat(k.Default, 64); err != nil {
				continue
			}
			for _, v := range values {
				specs = append(specs, fmt.Sprintf("%s:%s=%s", info.Name, k.Key, v))
			}
		}
		for _, spec := range specs {
			// The knob set to an extreme is the spec's last.
			key, _, _ := strings.Cut(spec[strings.LastIndex(spec, ":")+1:], "=")
			t.Run(spec, func(t *testing.T) {
				r, err := ins.Build(spec)
				if err != nil {
					if !strings.Contains(err.Error(), key) {
						t.Errorf("error %q does not name the knob", err)
					}
					return
				}
				if msg := runEnds(r); msg != "" {
					t.Error(msg)
				}
			})
		}
	}
}

// runEnds runs r and says how it failed to run to its end: a panic, an
// error, or no end within two minutes (the run is then left going); ""
// when it ended.
func runEnds(r *assemble.Run) string {
	_, msg := runResult(r)
	return msg
}

// runResult is runEnds with the run's result (nil unless it ended).
func runResult(r *assemble.Run) (*report.Run, string) {
	type end struct {
		res *report.Run
		msg string
	}
	ended := make(chan end, 1)
	go func() {
		defer func() {
			if p := recover(); p != nil {
				ended <- end{msg: fmt.Sprintf("panic: %v", p)}
			}
		}()
		res, err := r.Simulate()
		if err != nil {
			ended <- end{msg: "error: " + err.Error()}
			return
		}
		ended <- end{res: res}
	}()
	select {
	case e := <-ended:
		return e.res, e.msg
	case <-time.After(2 * time.Minute):
		return nil, "the run did not end in 2 minutes"
	}
}
