package trace

import (
	"bytes"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
)

// smallTrace is three jobs over 100 s.
func smallTrace() []*job.Job {
	mk := func(id string, submit float64, gpus int, tenant string) *job.Job {
		j := &job.Job{ID: id, Submit: submit, GPUs: gpus, Tenant: tenant, Work: 50 + submit, Unit: job.Seconds, Duration: 50 + submit}
		if err := j.Validate(); err != nil {
			panic(err)
		}
		return j
	}
	return []*job.Job{mk("a", 0, 1, "vc1"), mk("b", 40, 2, "vc, two"), mk("c", 100, 4, "")}
}

func TestTile(t *testing.T) {
	in := smallTrace()
	out, err := Tile(in, TileOptions{Copies: 5, Overlap: 2, Seed: 7})
	if err != nil {
		t.Fatal(err)
	}
	if len(out) != 15 {
		t.Fatalf("%d jobs, want 15", len(out))
	}
	ids := map[string]bool{}
	shift := map[string]float64{} // copy prefix -> shift
	for i, j := range out {
		if ids[j.ID] {
			t.Fatalf("id %s twice", j.ID)
		}
		ids[j.ID] = true
		if i > 0 && j.Submit < out[i-1].Submit {
			t.Fatalf("job %d (%s) submitted before job %d", i, j.ID, i-1)
		}
		k, orig, ok := strings.Cut(j.ID, "/")
		if !ok {
			t.Fatalf("id %s: want COPY/ID", j.ID)
		}
		var src *job.Job
		for _, s := range in {
			if s.ID == orig {
				src = s
			}
		}
		if src == nil || src.GPUs != j.GPUs || src.Work != j.Work || src.Tenant != j.Tenant {
			t.Fatalf("job %s does not copy %s", j.ID, orig)
		}
		d := j.Submit - src.Submit
		if s, seen := shift[k]; seen && s != d {
			t.Fatalf("copy %s shifted by %v and %v", k, s, d)
		}
		shift[k] = d
	}
	// Copy k starts in [k, k+1) x span/overlap = [50k, 50k+50), whole seconds.
	for k, s := range shift {
		n := int(k[0] - '0')
		if s < float64(50*n) || s >= float64(50*n+50) || s != float64(int(s)) {
			t.Errorf("copy %s shifted by %v, want a whole second in [%d, %d)", k, s, 50*n, 50*n+50)
		}
	}
	again, _ := Tile(in, TileOptions{Copies: 5, Overlap: 2, Seed: 7})
	other, _ := Tile(in, TileOptions{Copies: 5, Overlap: 2, Seed: 8})
	same, differs := true, false
	for i := range out {
		same = same && *again[i] == *out[i]
		differs = differs || other[i].Submit != out[i].Submit
	}
	if !same {
		t.Error("the same seed gave another trace")
	}
	if !differs {
		t.Error("another seed gave the same shifts")
	}
}

func TestTileRefuses(t *testing.T) {
	for _, o := range []TileOptions{{Copies: 0, Overlap: 1}, {Copies: 2, Overlap: 0}} {
		if _, err := Tile(smallTrace(), o); err == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if _, err := Tile(nil, TileOptions{Copies: 1, Overlap: 1}); err == nil {
		t.Error("empty trace: no error")
	}
}

// TestWriteCSVRoundTrip writes a tiled trace and reads it back as tide-csv.
func TestWriteCSVRoundTrip(t *testing.T) {
	jobs, err := Tile(smallTrace(), TileOptions{Copies: 3, Overlap: 1, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	jobs[0].Deadline = jobs[0].Submit + 1e6 + 0.1
	jobs[1].Priority = -2
	jobs[2].Model, jobs[2].GPUType, jobs[2].CPUs = `res"net`, "v100", 3.5
	var b bytes.Buffer
	if err := WriteCSV(&b, jobs); err != nil {
		t.Fatal(err)
	}
	tr, err := Read(&b, "tiled.csv", "", Options{})
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != TideCSV || len(tr.Jobs) != len(jobs) {
		t.Fatalf("read back %d jobs as %s, want %d as tide-csv", len(tr.Jobs), tr.Format, len(jobs))
	}
	for i, j := range tr.Jobs {
		if *j != *jobs[i] {
			t.Errorf("job %d: read back %+v, wrote %+v", i, *j, *jobs[i])
		}
	}
}

// FuzzTile tiles whatever tide-csv trace the fuzzer reads, with the copies,
// overlap and seed it picks, and checks Tile's contract: an error for no
// jobs or a count below 1, else copies x jobs valid jobs with unique IDs,
// in submit order, each copy shifted by one whole number of seconds in its
// slot, the same bytes again for the same inputs, and a CSV that reads
// back to the same jobs.
func FuzzTile(f *testing.F) {
	for _, s := range fuzzSeeds[TideCSV] {
		f.Add([]byte(s), 3, 2, uint64(1))
	}
	f.Add([]byte("id,submit,gpus,duration\na,0,1,60\nb,0,2,30\nc,7200,1,5\n"), 4, 1, uint64(9))
	f.Fuzz(func(t *testing.T, data []byte, copies, overlap int, seed uint64) {
		tr, err := Read(bytes.NewReader(data), "fuzz", TideCSV, Options{Sort: true, SkipBad: true})
		if err != nil {
			return // the reader's own fuzz test covers its errors
		}
		copies, overlap = copies%50, overlap%50 // keep each case small; negatives stay negative
		opt := TileOptions{Copies: copies, Overlap: overlap, Seed: seed}
		out, err := Tile(tr.Jobs, opt)
		if copies < 1 || overlap < 1 {
			if err == nil {
				t.Fatalf("%+v: no error", opt)
			}
			return
		}
		if err != nil {
			t.Fatalf("%+v: %v", opt, err)
		}
		if len(out) != copies*len(tr.Jobs) {
			t.Fatalf("%d jobs, want %d x %d", len(out), copies, len(tr.Jobs))
		}
		first, last := tr.Jobs[0].Submit, tr.Jobs[0].Submit
		for _, j := range tr.Jobs {
			first, last = min(first, j.Submit), max(last, j.Submit)
		}
		stride := max(last-first, 1) / float64(overlap)
		byID := map[string]*job.Job{}
		for _, j := range tr.Jobs {
			byID[j.ID] = j
		}
		seen := map[string]bool{}
		for i, j := range out {
			if err := j.Validate(); err != nil {
				t.Fatalf("job %d: %v", i, err)
			}
			if seen[j.ID] {
				t.Fatalf("id %q twice", j.ID)
			}
			seen[j.ID] = true
			if i > 0 && j.Submit < out[i-1].Submit {
				t.Fatalf("job %d submitted before job %d", i, i-1)
			}
			ks, orig, _ := strings.Cut(j.ID, "/")
			k, err := strconv.Atoi(ks)
			src := byID[orig]
			if err != nil || src == nil {
				t.Fatalf("id %q: want COPY/ID of an input job", j.ID)
			}
			shift := j.Submit - src.Submit
			// floor((k+u) x stride) for u in [0, 1), up to rounding.
			if shift != math.Floor(shift) || shift < math.Floor(float64(k)*stride)-1 || shift > float64(k+1)*stride {
				t.Fatalf("job %s shifted by %v, want a whole second in copy %d's slot of %v s", j.ID, shift, k, stride)
			}
		}
		again, _ := Tile(tr.Jobs, opt)
		var a, b bytes.Buffer
		if err := WriteCSV(&a, out); err != nil {
			t.Fatal(err)
		}
		if err := WriteCSV(&b, again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(a.Bytes(), b.Bytes()) {
			t.Fatal("the same inputs gave another trace")
		}
		back, err := Read(&a, "tiled.csv", "", Options{})
		if err != nil {
			t.Fatalf("reading the tiled trace back: %v", err)
		}
		if len(back.Jobs) != len(out) {
			t.Fatalf("read back %d jobs, wrote %d", len(back.Jobs), len(out))
		}
		for i, j := range back.Jobs {
			if *j != *out[i] {
				t.Fatalf("job %d: read back %+v, wrote %+v", i, *j, *out[i])
			}
		}
	})
}
