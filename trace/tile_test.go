package trace

import (
	"bytes"
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
