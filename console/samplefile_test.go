package console

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestSampleFileHistorySurvivesRestart: a console keeping its history in a
// SampleFile (tide kube --ui-history) is closed with a job running; a new
// console on the same file shows the samples from before, the time between
// as one gap, and goes on sampling.
func TestSampleFileHistorySurvivesRestart(t *testing.T) {
	path := filepath.Join(t.TempDir(), "history")
	src := newEngineSource(t, "1x4:t4", "fifo")
	src.submit(t, "a", "alice", 2, 3600, 0)
	src.round(t)
	now := Unix(src.clk.t)
	clock := func() time.Time { return now }
	open := func() *Console {
		t.Helper()
		f, err := OpenSampleFile(path)
		if err != nil {
			t.Fatal(err)
		}
		return New(src, Options{SampleEvery: 10 * time.Second, MaxAge: time.Nanosecond, Now: clock, Samples: f})
	}
	c := open()
	for k := 0; k < 3; k++ { // at 0, 10 and 20 s
		if err := c.record(); err != nil {
			t.Fatal(err)
		}
		src.clk.t += 10
		now = Unix(src.clk.t)
	}
	c.Close()
	// Down for 100 s.
	src.clk.t += 100
	now = Unix(src.clk.t)
	c = open()
	if err := c.record(); err != nil {
		t.Fatal(err)
	}
	var u Usage
	get(t, c.Handler(), "admin-token", "GET", "/ui/api/usage?hours=1", "", &u)
	// The view adds the state now (not kept) as its last point.
	if len(u.Samples) != 6 {
		t.Fatalf("%d samples after the restart, want the 3 before, a gap, 1 after and the state now: %+v", len(u.Samples), u.Samples)
	}
	gaps := 0
	for k, s := range u.Samples {
		switch {
		case s.Gap:
			gaps++
		case s.Allocated != 2:
			t.Errorf("sample %d: %d GPUs allocated, want the job's 2", k, s.Allocated)
		}
	}
	if !u.Samples[3].Gap || gaps != 1 {
		t.Errorf("the gap is not the 4th sample alone: %+v", u.Samples)
	}
	// The first three cover 30 s (the last until the gap, a sampling
	// period after it), the last from now: 2 GPUs x 30 s.
	if want := 2 * 30.0 / 3600; u.AllocatedGPUh < want*0.999 || u.AllocatedGPUh > want*1.001 {
		t.Errorf("allocated %.6f GPU-h, want %.6f (2 GPUs for 30 s)", u.AllocatedGPUh, want)
	}
}

// TestSampleFile: samples come back from or after a time, the old ones are
// forgotten (the file rewritten once they are as many as the kept ones), a
// last line cut short is dropped, and a damaged line is an error naming
// the file and line.
func TestSampleFile(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "history")
	f, err := OpenSampleFile(path)
	if err != nil {
		t.Fatal(err)
	}
	at := func(s int) time.Time { return time.Unix(1.7e9+int64(s), 0).UTC() }
	line := func(s int) []byte {
		return []byte(`{"time":"` + at(s).Format(time.RFC3339) + `","up":` + strconv.Itoa(s) + `}`)
	}
	for s := 0; s < 6; s++ {
		if err := f.SaveSample(at(s), line(s), at(0)); err != nil {
			t.Fatal(err)
		}
	}
	got, err := f.LoadSamples(at(4))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || string(got[0]) != string(line(4)) || string(got[1]) != string(line(5)) {
		t.Errorf("samples from 4: %q", got)
	}
	// Forget those before 3: three to forget, four to keep (with 6): the
	// file stays; then before 4: four and three, rewritten.
	if err := f.SaveSample(at(6), line(6), at(3)); err != nil {
		t.Fatal(err)
	}
	if data, err := os.ReadFile(path); err != nil || strings.Count(string(data), "\n") != 7 {
		t.Errorf("with fewer samples to forget than to keep the file holds %d lines, want all 7 (%v)", strings.Count(string(data), "\n"), err)
	}
	if err := f.SaveSample(at(7), line(7), at(4)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), "\n"); n != 4 || !strings.HasPrefix(string(data), string(line(4))) {
		t.Errorf("after forgetting the samples before 4 the file holds %d lines, want 4 to 7:\n%s", n, data)
	}
	if err := f.SaveSample(at(5), line(5), at(4)); err == nil {
		t.Error("a sample older than the last was saved")
	}

	// A process that died writing a line: reopened, it is gone, and the
	// file goes on.
	if err := os.WriteFile(path, append(data, line(8)[:10]...), 0o600); err != nil {
		t.Fatal(err)
	}
	f, err = OpenSampleFile(path)
	if err != nil {
		t.Fatalf("a last line cut short: %v", err)
	}
	if err := f.SaveSample(at(9), line(9), at(4)); err != nil {
		t.Fatal(err)
	}
	got, err = f.LoadSamples(at(0))
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 5 || string(got[4]) != string(line(9)) {
		t.Errorf("after a cut line and a new sample: %q", got)
	}

	// A damaged line in the middle is an error naming it.
	data, _ = os.ReadFile(path)
	lines := strings.SplitAfter(string(data), "\n")
	lines[1] = "{not json\n"
	if err := os.WriteFile(path, []byte(strings.Join(lines, "")), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := OpenSampleFile(path); err == nil || !strings.Contains(err.Error(), path+":2:") {
		t.Errorf("a damaged second line: %v, want an error naming %s:2", err, path)
	}
	// A directory that does not exist is an error, not created.
	if _, err := OpenSampleFile(filepath.Join(dir, "no", "such")); err == nil {
		t.Error("a history in a missing directory opened")
	}
}

// FuzzOpenSampleFile: whatever the file holds, opening it gives samples or
// an error, never a panic, and what it opens loads.
func FuzzOpenSampleFile(f *testing.F) {
	f.Add([]byte("{\"time\":\"2026-01-01T00:00:00Z\",\"up\":4}\n"))
	f.Add([]byte("{\"time\":\"2026-01-01T00:00:00Z\"}\n{\"time\":\"2025-01-01T00:00:00Z\"}\n"))
	f.Add([]byte("{\"time\":\"2026-01-01T00:00:00Z\"}\n{\"ti"))
	f.Add([]byte("\n\n{}"))
	f.Fuzz(func(t *testing.T, data []byte) {
		path := filepath.Join(t.TempDir(), "history")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		sf, err := OpenSampleFile(path)
		if err != nil {
			return
		}
		var from time.Time // the oldest (the zero time is year 1, not the first)
		if len(sf.times) > 0 {
			from = sf.times[0]
		}
		got, err := sf.LoadSamples(from)
		if err != nil {
			t.Fatalf("opened but does not load: %v", err)
		}
		if len(got) != len(sf.times) {
			t.Fatalf("opened %d samples, loads %d", len(sf.times), len(got))
		}
	})
}
