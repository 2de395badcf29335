package goodput

import (
	"encoding/csv"
	"io/fs"
	"path"
	"slices"
	"strconv"
	"testing"

	"github.com/tide-sched/tide/data"
)

// profileRow is one row of a Pollux profile's placements.csv.
type profileRow struct {
	placement string
	obs       Observation
}

// loadProfile reads the measured placements of one shipped Pollux model:
// placement is a digit string of GPUs per node ("22" is 2 nodes x 2 GPUs),
// step_time the time of an optimiser step, sync_time its synchronisation
// part, so compute time = step_time - sync_time.
func loadProfile(t testing.TB, model string) []profileRow {
	t.Helper()
	f, err := data.FS.Open(path.Join(data.ProfilesDir, model, "placements.csv"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := csv.NewReader(f).ReadAll()
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) < 2 || !slices.Equal(recs[0], []string{"placement", "local_bsz", "step_time", "sync_time"}) {
		t.Fatalf("%s: unexpected header or no rows: %v", model, recs[:min(len(recs), 1)])
	}
	var rows []profileRow
	for _, r := range recs[1:] {
		bsz, err1 := strconv.Atoi(r[1])
		step, err2 := strconv.ParseFloat(r[2], 64)
		sync, err3 := strconv.ParseFloat(r[3], 64)
		if err1 != nil || err2 != nil || err3 != nil {
			t.Fatalf("%s: bad row %v", model, r)
		}
		replicas := 0
		for _, c := range r[0] {
			if c < '1' || c > '9' {
				t.Fatalf("%s: bad placement %q", model, r[0])
			}
			replicas += int(c - '0')
		}
		rows = append(rows, profileRow{r[0], Observation{
			Nodes: len(r[0]), Replicas: replicas, LocalBsz: bsz,
			ComputeTime: step - sync, StepTime: step,
		}})
	}
	return rows
}

// profileModels lists the shipped profiles.
func profileModels(t testing.TB) []string {
	t.Helper()
	entries, err := fs.ReadDir(data.FS, data.ProfilesDir)
	if err != nil {
		t.Fatal(err)
	}
	var models []string
	for _, e := range entries {
		if e.IsDir() {
			models = append(models, e.Name())
		}
	}
	if len(models) == 0 {
		t.Fatal("no profiles")
	}
	return models
}

// quantile is the q-quantile of xs (nearest rank; xs is sorted in place).
func quantile(xs []float64, q float64) float64 {
	slices.Sort(xs)
	return xs[min(len(xs)-1, int(q*float64(len(xs))))]
}

// heldOutErrors fits train and returns the relative errors of the fitted
// step time on test.
func heldOutErrors(train, test []Observation) (FitReport, []float64) {
	rep := FitWithReport(train)
	errs := make([]float64, len(test))
	for i, o := range test {
		errs[i] = relErr(rep.Params.StepTime(o.Nodes, o.Replicas, o.LocalBsz), o.StepTime)
	}
	return rep, errs
}

// The fit on part of each measured profile predicts the measured step time
// of the rest. Two splits:
//
//   - interleaved: every other row (interpolation between measured
//     placements and batch sizes);
//   - scale-out: placements of <= 8 GPUs predict those of 9-16 GPUs
//     (extrapolation in replicas, as an agent predicts allocations it has
//     not run on).
//
// Measured (median / 90th-percentile relative error of the held-out step
// time):
//
//	model        interleaved      scale-out
//	bert         3.9% / 18.1%     3.1% /  8.3%
//	cifar10      6.7% / 14.4%     8.8% / 18.5%
//	deepspeech2  6.3% / 16.7%     7.4% / 17.1%
//	imagenet     5.0% / 13.2%     5.5% / 15.3%
//	ncf          6.7% / 20.4%     6.6% / 17.7%
//	yolov3       6.0% / 21.3%     4.2% / 11.2%
//
// The model's own error bounds these: fitted to every row, its in-sample
// median error is 4-7% and 90th percentile 14-21%. Asserted: median <= 10%,
// 90th percentile <= 25%, for every model and both splits.
//
// Not asserted, only logged: <= 2 nodes predicting 3-4 nodes. The profiles
// make 2-node placements slower than 3- and 4-node ones (BERT at batch 8:
// 2.53 s per step on "44", 1.76 s on "4444"), which no monotone network
// model extrapolates; the errors are 30-90% median.
func TestFitProfilesHeldOut(t *testing.T) {
	const maxMedian, maxP90 = 0.10, 0.25
	for _, model := range profileModels(t) {
		rows := loadProfile(t, model)
		splits := []struct {
			name   string
			train  func(i int, r profileRow) bool
			assert bool
		}{
			{"interleaved", func(i int, _ profileRow) bool { return i%2 == 0 }, true},
			{"scale-out", func(_ int, r profileRow) bool { return r.obs.Replicas <= 8 }, true},
			{"<=2 nodes", func(_ int, r profileRow) bool { return r.obs.Nodes <= 2 }, false},
		}
		for _, sp := range splits {
			var train, test []Observation
			for i, r := range rows {
				if sp.train(i, r) {
					train = append(train, r.obs)
				} else {
					test = append(test, r.obs)
				}
			}
			rep, errs := heldOutErrors(train, test)
			med, p90 := quantile(errs, 0.5), quantile(errs, 0.9)
			t.Logf("%-12s %-11s train %4d test %4d: median %5.1f%%  p90 %5.1f%%  (fit RMSLE compute %.3f step %.3f, %d evals)",
				model, sp.name, len(train), len(test), 100*med, 100*p90, rep.ComputeRMSLE, rep.StepRMSLE, rep.Evaluations)
			if !rep.Converged {
				t.Errorf("%s %s: fit did not converge: %+v", model, sp.name, rep)
			}
			if sp.assert && (med > maxMedian || p90 > maxP90) {
				t.Errorf("%s %s: held-out step-time error median %.3f, p90 %.3f; want <= %.2f, %.2f",
					model, sp.name, med, p90, maxMedian, maxP90)
			}
		}
	}
}

// A job's agent refits from the few configurations it has run. On random
// 10-row samples of each profile, the fit must reach the objective's
// minimum: no worse than the best of several restarts from random points.
func TestFitProfilesSmallSamplesOptimal(t *testing.T) {
	next := rng(7)
	for _, model := range profileModels(t) {
		rows := loadProfile(t, model)
		for k := range 10 {
			obs := make([]Observation, 2+k%9) // 2 to 10 observations
			for j := range obs {
				obs[j] = rows[int(next()*float64(len(rows)))].obs
			}
			checkNearOptimal(t, obs, model)
		}
	}
}

// BenchmarkFitProfile refits from a 10-row sample of each measured profile
// (a job's agent after ten configurations).
func BenchmarkFitProfile(b *testing.B) {
	var sets [][]Observation
	next := rng(11)
	for _, model := range profileModels(b) {
		rows := loadProfile(b, model)
		obs := make([]Observation, 10)
		for j := range obs {
			obs[j] = rows[int(next()*float64(len(rows)))].obs
		}
		sets = append(sets, obs)
	}
	i := 0
	for b.Loop() {
		Fit(sets[i%len(sets)])
		i++
	}
}

// BenchmarkFitProfileAll refits from a whole profile (540 to 1660 rows).
func BenchmarkFitProfileAll(b *testing.B) {
	var obs []Observation
	for _, r := range loadProfile(b, "cifar10") {
		obs = append(obs, r.obs)
	}
	for b.Loop() {
		Fit(obs)
	}
}
