package console

import (
	"encoding/json"
	"fmt"
	"sort"
	"time"
)

// Sample is the cluster's use at one instant.
type Sample struct {
	Time time.Time `json:"time"`
	// GPUs up; Allocated to jobs; Useful: allocated to jobs whose process
	// runs (the rest is allocated but idle: launching, backing off after a
	// failure, stopping).
	Up        int `json:"up"`
	Allocated int `json:"allocated"`
	Useful    int `json:"useful"`
	Waiting   int `json:"waiting"` // jobs
	// Tenants is GPUs allocated per tenant.
	Tenants map[string]int `json:"-"`
	// Gap marks the time the console did not watch (its executor was
	// down, between the last sample kept before a restart and the first
	// after): it counts as nothing up, nothing allocated.
	Gap bool `json:"gap,omitempty"`
}

// SampleStore keeps the utilisation history across restarts (tide serve
// keeps it in its database). Samples are opaque bytes to it.
type SampleStore interface {
	// LoadSamples returns the samples kept at or after from, oldest first.
	LoadSamples(from time.Time) ([][]byte, error)
	// SaveSample keeps data under time at and forgets those before forget.
	SaveSample(at time.Time, data []byte, forget time.Time) error
}

// storedSample is a Sample as a SampleStore keeps it (its tenants too).
type storedSample struct {
	Sample
	Tenants map[string]int `json:"tenants,omitempty"`
}

// load fills the history from the SampleStore and marks the gap since.
func (c *Console) load() error {
	now := c.opts.Now()
	raw, err := c.opts.Samples.LoadSamples(now.Add(-c.opts.History))
	if err != nil {
		return fmt.Errorf("loading the utilisation history: %w", err)
	}
	max := int(c.opts.History / c.opts.SampleEvery)
	if len(raw) > max {
		raw = raw[len(raw)-max:]
	}
	out := make([]Sample, 0, len(raw)+1)
	for k, b := range raw {
		var s storedSample
		if err := json.Unmarshal(b, &s); err != nil {
			return fmt.Errorf("utilisation sample %d of %d: %w", k+1, len(raw), err)
		}
		s.Sample.Tenants = s.Tenants
		out = append(out, s.Sample)
	}
	if n := len(out); n > 0 && out[n-1].Time.Before(now) {
		// Until this start nothing was watched: the last sample counts
		// for a sampling period at most.
		end := out[n-1].Time.Add(c.opts.SampleEvery)
		if end.After(now) {
			end = now
		}
		out = append(out, Sample{Time: end, Gap: true})
	}
	if len(out) > max {
		out = out[len(out)-max:]
	}
	c.hmu.Lock()
	c.samples, c.first = out, 0
	c.hmu.Unlock()
	return nil
}

// save keeps s in the SampleStore.
func (c *Console) save(s Sample) error {
	data, err := json.Marshal(storedSample{Sample: s, Tenants: s.Tenants})
	if err != nil {
		return err
	}
	if err := c.opts.Samples.SaveSample(s.Time, data, s.Time.Add(-c.opts.History)); err != nil {
		return fmt.Errorf("saving a utilisation sample: %w", err)
	}
	return nil
}

// sampleOf is the use a view shows.
func sampleOf(v *view) Sample {
	s := Sample{Time: v.snap.Time, Up: v.summary.GPUs - v.summary.Down, Allocated: v.summary.Allocated,
		Useful: v.summary.Useful, Waiting: v.summary.Waiting, Tenants: map[string]int{}}
	for i := range v.snap.Jobs {
		if j := &v.snap.Jobs[i]; j.Held > 0 {
			s.Tenants[j.Tenant] += j.Held
		}
	}
	return s
}

// record takes a sample of the source now.
func (c *Console) record() error {
	v, err := c.snapshot()
	if err != nil {
		return err
	}
	s := sampleOf(v)
	c.hmu.Lock()
	if n := len(c.samples); n > 0 && !s.Time.After(c.samples[(c.first+n-1)%n].Time) {
		// The same snapshot as the last sample's (a view is reused for
		// MaxAge): nothing new.
		c.hmu.Unlock()
		return nil
	}
	max := int(c.opts.History / c.opts.SampleEvery)
	if len(c.samples) < max {
		c.samples = append(c.samples, s)
	} else {
		c.samples[c.first] = s
		c.first = (c.first + 1) % len(c.samples)
	}
	c.hmu.Unlock()
	if c.opts.Samples != nil {
		return c.save(s)
	}
	return nil
}

// history returns the samples since from, oldest first.
func (c *Console) history(from time.Time) []Sample {
	c.hmu.Lock()
	defer c.hmu.Unlock()
	n := len(c.samples)
	out := make([]Sample, 0, n)
	for k := 0; k < n; k++ {
		s := c.samples[(c.first+k)%n]
		if !s.Time.Before(from) {
			out = append(out, s)
		}
	}
	return out
}

// Usage is the utilisation view: the samples and their totals.
type Usage struct {
	From    time.Time `json:"from"`
	To      time.Time `json:"to"`
	Samples []Sample  `json:"samples"`
	// GPU-hours over the period: up, allocated, useful, and allocated but
	// idle (allocated - useful).
	UpGPUh            float64 `json:"up_gpu_hours"`
	AllocatedGPUh     float64 `json:"allocated_gpu_hours"`
	UsefulGPUh        float64 `json:"useful_gpu_hours"`
	IdleAllocatedGPUh float64 `json:"idle_allocated_gpu_hours"`
}

// usage integrates samples: each counts until the next (the last until
// to), so the totals are exact for a step function sampled at each change.
func usage(samples []Sample, from, to time.Time) Usage {
	u := Usage{From: from, To: to, Samples: samples}
	for k, s := range samples {
		end := to
		if k+1 < len(samples) {
			end = samples[k+1].Time
		}
		h := end.Sub(s.Time).Hours()
		if h <= 0 {
			continue
		}
		u.UpGPUh += h * float64(s.Up)
		u.AllocatedGPUh += h * float64(s.Allocated)
		u.UsefulGPUh += h * float64(s.Useful)
	}
	u.IdleAllocatedGPUh = u.AllocatedGPUh - u.UsefulGPUh
	return u
}

// TenantRow is one tenant in the tenants view.
type TenantRow struct {
	Name string `json:"name"`
	// Quota is the tenant's guaranteed GPUs (0: none); InUse the GPUs its
	// jobs hold; Borrowed those beyond its quota; Lent its quota's GPUs
	// that other tenants borrow now.
	Quota    int `json:"quota"`
	InUse    int `json:"in_use"`
	Borrowed int `json:"borrowed"`
	Lent     int `json:"lent"`
	// Waiting jobs and the GPUs they ask for; Running jobs.
	Waiting     int `json:"waiting"`
	WaitingGPUs int `json:"waiting_gpus"`
	Running     int `json:"running"`
	// GPUHours is its GPU-hours over the period asked for.
	GPUHours float64 `json:"gpu_hours"`
}

// tenants builds the tenants view from a snapshot and the history.
func tenants(s *Snapshot, samples []Sample, to time.Time) []TenantRow {
	rows := map[string]*TenantRow{}
	row := func(name string) *TenantRow {
		r := rows[name]
		if r == nil {
			r = &TenantRow{Name: name}
			rows[name] = r
		}
		return r
	}
	for _, t := range s.Tenants {
		row(t)
	}
	for t, q := range s.Quotas {
		row(t).Quota = q
	}
	for i := range s.Jobs {
		j := &s.Jobs[i]
		r := row(j.Tenant)
		r.InUse += j.Held
		switch {
		case j.State == StateRunning:
			r.Running++
		case j.Waiting():
			r.Waiting++
			r.WaitingGPUs += j.GPUs
		}
	}
	for k, smp := range samples {
		end := to
		if k+1 < len(samples) {
			end = samples[k+1].Time
		}
		h := end.Sub(smp.Time).Hours()
		for t, g := range smp.Tenants {
			if h > 0 {
				row(t).GPUHours += h * float64(g)
			}
		}
	}
	// Borrowed GPUs come out of the idle quota of others: share the
	// borrowed total among the lenders in proportion to their idle quota.
	borrowed, idle := 0, 0
	for _, r := range rows {
		if r.Quota > 0 {
			r.Borrowed = max(0, r.InUse-r.Quota)
			idle += max(0, r.Quota-r.InUse)
		} else if len(s.Quotas) > 0 && !s.Unquoted {
			r.Borrowed = r.InUse
		}
		borrowed += r.Borrowed
	}
	out := make([]TenantRow, 0, len(rows))
	for _, r := range rows {
		out = append(out, *r)
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Name < out[b].Name })
	if idle > 0 && borrowed > 0 {
		lend := min(borrowed, idle)
		left := lend
		for i := range out {
			r := &out[i]
			if r.Quota > r.InUse {
				r.Lent = lend * (r.Quota - r.InUse) / idle
				left -= r.Lent
			}
		}
		for i := range out { // the rounding remainder, in name order
			if r := &out[i]; left > 0 && r.Quota-r.InUse > r.Lent {
				r.Lent++
				left--
			}
		}
	}
	return out
}
