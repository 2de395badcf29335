package scenario

import (
	"path/filepath"
	"strings"
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

// TestTooManyChanges: a site whose capacity would change more than
// maxChanges times in the realised future the scenario holds in memory
// (faults a second apart on 300 nodes: 21 days of them would take tens of
// GB) is refused, naming the site and the generator, before any run.
func TestTooManyChanges(t *testing.T) {
	dir := t.TempDir()
	write(t, filepath.Join(dir, "t.csv"), "id,submit,gpus,duration\na,0,1,100\n")
	write(t, filepath.Join(dir, "s.yaml"), `cluster:
  sites:
    - {name: cloud, nodes: [{count: 300, gpus: 1, gpu: a100}]}
availability:
  faults: [{site: cloud, mtbf: 1, mttr: 1, seed: 1}]
trace: {file: t.csv}
model: {kind: duration}
policies: [fifo]
`)
	sc, err := Load(filepath.Join(dir, "s.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	_, err = sc.Run(nil)
	if err == nil || !strings.Contains(err.Error(), "site cloud: faults (mtbf 1 s, mttr 1 s on 300 nodes) gives more than 4000000 capacity changes") {
		t.Fatalf("error %v, want the site's changes refused", err)
	}
}
