package report

import (
	"slices"
	"testing"
)

func TestDistinctNames(t *testing.T) {
	cases := []struct {
		name     string
		policies []string // what the policies call themselves
		specs    []string // what the user wrote
		want     []string
	}{
		{"unique names stay", []string{"fifo", "tiresias"}, []string{"fifo", "tiresias:limits=1/2"}, []string{"fifo", "tiresias"}},
		{"two specs of one policy", []string{"tiresias", "tiresias", "fifo"}, []string{"tiresias", "tiresias:limits=600/1200", "fifo"},
			[]string{"tiresias", "tiresias:limits=600/1200", "fifo"}},
		{"the same spec twice", []string{"srtf", "srtf", "srtf"}, []string{"srtf", "srtf", "srtf:x=1"}, []string{"srtf", "srtf #2", "srtf:x=1"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			runs := make([]*Run, len(tc.policies))
			for i, p := range tc.policies {
				runs[i] = &Run{Policy: p}
			}
			DistinctNames(runs, tc.specs)
			var got []string
			for _, r := range runs {
				got = append(got, r.Policy)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("got %q, want %q", got, tc.want)
			}
		})
	}
}
