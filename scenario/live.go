package scenario

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/report"
)

// Live is a scenario as a live run needs it (scripts/live-scenario.sh,
// kubetest's runner): the inputs of its first point exactly as Run builds
// them (cluster with sites, jobs, model, capacity timeline, forecasts), so
// that a policy built from them (Inputs.Build) is the one the simulator
// runs.
type Live struct {
	Inputs *assemble.Inputs
}

// Live reads the scenario's trace, model and capacity. A sweep is refused:
// a live run runs one point.
func (sc *Scenario) Live() (*Live, error) {
	if sc.Sweep != nil {
		return nil, sc.errAt("sweep", []string{"sweep"}, "a live run runs one point; remove the sweep")
	}
	in, pts, err := sc.readPoints()
	if err != nil {
		return nil, err
	}
	ins, err := sc.inputs(in, pts[0])
	if err != nil {
		return nil, err
	}
	return &Live{Inputs: ins}, nil
}

// inputs are what a policy's run at point pt is built from.
func (sc *Scenario) inputs(in *inputs, pt *point) (*assemble.Inputs, error) {
	future, err := sc.future(pt)
	if err != nil {
		return nil, err
	}
	return &assemble.Inputs{Trace: in.name, Jobs: pt.jobs, Cluster: pt.c, Model: pt.model, Round: sc.Round,
		OnEvents: sc.OnEvents == nil || *sc.OnEvents, Seed: sc.Seed, Sites: pt.sites, Future: future, CapToSite: true}, nil
}

// Point is one sweep point's summary in WriteJSON's output.
type Point struct {
	Param    string           `json:"param,omitempty"`
	Value    float64          `json:"value,omitempty"`
	Cluster  string           `json:"cluster"`
	Jobs     int              `json:"jobs"`
	Policies []report.Summary `json:"policies"`
}

// WriteJSON writes results as `tide sim --scenario FILE --json` prints
// them (the live runner prints the same).
func WriteJSON(w io.Writer, sc *Scenario, res []Result) error {
	out := struct {
		Scenario string  `json:"scenario"`
		File     string  `json:"file"`
		Seed     int64   `json:"seed"`
		Points   []Point `json:"points"`
	}{Scenario: sc.Name, File: sc.File, Seed: sc.Seed}
	for _, r := range res {
		out.Points = append(out.Points, Point{Param: r.Param, Value: r.Value, Cluster: r.Cluster, Jobs: r.Jobs, Policies: report.SummarizeAll(r.Runs)})
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(out); err != nil {
		return fmt.Errorf("scenario %s: %w", sc.File, err)
	}
	return nil
}
