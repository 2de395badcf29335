package trace

import (
	"testing"
	"unsafe"

	"github.com/tide-sched/tide/job"
)

// TestUnitIsNotTheCell: a job's unit is the package's constant, not a
// substring of its CSV line, which would keep the whole line in memory for
// as long as the job lives (about 60 bytes a job: 200 MB on a Helios-sized
// trace).
func TestUnitIsNotTheCell(t *testing.T) {
	units := []job.Unit{job.Iterations, job.Samples, job.Epochs, job.Seconds}
	in := "id,submit,gpus,work,unit\n"
	for i, u := range units {
		in += string(rune('a'+i)) + ",0,1,5," + string(u) + "\n"
	}
	got := mustRead(t, TideCSV, in, Options{})
	for i, j := range got {
		if j.Unit != units[i] {
			t.Fatalf("job %s: unit %q, want %q", j.ID, j.Unit, units[i])
		}
		if unsafe.StringData(string(j.Unit)) != unsafe.StringData(string(units[i])) {
			t.Errorf("job %s: unit %q points into the CSV line, not at job.%s", j.ID, j.Unit, units[i])
		}
	}
}
