package capacity

import (
	"errors"
	"math"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	in := "# edge servers and inference\ntime, site, available, inference\n0,edge,4,\n\n3600,edge,,2\n3600,infer,,12\n"
	got, err := Parse(strings.NewReader(in), "a.csv")
	if err != nil {
		t.Fatal(err)
	}
	want := []Change{
		{T: 0, Site: "edge", Available: 4, Inference: -1, Source: "a.csv", Line: 3},
		{T: 3600, Site: "edge", Available: -1, Inference: 2, Source: "a.csv", Line: 5},
		{T: 3600, Site: "infer", Available: -1, Inference: 12, Source: "a.csv", Line: 6},
	}
	if len(got) != len(want) {
		t.Fatalf("got %d changes, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("change %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"", "a.csv: empty file"},
		{"time,site\n", "a.csv line 1: header must name"},
		{"time,site,servers\n", `a.csv line 1 field "servers": unknown column`},
		{"time,site,available,available\n", `line 1 field "available": column given twice`},
		{"time,site,available\n0,edge\n", "a.csv line 2: 2 fields, the header has 3"},
		{"time,site,available\nx,edge,1\n", `a.csv line 2 field "time": "x": want seconds >= 0`},
		{"time,site,available\n-1,edge,1\n", `line 2 field "time"`},
		{"time,site,available\nNaN,edge,1\n", `line 2 field "time"`},
		{"time,site,available\n10,edge,1\n5,edge,1\n", `line 3 field "time": 5 is before`},
		{"time,site,available\n0,,1\n", `line 2 field "site": missing`},
		{"time,site,available\n0,edge,-1\n", `line 2 field "available"`},
		{"time,site,available\n0,edge,1.5\n", `line 2 field "available"`},
		{"time,site,available,inference\n0,edge,1,2\n", "line 2: give exactly one"},
		{"time,site,available,inference\n0,edge,,\n", "line 2: give exactly one"},
		{"time,site,inference\n0,infer,99999999999\n", `line 2 field "inference"`},
	} {
		_, err := Parse(strings.NewReader(tc.in), "a.csv")
		var pe *Error
		if err == nil || !errors.As(err, &pe) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%q: error %v, want one containing %q", tc.in, err, tc.want)
		}
	}
}

func TestDiurnal(t *testing.T) {
	d := Diurnal{Site: "edge", Measure: "available", Period: 86400, Trough: 2, Peak: 10, Step: 3600}
	if err := d.Validate(); err != nil {
		t.Fatal(err)
	}
	if got := d.At(0).Available; got != 2 {
		t.Errorf("trough: %d servers, want 2", got)
	}
	if got := d.At(12).Available; got != 10 {
		t.Errorf("peak at half the period: %d servers, want 10", got)
	}
	if got := d.At(6).Available; got != 6 {
		t.Errorf("quarter period: %d servers, want 6", got)
	}
	if d.At(3).Inference != -1 {
		t.Error("an availability wave set inference")
	}
	// Noise: same seed, same wave; values stay >= 0.
	n := Diurnal{Site: "i", Measure: "inference", Trough: 0, Peak: 4, Noise: 3, Seed: 5}
	if err := n.Validate(); err != nil {
		t.Fatal(err)
	}
	differs := false
	for k := 0; k < 200; k++ {
		a, b := n.At(k), n.At(k)
		if a != b || a.Inference < 0 {
			t.Fatalf("sample %d: %+v then %+v", k, a, b)
		}
		base := 2 - 2*math.Cos(2*math.Pi*float64(k)*600/86400)
		differs = differs || math.Abs(float64(a.Inference)-math.Round(base)) > 1
	}
	if !differs {
		t.Error("noise of 3 never moved the wave by more than one")
	}
	for _, bad := range []Diurnal{{Measure: "available"}, {Site: "e", Measure: "x"}, {Site: "e", Measure: "available", Period: -1},
		{Site: "e", Measure: "available", Noise: math.Inf(1)}, {Site: "e", Measure: "available", Phase: math.NaN()}} {
		if err := bad.Validate(); err == nil {
			t.Errorf("%+v: no error", bad)
		}
	}
}

func TestFaults(t *testing.T) {
	f := Faults{Site: "cloud", MTBF: 1000, Seed: 1}
	if err := f.Validate(); err != nil || f.MTTR != 3600 {
		t.Fatalf("validate: %v, mttr %v", err, f.MTTR)
	}
	// The mean gap between failures approaches MTBF + MTTR.
	next := f.Node(0)
	last, sum := 0.0, 0.0
	const n = 20000
	for i := 0; i < n; i++ {
		fail, rep := next()
		if fail < last || rep != fail+3600 {
			t.Fatalf("event %d: fail %v repair %v after %v", i, fail, rep, last)
		}
		sum += fail - last
		last = rep
	}
	if mean := sum / n; math.Abs(mean-1000) > 50 {
		t.Errorf("mean time to failure %v, want about 1000", mean)
	}
	a, b := f.Node(0), f.Node(1)
	if x, _ := a(); func() bool { y, _ := b(); return x == y }() {
		t.Error("two nodes fail at the same time")
	}
	for _, bad := range []Faults{{Site: "c", MTBF: 0}, {Site: "c", MTBF: 0.5}, {Site: "c", MTBF: 1e-300, MTTR: 1e-300}, {Site: "c", MTBF: 60, MTTR: 0.5}} {
		var fe *FieldError
		if err := bad.Validate(); !errors.As(err, &fe) || (fe.Field != "mtbf" && fe.Field != "mttr") || fe.What != "faults c" {
			t.Errorf("%+v: error %v, want one naming mtbf or mttr of faults c", bad, err)
		}
	}
	if err := (&Faults{Site: "c", MTBF: MinInterval, MTTR: MinInterval}).Validate(); err != nil {
		t.Errorf("a second apart: %v", err)
	}
	d := Diurnal{Site: "e", Measure: "available", Step: 0.001}
	var fe *FieldError
	if err := d.Validate(); !errors.As(err, &fe) || fe.Field != "step" || err.Error() != "diurnal e: step: want at least 1 second between samples, got 0.001" {
		t.Errorf("step 0.001: %v", err)
	}
}

func FuzzParse(f *testing.F) {
	f.Add("time,site,available\n0,edge,4\n")
	f.Add("time,site,available,inference\n0,edge,4,\n10,infer,,3\n")
	f.Add("# c\n\ntime,site,inference\n5,i,0\n")
	f.Add("time,site,available\n1e308,e,1\n")
	f.Fuzz(func(t *testing.T, in string) {
		chs, err := Parse(strings.NewReader(in), "f.csv")
		if err != nil {
			if !strings.HasPrefix(err.Error(), "availability f.csv") {
				t.Fatalf("error does not name the file: %v", err)
			}
			return
		}
		last := 0.0
		for _, ch := range chs {
			if ch.T < last || math.IsNaN(ch.T) || math.IsInf(ch.T, 0) || ch.Site == "" || (ch.Available < 0) == (ch.Inference < 0) || ch.Line < 1 {
				t.Fatalf("accepted a bad change %+v", ch)
			}
			last = ch.T
		}
	})
}
