package scenario

import (
	"fmt"
	"sort"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/forecast"
)

// ForecastDays is how much of a scenario's capacity timeline forecasts are
// scored on: about the length of the shipped runs (8.5-9 days).
const ForecastDays = 8

// Capacities is the realised capacity of each site of the scenario whose
// capacity varies (an availability file, a diurnal wave or faults), at its
// base point (no sweep applied), as GPUs available to training, over the
// first days days. A site's value is its GPUs less those capacity takes
// (servers not available, GPUs inference needs; a server counts its
// site's mean GPUs per server) and those of failed nodes, at least 0: a
// failure and capacity are counted apart, where the simulator lets them
// overlap. Sites come in the cluster's order.
func (sc *Scenario) Capacities(days float64) ([]SiteSeries, error) {
	in := &inputs{}
	if f := sc.Availability.File; f != "" {
		var err error
		if in.changes, err = capacity.ReadFile(sc.path(f)); err != nil {
			return nil, fmt.Errorf("scenario %s: availability.file: %w", sc.File, err)
		}
	}
	p, err := sc.build(in, "", 0)
	if err != nil {
		return nil, err
	}
	return sc.capacities(p, days*86400)
}

// futureDays is how much of the realised capacity the oracle ablation is
// given: longer than any shipped run; after it the capacity holds.
const futureDays = 21

// future is the realised capacity of each varying site of a point, for
// policy.Context.Future.
func (sc *Scenario) future(p *point) (map[string]forecast.Series, error) {
	ss, err := sc.capacities(p, futureDays*86400)
	if err != nil {
		return nil, err
	}
	out := map[string]forecast.Series{}
	for _, s := range ss {
		out[s.Site] = s.Series
	}
	return out, nil
}

// capacities is Capacities at point p, until end seconds.
func (sc *Scenario) capacities(p *point, end float64) ([]SiteSeries, error) {
	return sc.capacitiesBy(p, end, func(taken, failed float64) float64 { return taken + failed })
}

// maxChanges bounds the capacity changes of one site that capacitiesBy
// holds (about 100 MB): 21 days of a sample a second takes 1.8 million.
const maxChanges = 4_000_000

// capacitiesBy is capacities with down(taken, failed) the GPUs a site has
// down when capacity takes taken and failures failed: their sum counts a
// failed server that capacity also takes twice; the larger of the two
// never counts more than the simulator has down (bound's pools).
func (sc *Scenario) capacitiesBy(p *point, end float64, down func(taken, failed float64) float64) ([]SiteSeries, error) {
	var out []SiteSeries
	for _, site := range p.c.Sites() {
		gpus := float64(site.GPUs)
		perServer := gpus / float64(max(len(site.Nodes), 1))
		type ev struct {
			t     float64
			taken float64 // capacity's GPUs from t on (-1: unchanged)
			fault float64 // change of failed GPUs at t
		}
		var evs []ev
		varies := false
		take := func(ch capacity.Change) float64 {
			if ch.Available >= 0 {
				return float64(len(site.Nodes)-min(ch.Available, len(site.Nodes))) * perServer
			}
			return float64(min(ch.Inference, site.GPUs))
		}
		for _, ch := range p.sites.Changes {
			if ch.Site == site.Name && ch.T <= end {
				evs = append(evs, ev{ch.T, take(ch), 0})
				varies = true
			}
		}
		// Each site's changes are held in memory until end: a step of a
		// millisecond or faults every second on hundreds of nodes once
		// took tens of GB. Past maxChanges the scenario is refused.
		tooMany := func(what string) error {
			return fmt.Errorf("scenario %s: site %s: %s gives more than %d capacity changes in the first %.0f days: make it change less often",
				sc.File, site.Name, what, maxChanges, end/86400)
		}
		for _, d := range p.sites.Diurnal {
			if d.Site != site.Name {
				continue
			}
			if err := d.Validate(); err != nil {
				return nil, fmt.Errorf("scenario %s: %w", sc.File, err)
			}
			if end/d.Step+float64(len(evs)) > maxChanges {
				return nil, tooMany(fmt.Sprintf("diurnal (step %g s)", d.Step))
			}
			for k := 0; float64(k)*d.Step <= end; k++ {
				evs = append(evs, ev{float64(k) * d.Step, take(d.At(k)), 0})
			}
			varies = true
		}
		for _, f := range p.sites.Faults {
			if f.Site != site.Name {
				continue
			}
			if err := f.Validate(); err != nil {
				return nil, fmt.Errorf("scenario %s: %w", sc.File, err)
			}
			for k, n := range site.Nodes {
				next := f.Node(k)
				g := float64(p.c.Nodes[n].GPUs)
				for {
					fail, rep := next()
					if fail > end {
						break
					}
					evs = append(evs, ev{fail, -1, g}, ev{rep, -1, -g})
					if len(evs) > maxChanges {
						return nil, tooMany(fmt.Sprintf("faults (mtbf %g s, mttr %g s on %d nodes)", f.MTBF, f.MTTR, len(site.Nodes)))
					}
				}
			}
			varies = true
		}
		if !varies {
			continue
		}
		sort.SliceStable(evs, func(a, b int) bool { return evs[a].t < evs[b].t })
		s := forecast.Series{{T: 0, V: gpus}}
		taken, failed := 0.0, 0.0
		for _, e := range evs {
			if e.taken >= 0 {
				taken = e.taken
			}
			failed += e.fault
			v := max(gpus-down(taken, failed), 0)
			if last := &s[len(s)-1]; last.T == e.t {
				last.V = v
			} else {
				s = append(s, forecast.Point{T: e.t, V: v})
			}
		}
		out = append(out, SiteSeries{Site: site.Name, Kind: site.Kind, GPUs: site.GPUs, Series: s})
	}
	return out, nil
}

// SiteSeries is one site's realised capacity.
type SiteSeries struct {
	Site   string
	Kind   string
	GPUs   int
	Series forecast.Series
}

// ForecastHorizons and ForecastQuantiles are what Forecast scores.
var (
	ForecastHorizons  = []float64{3600, 3 * 3600, 6 * 3600, 12 * 3600}
	ForecastQuantiles = []float64{0.1, 0.5, 0.9}
)

// SiteScores are one site's pinball losses, one per horizon.
type SiteScores struct {
	SiteSeries
	Scores []forecast.Score
}

// Forecast scores the online forecaster (package forecast, default
// configuration, clamped to the site's GPUs) against "same as now" and
// "same as a day ago" on each varying site of the scenario, over the first
// ForecastDays days, at ForecastHorizons and ForecastQuantiles.
func (sc *Scenario) Forecast() ([]SiteScores, error) {
	series, err := sc.Capacities(ForecastDays)
	if err != nil {
		return nil, err
	}
	var out []SiteScores
	for _, s := range series {
		sc, err := forecast.Evaluate(s.Series, forecast.Config{Max: float64(s.GPUs)}, ForecastDays*86400, ForecastHorizons, ForecastQuantiles)
		if err != nil {
			return nil, fmt.Errorf("site %s: %w", s.Site, err)
		}
		out = append(out, SiteScores{SiteSeries: s, Scores: sc})
	}
	return out, nil
}
