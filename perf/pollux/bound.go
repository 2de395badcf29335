package pollux

import (
	"math"
	"sort"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// MaxRate implements perf.Bounder: the highest Rate j makes in the epoch of
// progress x over every placement in s (a measured placement's step times
// depend on its shape, and a spread one can beat the packed one) and, when
// j.AdaptBatch, over every batch configuration its agent may choose: an
// atomic batch of 1 to MaxLocalBsz samples per GPU and any number of
// accumulation steps, capped at MaxBatch as Rate caps them (Alloc.LocalBsz,
// AccumSteps), the model's default included. The maximum is exact: every
// configuration is priced as Rate prices it. The bound per epoch is
// computed once per span, job batch and adaptivity, and kept. ok is always
// true.
func (m *Model) MaxRate(j *job.Job, s perf.Span, x float64) (float64, float64, bool) {
	p := m.Profiles[j.Model]
	if p == nil {
		return 0, math.Inf(1), true
	}
	e := p.Epoch(x)
	return p.spanRates(s, j.AdaptBatch, j.BatchSize)[e], p.progress[e+1], true
}

var _ perf.Bounder = (*Model)(nil)

// spanKey names what spanRates depend on (the GPU type does not matter to
// the profiles).
type spanKey struct {
	minGPUs, maxGPUs, perNode, nodes int
	adapt                            bool
	batch                            int // the job's batch, when not adapt
}

// placementClass is a set of placements with the same step times: one
// measured placement (its normalised digits), or every unmeasured one of
// nodes nodes and replicas GPUs (interpolated).
type placementClass struct {
	digits          []int // a measured placement; nil for interpolated
	nodes, replicas int
}

// spanRates is MaxRate's bound for each epoch.
func (p *Profile) spanRates(s perf.Span, adapt bool, batch int) []float64 {
	if adapt {
		batch = 0
	}
	k := spanKey{s.MinGPUs, s.MaxGPUs, s.PerNode, s.Nodes, adapt, batch}
	if v, ok := p.spanCache.Load(k); ok {
		return v.([]float64)
	}
	rates := make([]float64, p.MaxEpochs)
	classes := p.classes(s)
	if adapt {
		// The least iteration time of each global batch size.
		least := make([]float64, p.MaxBatch+1)
		for i := range least {
			least[i] = math.Inf(1)
		}
		note := func(c config) {
			if c.ok && c.batch <= p.MaxBatch && c.iterTime < least[c.batch] {
				least[c.batch] = c.iterTime
			}
		}
		// The default configuration (Alloc.LocalBsz 0) of each class.
		for _, c := range classes {
			if atomic, accum := p.split(c.replicas, 0); atomic > 0 {
				step, sync := p.classThroughput(c, float64(atomic))
				note(makeConfig(c.replicas, atomic, accum, step, sync))
			}
		}
		// Every atomic batch and accumulation steps, on the classes of
		// each GPU count (consecutive in classes) whose step and compute
		// times at that atomic batch no other class beats both.
		type times struct{ step, sync, compute float64 }
		var front []times
		var curves []classCurve
		for lo := 0; lo < len(classes); {
			r := classes[lo].replicas
			hi := lo
			for hi < len(classes) && classes[hi].replicas == r {
				hi++
			}
			curves = curves[:0]
			for _, c := range classes[lo:hi] {
				curves = append(curves, p.classCurve(c))
			}
			for atomic := 1; atomic <= min(p.MaxLocalBsz, p.MaxBatch/r); atomic++ {
				front = front[:0]
				for i := range curves {
					step, sync := curves[i].at(float64(atomic))
					if !(step > 0) {
						continue
					}
					// Insertion by step, then compute time (a few classes).
					t := times{step, sync, step - sync}
					n := len(front)
					front = append(front, t)
					for n > 0 && (front[n-1].step > t.step || front[n-1].step == t.step && front[n-1].compute > t.compute) {
						front[n] = front[n-1]
						n--
					}
					front[n] = t
				}
				fastest := math.Inf(1) // compute time, of the classes kept
				for _, f := range front {
					if !(f.compute < fastest) {
						continue // a kept class is no slower at any accumulation
					}
					fastest = f.compute
					for accum := 0; atomic*r*(accum+1) <= p.MaxBatch; accum++ {
						note(makeConfig(r, atomic, accum, f.step, f.sync))
					}
				}
			}
			lo = hi
		}
		type point struct {
			batch int
			iter  float64
		}
		var pts []point
		for b, t := range least {
			if !math.IsInf(t, 1) {
				pts = append(pts, point{b, t})
			}
		}
		for e := range rates {
			for _, pt := range pts {
				rates[e] = math.Max(rates[e], p.rate(pt.batch, pt.iter, e))
			}
		}
	} else {
		var cfgs []config
		for _, c := range classes {
			atomic, accum := p.split(c.replicas, batch)
			if atomic <= 0 {
				continue
			}
			step, sync := p.classThroughput(c, float64(atomic))
			if cfg := makeConfig(c.replicas, atomic, accum, step, sync); cfg.ok {
				cfgs = append(cfgs, cfg)
			}
		}
		for e := range rates {
			for _, c := range cfgs {
				rates[e] = math.Max(rates[e], p.rate(c.batch, c.iterTime, e))
			}
		}
	}
	v, _ := p.spanCache.LoadOrStore(k, rates)
	return v.([]float64)
}

// classThroughput is throughput on the placements of class c.
func (p *Profile) classThroughput(c placementClass, bsz float64) (float64, float64) {
	if c.digits != nil {
		return p.throughput(c.digits, bsz)
	}
	return p.interpolate(float64(min(c.nodes, 16)), float64(c.replicas), bsz)
}

// classCurve is classThroughput with the curves and weights that depend
// only on the class looked up once: the same arithmetic on the same
// values.
type classCurve struct {
	measured *curve
	l0, l1   levelCurve // interpolate's two node levels
	w        float64
	same     bool // one level
}

// levelCurve is atLevel's two replica curves and weight.
type levelCurve struct {
	c0, c1 *curve
	w      float64
	same   bool
}

func (p *Profile) classCurve(c placementClass) classCurve {
	if c.digits != nil {
		if m, ok := p.placements[normalise(c.digits)]; ok {
			return classCurve{measured: m}
		}
	}
	nodes, replicas := float64(min(c.nodes, 16)), float64(c.replicas)
	level := func(n int) levelCurve {
		ix := p.index()
		r0, r1 := bracket(ix.reps[n], replicas)
		l := levelCurve{c0: ix.curves[levelReplicas{n, r0}], same: r0 == r1}
		if !l.same {
			l.c1, l.w = ix.curves[levelReplicas{n, r1}], (replicas-r0)/(r1-r0)
		}
		return l
	}
	lo, hi := bracketInts(p.nodeLevels, nodes)
	cc := classCurve{l0: level(lo), same: lo == hi}
	if !cc.same {
		cc.l1, cc.w = level(hi), (nodes-float64(lo))/float64(hi-lo)
	}
	return cc
}

func (l *levelCurve) at(bsz float64) (float64, float64) {
	s0, y0 := l.c0.at(bsz)
	if l.same {
		return s0, y0
	}
	s1, y1 := l.c1.at(bsz)
	return s0 + l.w*(s1-s0), y0 + l.w*(y1-y0)
}

func (c *classCurve) at(bsz float64) (float64, float64) {
	if c.measured != nil {
		return c.measured.at(bsz)
	}
	s0, y0 := c.l0.at(bsz)
	if c.same {
		return s0, y0
	}
	s1, y1 := c.l1.at(bsz)
	return s0 + c.w*(s1-s0), y0 + c.w*(y1-y0)
}

// classes lists the placement classes of s: every measured placement that
// fits it, and for each node count and GPU count that some unmeasured
// placement takes, the interpolated one.
func (p *Profile) classes(s perf.Span) []placementClass {
	type measured struct {
		digits    []int
		sum, most int
		rotations int // distinct rotations: the placements it stands for
	}
	var keys []measured
	for key := range p.placements {
		d := digits(key)
		if d == nil || normalise(d) != key {
			continue // never looked up
		}
		m := measured{digits: d, rotations: rotations(key)}
		for _, g := range d {
			m.sum, m.most = m.sum+g, max(m.most, g)
		}
		keys = append(keys, m)
	}
	// Sorted, so that the classes come in one order.
	sort.Slice(keys, func(a, b int) bool { return lessDigits(keys[a].digits, keys[b].digits) })
	maxLen := 0
	for _, m := range keys {
		maxLen = max(maxLen, len(m.digits))
	}
	var out []placementClass
	for r := max(s.MinGPUs, 1); r <= s.MaxGPUs; r++ {
		per := s.PerNode
		if per <= 0 {
			per = r
		}
		nodes := r
		if s.Nodes > 0 {
			nodes = min(nodes, s.Nodes)
		}
		for k := (r + per - 1) / per; k <= nodes; k++ {
			covered := 0
			for _, m := range keys {
				if len(m.digits) == k && m.sum == r && m.most <= per {
					out = append(out, placementClass{digits: m.digits, nodes: k, replicas: r})
					covered += m.rotations
				}
			}
			if k > maxLen || compositions(r, k, per) > covered {
				// interpolate reads at most 16 nodes: every larger count
				// is the class of 16, added once.
				out = append(out, placementClass{nodes: min(k, 16), replicas: r})
				if k >= 16 && k >= maxLen {
					break
				}
			}
		}
	}
	return out
}

// compositions counts the placements of r GPUs on k nodes of 1 to per GPUs
// each (ordered), saturating at MaxInt.
func compositions(r, k, per int) int {
	// n[j]: ways to put j GPUs on the nodes so far.
	n := make([]int, r+1)
	n[0] = 1
	for range k {
		next := make([]int, r+1)
		for j, w := range n {
			if w == 0 {
				continue
			}
			for g := 1; g <= per && j+g <= r; g++ {
				next[j+g] = min(next[j+g]+w, math.MaxInt/2)
			}
		}
		n = next
	}
	return n[r]
}

// rotations counts a placement's distinct rotations.
func rotations(key string) int {
	for i := 1; i < len(key); i++ {
		if key[i:]+key[:i] == key {
			return i
		}
	}
	return len(key)
}

func lessDigits(a, b []int) bool {
	if len(a) != len(b) {
		return len(a) < len(b)
	}
	for i := range a {
		if a[i] != b[i] {
			return a[i] < b[i]
		}
	}
	return false
}

// digits is a placement key's GPUs per node; nil when it is not one.
func digits(key string) []int {
	if key == "" {
		return nil
	}
	d := make([]int, len(key))
	for i, c := range key {
		if c < '1' || c > '9' {
			return nil
		}
		d[i] = int(c - '0')
	}
	return d
}
