package api

import (
	"errors"
	"math"
	"strings"
	"testing"
)

// FuzzDecodeReport: any bytes either decode into a report or give a
// DecodeError, never a panic; a report Validate accepts has a progress in
// [0, 1] and finite, non-negative times and statistics; one it refuses
// names each bad field.
func FuzzDecodeReport(f *testing.F) {
	for _, seed := range []string{
		`{"progress": 0.5, "throughput": 812.5, "message": "epoch 3"}`,
		`{"step": 3, "total_steps": 6}`,
		`{"step_time": 0.2, "compute_time": 0.15, "local_bsz": 64, "replicas": 2, "nodes": 1, "grad_sqr": 1, "grad_var": 10}`,
		`{"progress": 2}`, `{"step": 1}`, `{"progress": -0}`, `{"step_time": 1e400}`, `{"replicas": -1}`,
		`{"message": "\u0007"}`, `{"progress": null}`, `{"steps": 1}`, `{} {}`, `"x"`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var r Report
		if err := DecodeStrict(strings.NewReader(string(data)), &r); err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		errs := r.Validate()
		for _, e := range errs {
			if e.Field == "" || e.Message == "" {
				t.Fatalf("field error without field or message: %+v", e)
			}
		}
		if len(errs) > 0 {
			return
		}
		if p, ok := r.Fraction(); ok && !(p >= 0 && p <= 1) {
			t.Fatalf("valid report with progress %v", p)
		}
		for _, v := range []float64{r.Step, r.TotalSteps, r.Throughput, r.StepTime, r.ComputeTime, r.GradSqr, r.GradVar} {
			if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
				t.Fatalf("valid report with value %v: %+v", v, r)
			}
		}
	})
}
