//go:build diag

package scenario

import (
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/forecast"
)

// TestPathCoverage measures how the forecaster's path, the q-quantile bin
// by bin as tidal's admit_cloud=path plans on it (clamped to the site's
// GPUs and never below the least seen), covers the capacity a job would
// get over the next H hours: the share of forecasts after which the
// realised mean over bins 1..H fell below the path's mean over them (q, if
// the path were calibrated for that mean), and how far above the path the
// realised mean was on average (GPUs). It is a measurement, not a check:
// docs/tidal.md, Limits, "The path's quantile is per bin". Run it with
//
//	go test -tags diag ./scenario -run TestPathCoverage -v
//
// (TIDE_PATH_FILES=faults-seed2,... narrows the files; every shipped
// scenario whose capacity varies by default, faults files at each MTBF).
func TestPathCoverage(t *testing.T) {
	files, _ := filepath.Glob("../scenarios/*.yaml")
	if only := os.Getenv("TIDE_PATH_FILES"); only != "" {
		files = nil
		for _, f := range strings.Split(only, ",") {
			files = append(files, "../scenarios/"+f+".yaml")
		}
	}
	hs := []int{6, 18, 36, 72} // bins of 600 s: 1, 3, 6 and 12 h
	for _, f := range files {
		sc, err := Load(f)
		if err != nil {
			t.Fatal(err)
		}
		in := &inputs{}
		if f := sc.Availability.File; f != "" {
			if in.changes, err = capacity.ReadFile(sc.path(f)); err != nil {
				t.Fatal(err)
			}
		}
		values := []float64{0}
		param := ""
		if sc.Sweep != nil && sc.Sweep.Param == "mtbf" {
			param, values = "mtbf", sc.Sweep.Values
		}
		for _, v := range values {
			p, err := sc.build(in, param, v)
			if err != nil {
				t.Fatal(err)
			}
			ss, err := sc.capacities(p, 9*86400)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range ss {
				at := ""
				if param != "" {
					at = fmt.Sprintf("mtbf %g", v)
				}
				line := fmt.Sprintf("%-24s %-11s %-5s", sc.Name, at, s.Site)
				for _, m := range []struct {
					q      float64
					window bool
				}{{0.2, false}, {0.5, false}, {0.2, true}} {
					q := m.q
					cover, above := pathCoverage(t, s, q, hs, m.window)
					line += fmt.Sprintf(" | q=%.1f%s:", q, map[bool]string{true: " window", false: ""}[m.window])
					for i := range hs {
						line += fmt.Sprintf(" %.2f (%+.1f)", cover[i], above[i])
					}
				}
				t.Log(line)
			}
		}
	}
}

func pathCoverage(t *testing.T, s SiteSeries, q float64, hs []int, window bool) (cover, above []float64) {
	fc, err := forecast.New(forecast.Config{Max: float64(s.GPUs), Windows: window})
	if err != nil {
		t.Fatal(err)
	}
	bin := fc.Config().Bin
	t0 := s.Series[0].T
	next, low, n := 0, math.Inf(1), 0
	cover, above = make([]float64, len(hs)), make([]float64, len(hs))
	for k := 1; t0+float64(k)*bin <= ForecastDays*86400; k++ {
		now := t0 + float64(k)*bin
		for next < len(s.Series) && s.Series[next].T <= now {
			if err := fc.Observe(s.Series[next].T, s.Series[next].V); err != nil {
				t.Fatal(err)
			}
			low = math.Min(low, s.Series[next].V)
			next++
		}
		if err := fc.Observe(now, fc.Now()); err != nil {
			t.Fatal(err)
		}
		if now-t0 < 86400 {
			continue
		}
		start, path := fc.Path(hs[len(hs)-1]+1, q)
		if window {
			start, path = fc.WindowPath(hs[len(hs)-1]+1, q)
		}
		n++
		for i, h := range hs {
			sum := 0.0
			for b := 1; b <= h; b++ {
				sum += math.Max(math.Min(path[b], float64(s.GPUs)), low)
			}
			planned := sum / float64(h)
			real := s.Series.Mean(start+bin, start+float64(h+1)*bin)
			if real < planned-1e-9 {
				cover[i]++
			}
			above[i] += real - planned
		}
	}
	for i := range hs {
		cover[i] /= float64(n)
		above[i] /= float64(n)
	}
	return cover, above
}
