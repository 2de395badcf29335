package assemble

import (
	"fmt"
	"os"
	"strings"

	"github.com/tide-sched/tide/data"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/pollux"
	"github.com/tide-sched/tide/perf/table"
)

// DurationCosts: a duration-only job starts for free and pays 30 s (the
// Pollux artifact's checkpoint-restore figure) when preempted or resized.
var DurationCosts = perf.CostTable{Default: perf.Costs{Start: 0, Restart: 30, Resize: 30}}

// DurationModel is the model that replays each job's recorded duration,
// with DurationCosts.
func DurationModel() perf.Duration { return perf.Duration{Cost: DurationCosts} }

// ToDuration rewrites jobs to count their work as their recorded duration
// (copies; jobs already counted in seconds are shared).
func ToDuration(jobs []*job.Job) ([]*job.Job, error) {
	out := make([]*job.Job, len(jobs))
	for i, j := range jobs {
		if j.Unit == job.Seconds {
			out[i] = j
			continue
		}
		if !(j.Duration > 0) {
			return nil, fmt.Errorf("job %s counts work in %s and has no recorded duration", j.ID, j.Unit)
		}
		c := *j
		c.Work, c.Unit = j.Duration, job.Seconds
		out[i] = &c
	}
	return out, nil
}

// PolluxModel loads the Pollux profiles from dir, or the embedded ones
// when dir is "".
func PolluxModel(dir string) (*pollux.Model, error) {
	if dir == "" {
		return pollux.Load(data.FS, data.ProfilesDir)
	}
	return pollux.Load(os.DirFS(dir), ".")
}

// TablesModel loads ElasticFlow throughput tables, one DIR@TYPE per part,
// into one table. typeOf, when set, names the GPU type of a part without
// one.
func TablesModel(parts []string, typeOf func(dir string) string) (*table.Table, error) {
	var tab *table.Table
	for _, part := range parts {
		dir, typ, _ := strings.Cut(part, "@")
		if typ == "" && typeOf != nil {
			typ = typeOf(dir)
		}
		t, err := table.LoadElasticFlowDir(dir, typ)
		if err != nil {
			return nil, err
		}
		if tab == nil {
			tab = t
		} else if err := tab.Add(t); err != nil {
			return nil, err
		}
	}
	if tab == nil {
		return nil, fmt.Errorf("no throughput table given")
	}
	return tab, nil
}
