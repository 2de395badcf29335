package scenario

import (
	"path/filepath"
	"testing"
)

// TestForecastShipped is issue 18's point 1 on every shipped scenario
// whose capacity varies: the online forecaster's pinball loss, averaged
// over the horizons, is below both "same as now" and "same as a day ago"
// on every varying site.
func TestForecastShipped(t *testing.T) {
	if testing.Short() {
		t.Skip("replays 8 days of every shipped scenario's capacity")
	}
	files, _ := filepath.Glob("../scenarios/*.yaml")
	varying := 0
	for _, f := range files {
		sc, err := Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		res, err := sc.Forecast()
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, s := range res {
			varying++
			var fc, now, ago float64
			for _, x := range s.Scores {
				if x.N == 0 {
					t.Errorf("%s site %s horizon %v: nothing scored", sc.Name, s.Site, x.Horizon)
				}
				fc, now, ago = fc+x.Forecaster, now+x.Now, ago+x.DayAgo
			}
			t.Logf("%-24s %-6s forecaster %.3f  same as now %.3f  a day ago %.3f", sc.Name, s.Site, fc/4, now/4, ago/4)
			if !(fc < now && fc < ago) {
				t.Errorf("%s site %s: forecaster %.3f, same as now %.3f, a day ago %.3f: want the forecaster lowest", sc.Name, s.Site, fc, now, ago)
			}
		}
	}
	if varying == 0 {
		t.Fatal("no shipped scenario has varying capacity")
	}
}
