package job

import (
	"math"
	"strings"
	"testing"
)

func TestParseMIG(t *testing.T) {
	for _, c := range []struct {
		in     string
		slices int
		mem    float64
		err    string
	}{
		{"1g.10gb", 1, 10, ""},
		{"3G.40GB", 3, 40, ""},
		{"7g.80gb", 7, 80, ""},
		{"5g.40gb", 0, 0, "slices 5"},
		{"0g.5gb", 0, 0, "slices 0"},
		{"g.5gb", 0, 0, "slices"},
		{"1g.gb", 0, 0, "memory"},
		{"1g.0gb", 0, 0, "memory"},
		{"1g.+5gb", 0, 0, "memory"},
		{"+1g.5gb", 0, 0, "slices"},
		{"1g.5", 0, 0, "want <slices>g.<memory>gb"},
		{"", 0, 0, "want <slices>g.<memory>gb"},
		{"nvidia.com/mig-1g.5gb", 0, 0, "slices"},
	} {
		s, m, err := ParseMIG(c.in)
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("ParseMIG(%q) = %d, %v, %v; want an error with %q", c.in, s, m, err, c.err)
			}
			continue
		}
		if err != nil || s != c.slices || m != c.mem {
			t.Errorf("ParseMIG(%q) = %d, %v, %v; want %d, %v", c.in, s, m, err, c.slices, c.mem)
		}
	}
}

func TestParseShare(t *testing.T) {
	for _, c := range []struct {
		in   string
		want float64 // 0: an error
	}{
		{"0.25", 0.25}, {" 0.5 ", 0.5}, {"25%", 0.25}, {"12.5 %", 0.125},
		{"1", 0}, {"0", 0}, {"-0.5", 0}, {"100%", 0}, {"NaN", 0}, {"Inf", 0}, {"", 0}, {"quarter", 0}, {"%", 0},
	} {
		got, err := ParseShare(c.in)
		if c.want == 0 {
			if err == nil || !strings.Contains(err.Error(), "GPU share") {
				t.Errorf("ParseShare(%q) = %v, %v; want an error naming the GPU share", c.in, got, err)
			}
			continue
		}
		if err != nil || math.Abs(got-c.want) > 1e-12 {
			t.Errorf("ParseShare(%q) = %v, %v; want %v", c.in, got, err, c.want)
		}
	}
}

func TestDemand(t *testing.T) {
	for _, c := range []struct {
		j         Job
		gpuMem    float64
		share, mb float64
	}{
		{Job{}, 16, 1, 16},
		{Job{Share: 0.25}, 16, 0.25, 4},
		{Job{GPUMemGiB: 8}, 32, 0.25, 8},
		{Job{GPUMemGiB: 64}, 32, 1, 64}, // more than the GPU has: Fits refuses it
		{Job{Share: 0.5, GPUMemGiB: 2}, 16, 0.5, 2},
		{Job{MIG: "2g.20gb"}, 80, 2.0 / 7, 20},
	} {
		s, m := c.j.Demand(c.gpuMem)
		if math.Abs(s-c.share) > 1e-12 || math.Abs(m-c.mb) > 1e-12 {
			t.Errorf("%+v on %v GiB: demand %v, %v; want %v, %v", c.j, c.gpuMem, s, m, c.share, c.mb)
		}
	}
	// Seven 1g slices fill a GPU exactly; an eighth does not fit.
	used := 0.0
	for i := 0; i < 7; i++ {
		if !Fits(used, 0, 1.0/7, 0, 80) {
			t.Fatalf("slice %d of 7 does not fit after %v", i+1, used)
		}
		used += 1.0 / 7
	}
	if Fits(used, 0, 1.0/7, 0, 80) {
		t.Errorf("an eighth 1g slice fits")
	}
	if Fits(0, 70, 0.1, 11, 80) || !Fits(0, 70, 0.1, 10, 80) {
		t.Errorf("memory: 70+11 of 80 GiB must not fit, 70+10 must")
	}
}

func TestValidateFraction(t *testing.T) {
	base := func() Job { return Job{ID: "j", GPUs: 1, Work: 1, Unit: Seconds} }
	for _, c := range []struct {
		name string
		edit func(*Job)
		err  string
	}{
		{"share", func(j *Job) { j.Share = 0.5 }, ""},
		{"mem", func(j *Job) { j.GPUMemGiB = 4 }, ""},
		{"mig", func(j *Job) { j.MIG = "1g.10gb" }, ""},
		{"gang of shares", func(j *Job) { j.GPUs, j.Share = 4, 0.5 }, ""},
		{"share 1", func(j *Job) { j.Share = 1 }, "gpu_share"},
		{"share negative", func(j *Job) { j.Share = -0.1 }, "gpu_share"},
		{"share NaN", func(j *Job) { j.Share = math.NaN() }, "gpu_share"},
		{"mem NaN", func(j *Job) { j.GPUMemGiB = math.NaN() }, "gpu_mem_gib"},
		{"mem negative", func(j *Job) { j.GPUMemGiB = -1 }, "gpu_mem_gib"},
		{"bad mig", func(j *Job) { j.MIG = "9g.1gb" }, "mig"},
		{"mig and share", func(j *Job) { j.MIG, j.Share = "1g.10gb", 0.5 }, "fixes its share"},
		{"elastic share", func(j *Job) { j.MinGPUs, j.MaxGPUs, j.Share = 1, 2, 0.5 }, "rigid"},
	} {
		j := base()
		c.edit(&j)
		err := j.Validate()
		if c.err == "" {
			if err != nil {
				t.Errorf("%s: %v", c.name, err)
			}
			if !j.Fractional() {
				t.Errorf("%s: not fractional", c.name)
			}
			continue
		}
		if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "job j") {
			t.Errorf("%s: error %v, want one naming job j and %q", c.name, err, c.err)
		}
	}
}

// FuzzParseMIG: any input either parses to a profile that prints back to
// itself (lower case) or is refused, never a panic.
func FuzzParseMIG(f *testing.F) {
	for _, s := range []string{"1g.10gb", "7g.80gb", "3g.", "g.gb", "1g.-1gb", "٣g.5gb"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, m, err := ParseMIG(s)
		if err != nil {
			return
		}
		if n < 1 || n > MIGSlices || !(m > 0) {
			t.Fatalf("ParseMIG(%q) = %d, %v", s, n, m)
		}
		if _, _, err := ParseMIG(strings.ToUpper(s)); err != nil {
			t.Fatalf("ParseMIG(%q) ok but upper case refused: %v", s, err)
		}
	})
}

// FuzzParseShare: a share parsed is always strictly inside (0, 1).
func FuzzParseShare(f *testing.F) {
	for _, s := range []string{"0.25", "25%", "1e-3", "0x0.8p0", "1%%", " 99.9999% "} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		v, err := ParseShare(s)
		if err == nil && !(v > 0 && v < 1) {
			t.Fatalf("ParseShare(%q) = %v", s, v)
		}
	})
}
