// Package pollux is the performance model built from the Pollux (OSDI'21)
// artifact's measured profiles: step times of six models on T4 GPUs for every
// placement of up to four nodes, further multi-node scalability points, and
// per-epoch gradient statistics at several batch sizes.
//
// It reproduces the Pollux artifact simulator's ground truth
// (petuum/adaptdl, branch osdi21-artifact, simulator/applications.py and the
// Job.step loop of simulator.py), so tide and that simulator advance a job the
// same way:
//
//   - Progress is counted in samples divided by the model's initial (smallest
//     validated) batch size. A job finishes when it reaches the progress of
//     its last epoch.
//   - On an allocation with K GPUs, a job with global batch size B runs
//     ceil(B/K) samples per GPU, split into gradient-accumulation steps of at
//     most the largest profiled per-GPU batch.
//   - Step and sync time come from the measured placement when there is one
//     (interpolating linearly over the per-GPU batch), otherwise from a
//     linear interpolation over (nodes, GPUs, per-GPU batch) of all points.
//   - Per epoch, statistical efficiency gives the progress one iteration is
//     worth: gain = (var + sqr) / (var/scale + sqr), scale = B / B0, with the
//     gradient statistics interpolated between validated batch sizes.
//
// See docs/performance-models.md for where tide differs.
package pollux

import (
	"encoding/csv"
	"fmt"
	"io"
	"io/fs"
	"math"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/goodput"
)

// Epochs is the number of epochs each profiled model trains, from the
// artifact's applications.py.
var Epochs = map[string]int{
	"bert": 2, "cifar10": 100, "ncf": 10, "imagenet": 90, "deepspeech2": 80, "yolov3": 50,
}

// maxLocalBszOverride holds the artifact's per-model overrides of the largest
// per-GPU batch (yolov3 is limited to 8 although 16 was profiled).
var maxLocalBszOverride = map[string]int{"yolov3": 8}

// Profile is one model's measurements.
type Profile struct {
	Name        string
	InitBatch   int // smallest validated global batch size, B0
	MaxBatch    int // largest validated global batch size
	MinLocalBsz int // smallest profiled per-GPU batch
	MaxLocalBsz int // largest per-GPU batch (profiled, or the artifact's override)
	MaxEpochs   int
	placements  map[string]*curve // normalised placement digits -> step/sync over local bsz
	points      []point           // (nodes, replicas, bsz) -> step, sync for interpolation
	nodeLevels  []int             // sorted distinct node counts among points
	valBatch    []int             // validated batch sizes, ascending
	grad        [][]gradStat      // [validation index][epoch]
	progress    []float64         // progress[e] = progress at the end of epoch e-1; progress[0] = 0
	configCache sync.Map          // configKey -> config
	spanCache   sync.Map          // spanKey -> []float64, MaxRate's bound per epoch
	interpOnce  sync.Once
	interp      interpIndex // points grouped for interpolate, built on first use
}

// interpIndex groups the scattered points as interpolate reads them: per
// node level its distinct replica counts, sorted, and per (level,
// replicas) the step and sync curve over the per-GPU batch.
type interpIndex struct {
	reps   map[int][]float64
	curves map[levelReplicas]*curve
}

type levelReplicas struct {
	nodes    int
	replicas float64
}

type gradStat struct{ sqr, vr float64 }

// curve is step and sync time measured at increasing per-GPU batch sizes.
type curve struct {
	bsz        []float64
	step, sync []float64
}

type point struct {
	nodes, replicas, bsz float64
	step, sync           float64
}

// Model is the perf.Model over a set of profiles.
type Model struct {
	Profiles map[string]*Profile
	Cost     perf.CostTable
}

// Load reads every model directory under dir in fsys (each holding
// placements.csv, scalability.csv and validation-<B>.csv files).
func Load(fsys fs.FS, dir string) (*Model, error) {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("pollux profiles: %w", err)
	}
	m := &Model{Profiles: map[string]*Profile{}, Cost: perf.CostTable{Default: perf.PolluxArtifactCosts}}
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		p, err := LoadProfile(fsys, path.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		m.Profiles[p.Name] = p
	}
	if len(m.Profiles) == 0 {
		return nil, fmt.Errorf("pollux profiles: no model directories under %s", dir)
	}
	return m, nil
}

// LoadProfile reads one model directory.
func LoadProfile(fsys fs.FS, dir string) (*Profile, error) {
	p := &Profile{Name: path.Base(dir), placements: map[string]*curve{}}
	// Validation files: per-epoch progress and gradient statistics.
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return nil, fmt.Errorf("pollux profile %s: %w", dir, err)
	}
	type val struct {
		bsz  int
		rows [][]float64
	}
	var vals []val
	for _, e := range entries {
		name := e.Name()
		if !strings.HasPrefix(name, "validation-") || !strings.HasSuffix(name, ".csv") {
			continue
		}
		b, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(name, "validation-"), ".csv"))
		if err != nil || b <= 0 {
			return nil, fmt.Errorf("pollux profile %s: file %s: batch size in the name is not a positive integer", dir, name)
		}
		rows, err := readCSV(fsys, path.Join(dir, name), []string{"progress", "iteration", "metric", "grad_sqr", "grad_var"})
		if err != nil {
			return nil, err
		}
		if len(rows) == 0 {
			return nil, fmt.Errorf("pollux profile %s: %s has no rows", dir, name)
		}
		vals = append(vals, val{b, rows})
	}
	if len(vals) == 0 {
		return nil, fmt.Errorf("pollux profile %s: no validation-<batch>.csv files", dir)
	}
	sort.Slice(vals, func(a, b int) bool { return vals[a].bsz < vals[b].bsz })
	p.InitBatch, p.MaxBatch = vals[0].bsz, vals[len(vals)-1].bsz
	p.MaxEpochs = Epochs[p.Name]
	minLen := math.MaxInt
	for _, v := range vals {
		minLen = min(minLen, len(v.rows))
	}
	if p.MaxEpochs == 0 || p.MaxEpochs > minLen {
		p.MaxEpochs = minLen
	}
	p.progress = make([]float64, p.MaxEpochs+1)
	for e := 1; e <= p.MaxEpochs; e++ {
		lo := math.Inf(1)
		for _, v := range vals {
			lo = math.Min(lo, v.rows[e-1][0])
		}
		p.progress[e] = lo
	}
	for _, v := range vals {
		p.valBatch = append(p.valBatch, v.bsz)
		gs := make([]gradStat, len(v.rows))
		for i, r := range v.rows {
			gs[i] = gradStat{sqr: r[3], vr: r[4]}
		}
		p.grad = append(p.grad, gs)
	}

	// Placements: measured step and sync time per placement and local batch.
	rows, err := readCSV(fsys, path.Join(dir, "placements.csv"), []string{"placement", "local_bsz", "step_time", "sync_time"})
	if err != nil {
		return nil, err
	}
	p.MinLocalBsz, p.MaxLocalBsz = math.MaxInt, 0
	type groupKey struct{ nodes, replicas, bsz int }
	sum := map[groupKey][3]float64{}
	var groupOrder []groupKey
	for i, r := range rows {
		digits := strconv.FormatFloat(r[0], 'f', 0, 64)
		nodes, replicas := len(digits), 0
		for _, c := range digits {
			if c < '1' || c > '9' {
				return nil, fmt.Errorf("pollux profile %s: placements.csv line %d field placement: %q is not a digit string", dir, i+2, digits)
			}
			replicas += int(c - '0')
		}
		bsz := int(r[1])
		p.MinLocalBsz, p.MaxLocalBsz = min(p.MinLocalBsz, bsz), max(p.MaxLocalBsz, bsz)
		c := p.placements[digits]
		if c == nil {
			c = &curve{}
			p.placements[digits] = c
		}
		c.bsz = append(c.bsz, r[1])
		c.step = append(c.step, r[2])
		c.sync = append(c.sync, r[3])
		k := groupKey{nodes, replicas, bsz}
		s, ok := sum[k]
		if !ok {
			groupOrder = append(groupOrder, k)
		}
		sum[k] = [3]float64{s[0] + r[2], s[1] + r[3], s[2] + 1}
	}
	for _, c := range p.placements {
		sortCurve(c)
	}
	for _, k := range groupOrder {
		s := sum[k]
		p.points = append(p.points, point{float64(k.nodes), float64(k.replicas), float64(k.bsz), s[0] / s[2], s[1] / s[2]})
	}
	if o, ok := maxLocalBszOverride[p.Name]; ok {
		p.MaxLocalBsz = o
	}
	// Scalability: further multi-node points.
	srows, err := readCSV(fsys, path.Join(dir, "scalability.csv"), []string{"num_nodes", "num_replicas", "local_bsz", "step_time", "sync_time"})
	if err != nil {
		return nil, err
	}
	for _, r := range srows {
		p.points = append(p.points, point{r[0], r[1], r[2], r[3], r[4]})
	}
	levels := map[int]bool{}
	for _, pt := range p.points {
		levels[int(pt.nodes)] = true
	}
	for n := range levels {
		p.nodeLevels = append(p.nodeLevels, n)
	}
	sort.Ints(p.nodeLevels)
	return p, nil
}

func sortCurve(c *curve) {
	idx := make([]int, len(c.bsz))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return c.bsz[idx[a]] < c.bsz[idx[b]] })
	n := &curve{}
	for _, i := range idx {
		n.bsz, n.step, n.sync = append(n.bsz, c.bsz[i]), append(n.step, c.step[i]), append(n.sync, c.sync[i])
	}
	*c = *n
}

// readCSV reads a headed CSV of numbers, checking the header names.
func readCSV(fsys fs.FS, name string, want []string) ([][]float64, error) {
	f, err := fsys.Open(name)
	if err != nil {
		return nil, fmt.Errorf("pollux profile: %w", err)
	}
	defer f.Close()
	r := csv.NewReader(f)
	r.FieldsPerRecord = len(want)
	header, err := r.Read()
	if err != nil {
		return nil, fmt.Errorf("pollux profile %s line 1: %w", name, err)
	}
	for i, h := range header {
		if strings.TrimSpace(h) != want[i] {
			return nil, fmt.Errorf("pollux profile %s line 1 column %d: want %q, got %q (header must be %s)", name, i+1, want[i], h, strings.Join(want, ","))
		}
	}
	var rows [][]float64
	for line := 2; ; line++ {
		rec, err := r.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("pollux profile %s line %d: %w", name, line, err)
		}
		row := make([]float64, len(rec))
		for i, s := range rec {
			v, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
			if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
				return nil, fmt.Errorf("pollux profile %s line %d field %s: %q is not a finite number", name, line, want[i], s)
			}
			row[i] = v
		}
		rows = append(rows, row)
	}
	return rows, nil
}

// Name implements perf.Model.
func (m *Model) Name() string { return "pollux-profiles" }

// Check implements perf.Model.
func (m *Model) Check(j *job.Job) error {
	p, ok := m.Profiles[j.Model]
	if !ok {
		return fmt.Errorf("job %s: model %q: %w (pollux profiles have %s)", j.ID, j.Model, perf.ErrUnknownModel, strings.Join(m.ModelNames(), ", "))
	}
	if j.BatchSize != 0 && (j.BatchSize < p.InitBatch || j.BatchSize > p.MaxBatch) {
		return fmt.Errorf("job %s: batch size %d outside the validated range [%d, %d] of %s", j.ID, j.BatchSize, p.InitBatch, p.MaxBatch, p.Name)
	}
	if j.Unit != job.Epochs {
		return fmt.Errorf("job %s: pollux profiles train whole epochs; work unit %q is not supported", j.ID, j.Unit)
	}
	return nil
}

// ModelNames lists the loaded profiles, sorted.
func (m *Model) ModelNames() []string {
	var names []string
	for n := range m.Profiles {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Work implements perf.Model: the progress at the end of the job's last epoch.
// A job asking for fewer epochs than the model trains stops earlier.
func (m *Model) Work(j *job.Job) float64 {
	p := m.Profiles[j.Model]
	e := p.MaxEpochs
	if j.Unit == job.Epochs && j.Work > 0 && int(math.Ceil(j.Work)) < e {
		e = int(math.Ceil(j.Work))
	}
	return p.progress[e]
}

// Costs implements perf.Model.
func (m *Model) Costs(j *job.Job) perf.Costs { return m.Cost.For(j.Model) }

// Epoch returns the epoch a job at progress x is in (0-based).
func (p *Profile) Epoch(x float64) int {
	// progress is ascending; epoch e spans [progress[e], progress[e+1]).
	e := sort.Search(len(p.progress), func(i int) bool { return p.progress[i] > x }) - 1
	return max(0, min(e, p.MaxEpochs-1))
}

// Rate implements perf.Model.
func (m *Model) Rate(j *job.Job, a perf.Alloc, x float64) (float64, float64) {
	p := m.Profiles[j.Model]
	if p == nil || a.GPUs() == 0 {
		return 0, math.Inf(1)
	}
	cfg := p.allocConfig(j, a)
	if !cfg.ok {
		return 0, math.Inf(1)
	}
	e := p.Epoch(x)
	return p.rate(cfg.batch, cfg.iterTime, e), p.progress[e+1]
}

// rate is the progress per second in epoch e of a global batch of batch
// samples taking iterTime seconds per iteration.
func (p *Profile) rate(batch int, iterTime float64, e int) float64 {
	g := p.gradAt(batch, e)
	scale := float64(batch) / float64(p.InitBatch)
	gain := (g.vr + g.sqr) / (g.vr/scale + g.sqr)
	return gain / iterTime
}

// allocConfig is the configuration a job runs with on a: the batch
// configuration its agent chose (a.LocalBsz > 0), else the one derived from
// its batch size (the model's default for adaptive jobs not yet fitted, as
// the artifact does).
func (p *Profile) allocConfig(j *job.Job, a perf.Alloc) config {
	if a.LocalBsz > 0 {
		return p.exactConfig(a.PerNode, a.LocalBsz, a.AccumSteps)
	}
	batch := j.BatchSize
	if j.AdaptBatch {
		batch = 0
	}
	return p.config(a.PerNode, batch)
}

// exactConfig is a placement run with a given atomic batch and accumulation
// steps, capped at the largest batch the profile validated.
func (p *Profile) exactConfig(perNode []int, atomic, accum int) config {
	var pl []int
	replicas := 0
	for _, g := range perNode {
		if g > 0 {
			pl = append(pl, g)
			replicas += g
		}
	}
	if replicas == 0 || accum < 0 {
		return config{}
	}
	atomic = min(atomic, p.MaxBatch/(replicas*(accum+1)))
	if atomic <= 0 {
		return config{}
	}
	step, sync := p.throughput(pl, float64(atomic))
	return makeConfig(replicas, atomic, accum, step, sync)
}

// makeConfig is the run of atomic samples per GPU and accum extra
// accumulation passes on replicas GPUs whose step and sync times at that
// atomic batch are step and sync.
func makeConfig(replicas, atomic, accum int, step, sync float64) config {
	if !(step > 0) {
		return config{}
	}
	total := atomic * replicas * (accum + 1)
	iter := step + (step-sync)*float64(accum)
	return config{batch: total, iterTime: iter, ok: true,
		c: Config{Atomic: atomic, Accum: accum, Batch: total, Step: step, Sync: sync, IterTime: iter}}
}

// Observe implements perf.Observer: the times the job would measure on a
// and its gradient statistics at progress x.
func (m *Model) Observe(j *job.Job, a perf.Alloc, x float64) (goodput.Observation, goodput.Grad, bool) {
	p := m.Profiles[j.Model]
	if p == nil {
		return goodput.Observation{}, goodput.Grad{}, false
	}
	cfg := p.allocConfig(j, a)
	if !cfg.ok {
		return goodput.Observation{}, goodput.Grad{}, false
	}
	nodes, replicas := 0, 0
	for _, g := range a.PerNode {
		if g > 0 {
			nodes++
			replicas += g
		}
	}
	g := p.gradAt(cfg.batch, p.Epoch(x))
	return goodput.Observation{Nodes: nodes, Replicas: replicas, LocalBsz: cfg.c.Atomic,
			ComputeTime: cfg.c.Step - cfg.c.Sync, StepTime: cfg.c.Step},
		goodput.Grad{Sqr: g.sqr, Var: g.vr}, true
}

// Limits implements perf.Observer.
func (m *Model) Limits(j *job.Job) goodput.Limits {
	p := m.Profiles[j.Model]
	if p == nil {
		return goodput.Limits{}
	}
	return goodput.Limits{InitBatch: p.InitBatch, MaxBatch: p.MaxBatch, MinLocal: p.MinLocalBsz,
		MaxLocal: p.MaxLocalBsz, Accumulation: true}
}

// Config is how a job runs on one placement.
type Config struct {
	Atomic   int     // per-GPU batch of one forward/backward pass
	Accum    int     // extra gradient-accumulation steps per iteration
	Batch    int     // global batch: GPUs * Atomic * (Accum+1)
	Step     float64 // measured/interpolated step time, s (compute + sync)
	Sync     float64 // of which all-reduce, s
	IterTime float64 // seconds per iteration: Step + Accum*(Step-Sync)
}

type config struct {
	batch    int
	iterTime float64
	c        Config
	ok       bool
}

// configKey names what a config depends on: the GPU counts of the
// placement's nodes that hold any, in order (computeConfig reads only
// those), and the batch. It is built without allocating, so that a lookup
// (every Snapshot.Remaining a policy asks) allocates nothing; placements
// of more than 12 nodes, or of a node with more than 255 GPUs, use
// configKeyLong.
type configKey struct {
	pl    [12]uint8
	batch int
}

// configKeyLong is configKey for the placements it cannot hold.
type configKeyLong struct {
	placement string
	batch     int
}

// Configure returns how a job of global batch size batch (0: the model's
// initial batch) runs on a placement (GPUs per node).
func (p *Profile) Configure(perNode []int, batch int) (Config, bool) {
	c := p.config(perNode, batch)
	return c.c, c.ok
}

func (p *Profile) config(perNode []int, batch int) config {
	var key any
	if k, ok := shortKey(perNode, batch); ok {
		if v, ok := p.configCache.Load(k); ok {
			return v.(config)
		}
		key = k
	} else {
		key = configKeyLong{placementKey(perNode), batch}
		if v, ok := p.configCache.Load(key); ok {
			return v.(config)
		}
	}
	c := p.computeConfig(perNode, batch)
	p.configCache.Store(key, c)
	return c
}

// shortKey is perNode's configKey, false when it holds more than 12 nodes
// with GPUs or a node with more than 255.
func shortKey(perNode []int, batch int) (configKey, bool) {
	k := configKey{batch: batch}
	n := 0
	for _, g := range perNode {
		if g == 0 {
			continue
		}
		if n == len(k.pl) || g < 0 || g > 255 {
			return configKey{}, false
		}
		k.pl[n] = uint8(g)
		n++
	}
	return k, true
}

// placementKey is configKeyLong's name of a placement: its nodes' GPU
// counts, those that hold none left out.
func placementKey(perNode []int) string {
	var b strings.Builder
	for i, g := range perNode {
		if g == 0 {
			continue
		}
		if i > 0 {
			b.WriteByte('.')
		}
		b.WriteString(strconv.Itoa(g))
	}
	return b.String()
}

// computeConfig follows the artifact's Job.update_local_bsz for a fixed
// target batch size.
func (p *Profile) computeConfig(perNode []int, batch int) config {
	var pl []int
	for _, g := range perNode {
		if g > 0 {
			pl = append(pl, g)
		}
	}
	replicas := 0
	for _, g := range pl {
		replicas += g
	}
	if replicas == 0 {
		return config{}
	}
	atomic, accum := p.split(replicas, batch)
	if atomic <= 0 {
		return config{}
	}
	step, sync := p.throughput(pl, float64(atomic))
	return makeConfig(replicas, atomic, accum, step, sync)
}

// split is the artifact's atomic batch and accumulation steps for a target
// batch (0: the model's initial batch) on replicas GPUs; atomic <= 0 when
// none fits.
func (p *Profile) split(replicas, batch int) (atomic, accum int) {
	if batch == 0 {
		batch = max(p.InitBatch, p.MinLocalBsz*replicas)
	}
	local := ceilDiv(batch, replicas)
	accum = ceilDiv(local, p.MaxLocalBsz) - 1
	if replicas == 1 && batch > p.InitBatch {
		accum = max(1, accum)
	}
	atomic = ceilDiv(local, accum+1)
	count := replicas * (accum + 1)
	return min(atomic, p.MaxBatch/count), accum
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }

// throughput returns step and sync time for a placement and per-GPU batch.
func (p *Profile) throughput(pl []int, bsz float64) (float64, float64) {
	if c, ok := p.placements[normalise(pl)]; ok {
		return c.at(bsz)
	}
	replicas := 0
	for _, g := range pl {
		replicas += g
	}
	nodes := min(len(pl), 16)
	return p.interpolate(float64(nodes), float64(replicas), bsz)
}

// normalise returns the lexicographically smallest rotation of a placement as
// a digit string ("" when a node holds more than 9 GPUs: never measured).
func normalise(pl []int) string {
	best := ""
	for i := range pl {
		var b strings.Builder
		for k := 0; k < len(pl); k++ {
			g := pl[(i+k)%len(pl)]
			if g > 9 {
				return ""
			}
			b.WriteByte(byte('0' + g))
		}
		if s := b.String(); best == "" || s < best {
			best = s
		}
	}
	return best
}

// at interpolates linearly over batch size, holding the end values outside
// the measured range (the artifact raises an error there instead).
func (c *curve) at(x float64) (float64, float64) {
	n := len(c.bsz)
	if x <= c.bsz[0] {
		return c.step[0], c.sync[0]
	}
	if x >= c.bsz[n-1] {
		return c.step[n-1], c.sync[n-1]
	}
	i := sort.SearchFloat64s(c.bsz, x)
	if c.bsz[i] == x {
		return c.step[i], c.sync[i]
	}
	w := (x - c.bsz[i-1]) / (c.bsz[i] - c.bsz[i-1])
	return c.step[i-1] + w*(c.step[i]-c.step[i-1]), c.sync[i-1] + w*(c.sync[i]-c.sync[i-1])
}

// interpolate estimates step and sync time at (nodes, replicas, bsz) from the
// scattered points: linear between the two bracketing node counts, and at
// each node count bilinear over (replicas, bsz) between the bracketing
// measured values. The artifact uses scipy's LinearNDInterpolator (linear on
// a Delaunay triangulation); on these near-grid points both are piecewise
// linear through the same measurements, but they can differ inside a cell.
func (p *Profile) interpolate(nodes, replicas, bsz float64) (float64, float64) {
	lo, hi := bracketInts(p.nodeLevels, nodes)
	s0, y0 := p.atLevel(lo, replicas, bsz)
	if lo == hi {
		return s0, y0
	}
	s1, y1 := p.atLevel(hi, replicas, bsz)
	w := (nodes - float64(lo)) / float64(hi-lo)
	return s0 + w*(s1-s0), y0 + w*(y1-y0)
}

// index returns the points grouped for interpolate.
func (p *Profile) index() *interpIndex {
	p.interpOnce.Do(func() {
		ix := interpIndex{reps: map[int][]float64{}, curves: map[levelReplicas]*curve{}}
		for _, pt := range p.points {
			k := levelReplicas{int(pt.nodes), pt.replicas}
			c := ix.curves[k]
			if c == nil {
				c = &curve{}
				ix.curves[k] = c
				ix.reps[k.nodes] = append(ix.reps[k.nodes], pt.replicas)
			}
			c.bsz, c.step, c.sync = append(c.bsz, pt.bsz), append(c.step, pt.step), append(c.sync, pt.sync)
		}
		for _, c := range ix.curves {
			sortCurve(c)
		}
		for _, r := range ix.reps {
			sort.Float64s(r)
		}
		p.interp = ix
	})
	return &p.interp
}

func (p *Profile) atLevel(nodes int, replicas, bsz float64) (float64, float64) {
	reps := p.index().reps[nodes]
	r0, r1 := bracket(reps, replicas)
	s0, y0 := p.atReplicas(nodes, r0, bsz)
	if r0 == r1 {
		return s0, y0
	}
	s1, y1 := p.atReplicas(nodes, r1, bsz)
	w := (replicas - r0) / (r1 - r0)
	return s0 + w*(s1-s0), y0 + w*(y1-y0)
}

func (p *Profile) atReplicas(nodes int, replicas, bsz float64) (float64, float64) {
	return p.index().curves[levelReplicas{nodes, replicas}].at(bsz)
}

func bracketInts(xs []int, x float64) (int, int) {
	lo, hi := xs[0], xs[len(xs)-1]
	for _, v := range xs {
		if float64(v) <= x {
			lo = v
		}
	}
	for i := len(xs) - 1; i >= 0; i-- {
		if float64(xs[i]) >= x {
			hi = xs[i]
		}
	}
	if float64(hi) < x {
		hi = lo
	}
	if float64(lo) > x {
		lo = hi
	}
	return lo, hi
}

func bracket(xs []float64, x float64) (float64, float64) {
	if x <= xs[0] {
		return xs[0], xs[0]
	}
	if x >= xs[len(xs)-1] {
		return xs[len(xs)-1], xs[len(xs)-1]
	}
	i := sort.SearchFloat64s(xs, x)
	if xs[i] == x {
		return x, x
	}
	return xs[i-1], xs[i]
}

// gradAt interpolates the gradient statistics of epoch e linearly between
// the validated batch sizes around batch.
func (p *Profile) gradAt(batch, e int) gradStat {
	b := float64(batch)
	vb := p.valBatch
	if batch <= vb[0] {
		return p.grad[0][e]
	}
	if batch >= vb[len(vb)-1] {
		return p.grad[len(vb)-1][e]
	}
	i := sort.SearchInts(vb, batch)
	if vb[i] == batch {
		return p.grad[i][e]
	}
	lo, hi := float64(vb[i-1]), float64(vb[i])
	gl, gh := p.grad[i-1][e], p.grad[i][e]
	return gradStat{
		sqr: ((b-lo)*gh.sqr + (hi-b)*gl.sqr) / (hi - lo),
		vr:  ((b-lo)*gh.vr + (hi-b)*gl.vr) / (hi - lo),
	}
}
