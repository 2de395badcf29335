//go:build ignore

// gen writes the capacity files of the tidal-* scenarios: two weeks of
// edge availability and inference demand with weekday and weekend shapes,
// bursts and peaks shifted from the edgeflow-diurnal and harvest-* waves.
// Run from the repository root:
//
//	go run scenarios/tidal/gen.go
//
// It is deterministic (fixed seeds); the files it writes are committed, and
// were written before any policy was tuned on them.
package main

import (
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"sort"
)

const (
	step = 600.0
	days = 14
	day  = 86400.0
)

type row struct {
	t       float64
	site    string
	measure string // available or inference
	v       int
}

// bump is 1 inside [from, to) hours of the day, 0 outside, with hour-long
// cosine ramps on both sides.
func bump(h, from, to float64) float64 {
	switch {
	case h >= from && h < to:
		return 1
	case h >= from-1 && h < from:
		return (1 - math.Cos(math.Pi*(h-from+1))) / 2
	case h >= to && h < to+1:
		return (1 + math.Cos(math.Pi*(h-to))) / 2
	}
	return 0
}

func weekend(t float64) bool { return int(t/day)%7 >= 5 } // days 5 and 6 of each week

// office is an edge site whose servers belong to people: idle at night,
// busy in working hours (from..to, shifted by shift hours), mostly idle at
// weekends.
func office(site string, servers, trough, shift, noise float64, seed uint64) []row {
	r := rand.New(rand.NewPCG(seed, 1))
	var out []row
	for k := 0; float64(k)*step < days*day; k++ {
		t := float64(k) * step
		h := math.Mod(t/3600-shift+48, 24)
		busy := bump(h, 9, 18)
		lo := trough
		if weekend(t) {
			lo = servers - (servers-trough)/4
		}
		v := servers - (servers-lo)*busy + noise*r.NormFloat64()
		out = append(out, row{t, site, "available", clamp(v, servers)})
	}
	return out
}

// serving is an inference site's demand: a daily wave peaking at peakHour
// (lower at weekends) plus bursts (Poisson, perDay a day) of extra GPUs for
// 10-60 minutes.
func serving(site string, gpus, trough, peak, peakHour, noise, perDay float64, seed uint64) []row {
	r := rand.New(rand.NewPCG(seed, 2))
	var out []row
	burstEnd, burst := -1.0, 0.0
	for k := 0; float64(k)*step < days*day; k++ {
		t := float64(k) * step
		lo, hi := trough, peak
		if weekend(t) {
			lo, hi = trough*0.75, trough+(peak-trough)*0.45
		}
		v := lo + (hi-lo)*(1+math.Cos(2*math.Pi*(t/3600-peakHour)/24))/2
		if t >= burstEnd {
			burst = 0
			if r.Float64() < perDay*step/day {
				burst = 10 + 6*r.Float64()
				burstEnd = t + 600*float64(1+r.IntN(6))
			}
		}
		v += burst + noise*r.NormFloat64()
		out = append(out, row{t, site, "inference", clamp(v, gpus)})
	}
	return out
}

func clamp(v, hi float64) int { return int(math.Max(0, math.Min(hi, math.Round(v)))) }

func write(path, comment string, rows ...[]row) {
	var all []row
	for _, rs := range rows {
		all = append(all, rs...)
	}
	sort.SliceStable(all, func(a, b int) bool { return all[a].t < all[b].t })
	cols := map[string]bool{}
	for _, x := range all {
		cols[x.measure] = true
	}
	f, err := os.Create(path)
	if err != nil {
		panic(err)
	}
	defer f.Close()
	fmt.Fprintf(f, "# %s\n# written by scenarios/tidal/gen.go\n", comment)
	both := cols["available"] && cols["inference"]
	switch {
	case both:
		fmt.Fprintln(f, "time,site,available,inference")
	case cols["available"]:
		fmt.Fprintln(f, "time,site,available")
	default:
		fmt.Fprintln(f, "time,site,inference")
	}
	for _, x := range all {
		switch {
		case !both:
			fmt.Fprintf(f, "%g,%s,%d\n", x.t, x.site, x.v)
		case x.measure == "available":
			fmt.Fprintf(f, "%g,%s,%d,\n", x.t, x.site, x.v)
		default:
			fmt.Fprintf(f, "%g,%s,,%d\n", x.t, x.site, x.v)
		}
	}
}

func main() {
	write("scenarios/tidal/week-edge.csv",
		"16 office edge servers: 3 idle in working hours 9-18 on weekdays, 16 at night, 13 in weekend working hours; noise 1",
		office("edge", 16, 3, 0, 1, 18))
	write("scenarios/tidal/burst-infer.csv",
		"inference demand on 32 GPUs: 8-30 peaking at 14:00 on weekdays, 6-19 at weekends, noise 2, bursts of +10-16 GPUs for 10-60 min, 3 a day",
		serving("infer", 32, 8, 30, 14, 2, 3, 18))
	write("scenarios/tidal/mix.csv",
		"edge: 8 office servers, working hours shifted 6 h late (15-24), 1 idle then; infer: demand on 16 GPUs 4-15 peaking at 20:00, bursts 2 a day",
		office("edge", 8, 1, 6, 0.7, 19), serving("infer", 16, 4, 15, 20, 1.5, 2, 19))
}
