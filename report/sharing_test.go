package report

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

// TestSharingSummary: jobs that shared count with what they saved; a run
// without sharing has no sharing summary, and the table shows the sharing
// rows only when some run shared ("-" for the runs that did not).
func TestSharingSummary(t *testing.T) {
	shared := &Run{Policy: "packed", TotalGPUs: 1, Jobs: []JobRecord{
		{ID: "a", Submit: 0, Start: 0, Finish: 100, GPUSeconds: 9000, SharedGPUSeconds: 27000},
		{ID: "b", Submit: 0, Start: 0, Finish: 100, GPUSeconds: 18000, SharedGPUSeconds: 18000},
		{ID: "c", Submit: 0, Start: 100, Finish: 200, GPUSeconds: 36000},
	}}
	alone := &Run{Policy: "alone", TotalGPUs: 1, Jobs: []JobRecord{{ID: "a", Submit: 0, Start: 0, Finish: 100, GPUSeconds: 36000}}}
	s := Summarize(shared)
	if s.Sharing == nil || s.Sharing.Jobs != 2 || math.Abs(s.Sharing.SavedGPUHours-12.5) > 1e-12 || math.Abs(s.GPUHours-17.5) > 1e-12 {
		t.Errorf("sharing %+v, %v GPU-h; want 2 jobs, 12.5 GPU-h saved, 17.5 charged", s.Sharing, s.GPUHours)
	}
	if a := Summarize(alone); a.Sharing != nil {
		t.Errorf("a run without sharing has %+v", a.Sharing)
	}
	var b bytes.Buffer
	if err := WriteTable(&b, []Summary{Summarize(alone)}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(b.String(), "saved by sharing") {
		t.Errorf("sharing rows without sharing:\n%s", b.String())
	}
	b.Reset()
	if err := WriteTable(&b, SummarizeAll([]*Run{alone, shared})); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, row := range []struct{ label, alone, packed string }{
		{"jobs sharing GPUs", "-", "2"}, {"GPU-hours charged", "10.0", "17.5"}, {"GPU-hours saved by sharing", "-", "12.5"},
	} {
		i := strings.Index(out, row.label)
		if i < 0 {
			t.Fatalf("no row %q:\n%s", row.label, out)
		}
		line, _, _ := strings.Cut(out[i+len(row.label):], "\n")
		if f := strings.Fields(line); len(f) != 2 || f[0] != row.alone || f[1] != row.packed {
			t.Errorf("row %q: %q, want %s and %s", row.label, line, row.alone, row.packed)
		}
	}
}
