// Package console is tide's web console: a single-page application,
// embedded in the binary (assets/, built from web/ with npm and committed),
// and the read-only JSON and server-sent-events endpoints it reads under
// /ui/api/. tide serve mounts it on its API port, tide kube on a port of its
// own (--ui-listen). A Source (types.go) gives it the state; the console
// filters it by who asks, pages it, keeps a history of utilisation and
// replays the queue in the simulator for the what-if view.
//
// Authentication is the API's: every /ui/api/ request carries the tenant's
// token in an Authorization: Bearer header (the login page keeps it in the
// tab's sessionStorage; it never appears in a URL, and the console logs
// nothing about requests).
package console

import (
	"context"
	"errors"
	"hash/fnv"
	"log/slog"
	"math"
	"sort"
	"sync"
	"time"
)

// Options tune a console; the zero value is usable.
type Options struct {
	// SampleEvery is the utilisation history's resolution (default 10 s);
	// History how much of it is kept (default 24 h).
	SampleEvery time.Duration
	History     time.Duration
	// MaxAge is how old a snapshot may be when a view is served (default
	// 500 ms): requests within it share one.
	MaxAge time.Duration
	// Tick is how often the live stream looks for changes (default 1 s).
	Tick time.Duration
	// Now is the clock (default time.Now); tests set it.
	Now func() time.Time
	// Samples, when set, keeps the utilisation history across restarts:
	// New loads what it holds, each sample taken is saved to it.
	Samples SampleStore
	// Logger hears of a history that could not be loaded or saved
	// (default: discarded).
	Logger *slog.Logger
}

// Console serves the web console for one Source.
type Console struct {
	src  Source
	opts Options

	mu       sync.Mutex
	cur      *view // the latest snapshot, prepared
	building chan struct{}

	hmu     sync.Mutex
	samples []Sample // ring, oldest first once full
	first   int

	smu  sync.Mutex
	subs map[chan Update]bool

	wmu sync.Mutex // one what-if at a time

	fc          *forecast // under mu
	forecastAt  time.Time // when the last forecast began; under mu
	fcDigest    uint64    // the digest of the view it began from
	forecasting bool
	fcCost      time.Duration // how long the last forecast took
	// ordered are the policies (by name) that gave waiting jobs positions
	// in a snapshot so far; under mu. A snapshot whose waiting jobs have
	// none (they all arrived, or were released, since the last round)
	// still shows such a policy's order.
	ordered map[string]bool

	done      chan struct{} // closed by Close
	closeOnce sync.Once
}

// New returns a console for src.
func New(src Source, opts Options) *Console {
	if opts.SampleEvery <= 0 {
		opts.SampleEvery = 10 * time.Second
	}
	if opts.History <= 0 {
		opts.History = 24 * time.Hour
	}
	if opts.MaxAge <= 0 {
		opts.MaxAge = 500 * time.Millisecond
	}
	if opts.Tick <= 0 {
		opts.Tick = time.Second
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	c := &Console{src: src, opts: opts, subs: map[chan Update]bool{}, done: make(chan struct{}), ordered: map[string]bool{}}
	if opts.Samples != nil {
		if err := c.load(); err != nil {
			opts.Logger.Error("console: the utilisation history before this start is lost", "err", err)
		}
	}
	return c
}

// Close ends the live streams and Run (an http.Server's Shutdown waits for
// open streams: register Close with RegisterOnShutdown).
func (c *Console) Close() {
	c.closeOnce.Do(func() { close(c.done) })
}

// view is a snapshot prepared for queries.
type view struct {
	snap  *Snapshot
	built time.Time
	// order is Jobs' indices: active jobs (running first, then waiting in
	// the policy's order), then ended ones, latest first.
	order   []int
	byID    map[string]int
	digest  uint64
	summary Summary
	// positionBy: "policy" when the policy orders the waiting jobs,
	// "submission" when the console numbered them in submission order (the
	// policy gives no order), "none" when no job waits.
	positionBy string
}

// Summary is the cluster's headline numbers.
type Summary struct {
	Kind      string    `json:"kind"`
	Policy    string    `json:"policy"`
	Placer    string    `json:"placer,omitempty"`
	Time      time.Time `json:"time"`
	Rounds    int       `json:"rounds"`
	Nodes     int       `json:"nodes"`
	GPUs      int       `json:"gpus"`
	Down      int       `json:"down"`
	Allocated int       `json:"allocated"`
	Useful    int       `json:"useful"`
	Running   int       `json:"running"`
	Waiting   int       `json:"waiting"`
	Held      int       `json:"held"`
	AtRisk    int       `json:"at_risk"`
	Sites     []string  `json:"sites"`
	Types     []string  `json:"gpu_types"`
}

// snapshot returns a view at most MaxAge old, building one when needed;
// concurrent callers share one build.
func (c *Console) snapshot() (*view, error) {
	for {
		c.mu.Lock()
		if v := c.cur; v != nil && c.opts.Now().Sub(v.built) < c.opts.MaxAge {
			c.mu.Unlock()
			return v, nil
		}
		if ch := c.building; ch != nil {
			c.mu.Unlock()
			<-ch
			continue
		}
		ch := make(chan struct{})
		c.building = ch
		c.mu.Unlock()
		v, err := c.build()
		c.mu.Lock()
		if err == nil {
			c.cur = v
		}
		c.building = nil
		close(ch)
		c.mu.Unlock()
		return v, err
	}
}

func (c *Console) build() (*view, error) {
	s, err := c.src.Snapshot()
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	fc, ordered := c.fc, c.ordered[s.Policy]
	c.mu.Unlock()
	v := prepare(s, c.opts.Now(), fc, ordered)
	if v.positionBy == "policy" && !ordered {
		c.mu.Lock()
		c.ordered[s.Policy] = true
		c.mu.Unlock()
	}
	c.maybeForecast(v)
	return v, nil
}

// prepare orders a snapshot's jobs, fills positions when the policy gives
// none (submission order), predicted starts the policy did not give (from
// the forecast, when there is one), predicted finishes and risks, and
// computes its summary and digest. ordered says the running policy gave
// positions in an earlier snapshot: it orders the queue even when none of
// the jobs waiting now has a position yet (they arrived, or were released,
// since its last round); those come last, unnumbered, and say why.
func prepare(s *Snapshot, built time.Time, fc *forecast, ordered bool) *view {
	v := &view{snap: s, built: built, byID: make(map[string]int, len(s.Jobs))}
	waiting, positioned := 0, 0
	for i := range s.Jobs {
		j := &s.Jobs[i]
		v.byID[j.ID] = i
		if j.Waiting() {
			waiting++
			if j.Position > 0 {
				positioned++
			}
		}
	}
	switch {
	case waiting == 0:
		v.positionBy = "none"
	case positioned > 0 || ordered:
		v.positionBy = "policy"
	default:
		v.positionBy = "submission"
	}
	v.order = make([]int, len(s.Jobs))
	for i := range v.order {
		v.order[i] = i
	}
	sort.SliceStable(v.order, func(a, b int) bool { return lessJob(&s.Jobs[v.order[a]], &s.Jobs[v.order[b]]) })
	pos := 0
	for _, i := range v.order {
		j := &s.Jobs[i]
		switch {
		case !j.Waiting():
		case v.positionBy == "submission":
			pos++
			j.Position = pos
		case j.Position == 0 && j.Reason == "":
			j.Reason = notOrdered
		}
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		if fc != nil && j.Waiting() && j.PredictedStart == nil {
			if t, ok := fc.start[j.ID]; ok {
				j.PredictedStart = &t
				j.Forecast = true
			}
		}
		predict(j, s.Time)
	}
	v.summary = summarise(s)
	v.digest = digest(s)
	return v
}

// notOrdered is the reason of a waiting job the policy has not seen yet
// when it orders the others.
const notOrdered = "not in the policy's order yet: it arrived, or was released, after the last round"

// rank orders job states: running, waiting, held, over.
func rank(j *Job) int {
	switch {
	case j.State == StateRunning:
		return 0
	case j.Waiting():
		return 1
	case j.State == StateHeld:
		return 2
	}
	return 3
}

func lessJob(a, b *Job) bool {
	ra, rb := rank(a), rank(b)
	if ra != rb {
		return ra < rb
	}
	switch ra {
	case 1:
		pa, pb := a.Position, b.Position
		if pa == 0 {
			pa = math.MaxInt
		}
		if pb == 0 {
			pb = math.MaxInt
		}
		if pa != pb {
			return pa < pb
		}
	case 3:
		ea, eb := endOf(a), endOf(b)
		if !ea.Equal(eb) {
			return ea.After(eb)
		}
	}
	return a.Submitted.Before(b.Submitted)
}

func endOf(j *Job) time.Time {
	if j.Ended != nil {
		return *j.Ended
	}
	return j.Submitted
}

// predict fills a job's predicted finish (its predicted or actual start
// plus the run time left) and its deadline risk: "late" when it is
// predicted to finish after its deadline, "tight" when within a tenth of
// its remaining time of it, "ok" otherwise, "missed" for an ended job that
// finished late; "" without a deadline.
func predict(j *Job, now time.Time) {
	if j.Active() {
		var start time.Time
		switch {
		case j.State == StateRunning:
			start = now
		case j.PredictedStart != nil:
			start = *j.PredictedStart
			if start.Before(now) {
				start = now
			}
		}
		if !start.IsZero() {
			f := start.Add(seconds(j.RemainingS))
			j.PredictedFinish = &f
		}
	}
	if j.Deadline == nil {
		return
	}
	switch {
	case !j.Active():
		if j.Ended != nil && j.Ended.After(*j.Deadline) {
			j.Risk = "missed"
		} else {
			j.Risk = "ok"
		}
	case j.PredictedFinish == nil:
		if now.Add(seconds(j.RemainingS)).After(*j.Deadline) {
			j.Risk = "late"
		} else {
			j.Risk = "unknown"
		}
	case j.PredictedFinish.After(*j.Deadline):
		j.Risk = "late"
	case j.Deadline.Sub(*j.PredictedFinish) < seconds(j.RemainingS/10):
		j.Risk = "tight"
	default:
		j.Risk = "ok"
	}
}

func seconds(s float64) time.Duration {
	if s > 1e9 || math.IsNaN(s) {
		s = 1e9
	}
	return time.Duration(s * float64(time.Second))
}

func summarise(s *Snapshot) Summary {
	sum := Summary{Kind: s.Kind, Policy: s.Policy, Placer: s.Placer, Time: s.Time, Rounds: s.Rounds, Nodes: len(s.Nodes)}
	sites, types := map[string]bool{}, map[string]bool{}
	for i := range s.Nodes {
		n := &s.Nodes[i]
		if !sites[n.Site] {
			sites[n.Site] = true
			sum.Sites = append(sum.Sites, n.Site)
		}
		if !types[n.GPUType] {
			types[n.GPUType] = true
			sum.Types = append(sum.Types, n.GPUType)
		}
		sum.GPUs += len(n.GPUs)
		for _, g := range n.GPUs {
			if g.Down || g.Reclaimed {
				sum.Down++
			}
		}
	}
	sort.Strings(sum.Types)
	for i := range s.Jobs {
		j := &s.Jobs[i]
		switch {
		case j.State == StateRunning:
			sum.Running++
		case j.Waiting():
			sum.Waiting++
		case j.State == StateHeld:
			sum.Held++
		}
		sum.Allocated += j.Held
		if j.Working {
			sum.Useful += j.Held
		}
		if j.Active() && (j.Risk == "late" || j.Risk == "tight") {
			sum.AtRisk++
		}
	}
	return sum
}

// digest hashes what the views show, so the live stream pushes an update
// only when something changed.
func digest(s *Snapshot) uint64 {
	h := fnv.New64a()
	var buf []byte
	str := func(x string) { buf = append(buf, x...); buf = append(buf, 0) }
	num := func(x int64) {
		for k := 0; k < 8; k++ {
			buf = append(buf, byte(x>>(8*k)))
		}
	}
	str(s.Policy)
	num(int64(s.Rounds))
	for i := range s.Nodes {
		for _, g := range s.Nodes[i].GPUs {
			str(g.Job)
			if g.Down || g.Reclaimed {
				buf = append(buf, 1)
			}
		}
		if len(buf) > 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		str(j.ID)
		str(j.State)
		str(j.Reason)
		num(int64(j.Held))
		num(int64(j.Position))
		num(int64(j.Progress * 1000))
		num(int64(j.Throughput * 100))
		if j.PredictedStart != nil {
			num(j.PredictedStart.Unix())
		}
		if len(buf) > 4096 {
			h.Write(buf)
			buf = buf[:0]
		}
	}
	h.Write(buf)
	return h.Sum64()
}

// Run keeps the utilisation history and feeds the live stream until ctx
// ends or the source closes.
func (c *Console) Run(ctx context.Context) {
	sample := time.NewTicker(c.opts.SampleEvery)
	defer sample.Stop()
	tick := time.NewTicker(c.opts.Tick)
	defer tick.Stop()
	var last uint64
	c.record()
	for {
		select {
		case <-ctx.Done():
			return
		case <-c.done:
			return
		case <-sample.C:
			if err := c.record(); errors.Is(err, ErrClosed) {
				return
			} else if err != nil {
				c.opts.Logger.Error("console: utilisation sample", "err", err)
			}
		case <-tick.C:
			if c.subscribers() == 0 {
				continue
			}
			v, err := c.snapshot()
			if errors.Is(err, ErrClosed) {
				return
			}
			if err != nil || v.digest == last {
				continue
			}
			last = v.digest
			c.broadcast(v)
		}
	}
}
