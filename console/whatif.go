package console

import (
	"fmt"
	"math"
	"sort"
	"time"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/report"
	"github.com/tide-sched/tide/sim"
)

// Replay is the live queue as the simulator's input: the active jobs with
// the work they have left, all submitted at time 0 (now).
type Replay struct {
	Now     time.Time
	Cluster *cluster.Cluster
	// Policy and Placer are the running ones' specs; Round the executor's
	// time between rounds, s.
	Policy, Placer string
	Round          float64
	Jobs           []*job.Job
	// Age is each job's time since its submission, s: its predicted JCT is
	// its age plus its finish in the replay.
	Age map[string]float64
	// Quota, when not nil, is the tenants' quotas the executor applies
	// over its policy (its Inner is ignored): the replay applies them over
	// each policy it replays.
	Quota *policy.Quota
}

// MaxWhatIfJobs bounds the queue a what-if replays; MaxForecastJobs the
// queue the background forecast replays (a replay's rounds each cost time
// in proportion to the queue, so its cost grows with its square).
const (
	MaxWhatIfJobs   = 5000
	MaxForecastJobs = 2000
)

// WhatIf compares the running policy with another on the same replay.
type WhatIf struct {
	Base  string `json:"base"`
	Alt   string `json:"alt"`
	Jobs  int    `json:"jobs"`
	GPUs  int    `json:"gpus"`
	Model string `json:"model"`
	// BaseStats and AltStats summarise the predicted JCTs of the jobs the
	// asker may see.
	BaseStats JCTStats `json:"base_stats"`
	AltStats  JCTStats `json:"alt_stats"`
	// Rows are those jobs, at most MaxRows, the largest changes first.
	Rows    []WhatIfRow `json:"rows"`
	Elapsed float64     `json:"elapsed_s"` // server time spent, s
}

// WhatIfRow is one job's predicted JCT under both policies, s (-1: does not
// finish in the replay).
type WhatIfRow struct {
	ID     string  `json:"id"`
	Tenant string  `json:"tenant"`
	GPUs   int     `json:"gpus"`
	Base   float64 `json:"base_jct"`
	Alt    float64 `json:"alt_jct"`
}

// JCTStats summarises predicted JCTs, s.
type JCTStats struct {
	Mean       float64 `json:"mean"`
	P50        float64 `json:"p50"`
	P95        float64 `json:"p95"`
	Max        float64 `json:"max"`
	Unfinished int     `json:"unfinished"`
}

// MaxRows bounds the rows of a what-if answer.
const MaxRows = 500

// whatIf replays r under its running policy and under alt, and returns the
// predicted JCTs of the jobs p may see.
func whatIf(r *Replay, alt string, p Principal) (*WhatIf, error) {
	if len(r.Jobs) > MaxWhatIfJobs {
		return nil, fmt.Errorf("the queue holds %d jobs; the what-if replays at most %d", len(r.Jobs), MaxWhatIfJobs)
	}
	t0 := time.Now()
	base, err := replay(r, r.Policy)
	if err != nil {
		return nil, fmt.Errorf("running policy %s: %w", r.Policy, err)
	}
	other, err := replay(r, alt)
	if err != nil {
		return nil, err
	}
	out := &WhatIf{Base: r.Policy, Alt: alt, Jobs: len(r.Jobs), GPUs: r.Cluster.TotalGPUs(), Model: "duration (run time left at the requested GPUs)"}
	var bs, as []float64
	for i, j := range r.Jobs {
		if !p.sees(j.Tenant) {
			continue
		}
		row := WhatIfRow{ID: j.ID, Tenant: j.Tenant, GPUs: j.GPUs, Base: jct(base[i].Finish, r.Age[j.ID]), Alt: jct(other[i].Finish, r.Age[j.ID])}
		out.Rows = append(out.Rows, row)
		bs, as = append(bs, row.Base), append(as, row.Alt)
	}
	out.BaseStats, out.AltStats = stats(bs), stats(as)
	sort.SliceStable(out.Rows, func(a, b int) bool {
		return math.Abs(out.Rows[a].Alt-out.Rows[a].Base) > math.Abs(out.Rows[b].Alt-out.Rows[b].Base)
	})
	if len(out.Rows) > MaxRows {
		out.Rows = out.Rows[:MaxRows]
	}
	out.Elapsed = time.Since(t0).Seconds()
	return out, nil
}

func jct(finish, age float64) float64 {
	if finish < 0 {
		return -1
	}
	return finish + age
}

// replay runs the jobs under spec and returns their records, in r.Jobs'
// order (times from the replay's start, s; -1 when it never came).
func replay(r *Replay, spec string) ([]report.JobRecord, error) {
	jobs := make([]*job.Job, len(r.Jobs))
	for i, j := range r.Jobs {
		c := *j
		jobs[i] = &c
	}
	pol, err := policy.Parse(spec, policy.Context{Jobs: jobs})
	if err != nil {
		return nil, err
	}
	if r.Quota != nil {
		q := *r.Quota
		q.Inner = pol
		pol = &q
	}
	pl, err := place.Lookup(r.Placer)
	if err != nil {
		return nil, err
	}
	info, _ := policy.Lookup(spec)
	run, err := sim.Run(sim.Config{Cluster: r.Cluster, Model: perf.Duration{}, Policy: pol, Placer: pl, Round: r.Round,
		OnEvents: true, Agents: info.Elastic, Trace: "live queue"}, jobs)
	if err != nil {
		return nil, err
	}
	return run.Jobs, nil
}

func stats(v []float64) JCTStats {
	var s JCTStats
	var done []float64
	for _, x := range v {
		if x < 0 {
			s.Unfinished++
			continue
		}
		done = append(done, x)
	}
	if len(done) == 0 {
		return s
	}
	sort.Float64s(done)
	sum := 0.0
	for _, x := range done {
		sum += x
	}
	s.Mean = sum / float64(len(done))
	s.P50 = done[(len(done)-1)/2]
	s.P95 = done[int(math.Ceil(0.95*float64(len(done))))-1]
	s.Max = done[len(done)-1]
	return s
}

// forecast is the running policy's replay of the queue: when each waiting
// job is predicted to start, for the jobs the policy gives no prediction.
type forecast struct {
	at    time.Time
	start map[string]time.Time
}

// forecastEvery is how often the forecast is renewed while the queue
// changes, and forecastStale how old it may grow when nothing changes.
const (
	forecastEvery = 5 * time.Second
	forecastStale = time.Minute
)

// maybeForecast starts a new forecast in the background when the last one
// is old (or the queue changed since) and none is running.
func (c *Console) maybeForecast(v *view) {
	rp, ok := c.src.(Replayer)
	if !ok || v.summary.Running+v.summary.Waiting > MaxForecastJobs || c.subscribers() == 0 {
		return // nothing to replay, too much, or nobody watching
	}
	missing := false
	for i := range v.snap.Jobs {
		if j := &v.snap.Jobs[i]; j.Waiting() && (j.PredictedStart == nil || j.Forecast) {
			missing = true
			break
		}
	}
	if !missing {
		return // the policy predicts every start
	}
	now := c.opts.Now()
	c.mu.Lock()
	age := now.Sub(c.forecastAt)
	// Never more than a tenth of the time in replays: a queue whose replay
	// takes a second is forecast every 10 s at most.
	every := max(forecastEvery, 10*c.fcCost)
	if c.forecasting || (c.fcDigest == v.digest && age < forecastStale) || age < every {
		c.mu.Unlock()
		return
	}
	c.forecasting, c.forecastAt, c.fcDigest = true, now, v.digest
	c.mu.Unlock()
	go func() {
		t0 := time.Now()
		fc := c.forecast(rp)
		c.mu.Lock()
		c.forecasting, c.fcCost = false, time.Since(t0)
		if fc != nil {
			c.fc = fc
			c.cur = nil // the next view carries it
		}
		c.mu.Unlock()
	}()
}

// forecast replays the queue under the running policy; nil when it cannot.
func (c *Console) forecast(rp Replayer) *forecast {
	r, err := rp.Replay()
	if err != nil || len(r.Jobs) > MaxForecastJobs {
		return nil
	}
	recs, err := replay(r, r.Policy)
	if err != nil {
		return nil
	}
	fc := &forecast{at: r.Now, start: make(map[string]time.Time, len(recs))}
	for i, rec := range recs {
		if rec.Start >= 0 {
			fc.start[r.Jobs[i].ID] = r.Now.Add(seconds(rec.Start))
		}
	}
	return fc
}
