package perf

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
)

func TestSpeedFactors(t *testing.T) {
	j := &job.Job{ID: "a", GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Work: 100, Unit: job.Seconds}
	m := SpeedFactors{Base: Duration{}, Speed: map[string]float64{"v100": 1, "k80": 0.25}}
	cases := []struct {
		typ    string
		strict bool
		want   float64
	}{
		{"v100", false, 1},
		{"K80", false, 0.25}, // type names compare case-insensitively
		{"p100", false, 1},   // unlisted: the base rate
		{"p100", true, 0},    // unlisted and strict: cannot run
	}
	for _, c := range cases {
		m.Strict = c.strict
		r, _ := m.Rate(j, Packed(c.typ, 2, 4), 0)
		if r != c.want {
			t.Errorf("%s strict=%v: rate %v, want %v", c.typ, c.strict, r, c.want)
		}
	}
	// 100 s of work at a quarter of the speed takes 400 s.
	m.Strict = false
	if got := Remaining(m, j, Packed("k80", 2, 4), 0); got != 400 {
		t.Errorf("remaining on k80 = %v, want 400", got)
	}
	m.Strict = true
	pinned := *j
	pinned.GPUType = "p100"
	if err := m.Check(&pinned); err == nil || !strings.Contains(err.Error(), `"p100" has no speed factor`) {
		t.Errorf("check of a job pinned to an unlisted type: %v", err)
	}
}

func TestParseSpeedFactors(t *testing.T) {
	got, err := ParseSpeedFactors("V100=1, p100=0.6,k80=0.25")
	if err != nil || len(got) != 3 || got["v100"] != 1 || got["p100"] != 0.6 || got["k80"] != 0.25 {
		t.Fatalf("got %v, %v", got, err)
	}
	for _, bad := range []string{"", "v100", "v100=0", "v100=-1", "v100=x", "=1", "v100=1,V100=2", "v100=Inf", "v100=1abc", "v100=NaN"} {
		if _, err := ParseSpeedFactors(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// FuzzParseSpeedFactors: any input either fails or gives positive finite
// factors under non-empty lower-case names, and printing them back parses
// to the same map.
func FuzzParseSpeedFactors(f *testing.F) {
	for _, s := range []string{"v100=1,p100=0.6,k80=0.25", "A100 = 2", "x=1e-3,y=1e3", "v100=1,V100=2", "=", ",", "t4=NaN"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		m, err := ParseSpeedFactors(spec)
		if err != nil {
			return
		}
		var parts []string
		for k, v := range m {
			if k == "" || k != strings.ToLower(k) || !(v > 0) || math.IsInf(v, 0) {
				t.Fatalf("%q: bad entry %q=%v", spec, k, v)
			}
			parts = append(parts, fmt.Sprintf("%s=%v", k, v))
		}
		again, err := ParseSpeedFactors(strings.Join(parts, ","))
		if err != nil || len(again) != len(m) {
			t.Fatalf("%q: round trip %v, %v", spec, again, err)
		}
		for k, v := range m {
			if again[k] != v {
				t.Fatalf("%q: %s = %v after a round trip, was %v", spec, k, again[k], v)
			}
		}
	})
}
