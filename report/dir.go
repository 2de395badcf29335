package report

import (
	"bufio"
	"encoding/csv"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteDir writes a report for runs into dir, creating it if needed:
//
//   - jobs-<policy>.csv per run: one row per JobRecord (see WriteJobsCSV);
//   - summary.json: WriteJSON of the runs' summaries;
//   - report.html: WriteHTML, one self-contained page.
//
// Zero fields of meta are filled from the first run (MetaOf). In file names
// a policy's characters other than ASCII letters, digits, '.', '_', '+' and
// '-' become '_'; runs whose names then clash get "-2", "-3", ... in run
// order. Existing files of those names are replaced.
func WriteDir(dir string, meta Meta, runs []*Run) error {
	for i, r := range runs {
		if r == nil {
			return fmt.Errorf("report: run %d is nil", i)
		}
	}
	meta = meta.fill(MetaOf(runs))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	for i, name := range csvNames(runs) {
		r := runs[i]
		if err := writeFile(filepath.Join(dir, name), func(w io.Writer) error { return WriteJobsCSV(w, r) }); err != nil {
			return err
		}
	}
	sums := SummarizeAll(runs)
	if err := writeFile(filepath.Join(dir, "summary.json"), func(w io.Writer) error { return WriteJSON(w, meta, sums) }); err != nil {
		return err
	}
	return writeFile(filepath.Join(dir, "report.html"), func(w io.Writer) error { return WriteHTML(w, meta, runs) })
}

// writeFile creates path and fills it with write, buffered.
func writeFile(path string, write func(io.Writer) error) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("report: %w", err)
	}
	bw := bufio.NewWriterSize(f, 1<<16)
	err = write(bw)
	if err == nil {
		err = bw.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("report: writing %s: %w", path, err)
	}
	return nil
}

// csvNames returns each run's CSV file name, unique within runs.
func csvNames(runs []*Run) []string {
	names := make([]string, len(runs))
	used := make(map[string]bool, len(runs)) // membership only
	for i, r := range runs {
		base := "jobs-" + fileSafe(r.Policy)
		name := base + ".csv"
		for k := 2; used[name]; k++ {
			name = base + "-" + strconv.Itoa(k) + ".csv"
		}
		used[name] = true
		names[i] = name
	}
	return names
}

// fileSafe maps s to a portable file-name fragment.
func fileSafe(s string) string {
	if s == "" {
		return "run"
	}
	return strings.Map(func(c rune) rune {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9',
			c == '.', c == '_', c == '+', c == '-':
			return c
		}
		return '_'
	}, s)
}

// jobsCSVHeader names the columns of WriteJobsCSV.
var jobsCSVHeader = []string{"index", "id", "tenant", "model", "gpus", "submit", "start", "finish",
	"deadline", "state", "preemptions", "restarts", "resizes", "gpu_seconds", "useful_gpu_seconds",
	"restart_seconds", "lower_bound", "jct", "queue", "counted", "reason", "queue_position", "predicted_start", "wait_seconds"}

// WriteJobsCSV writes r's jobs as CSV: a header, then one row per JobRecord
// in trace order with every field under its JSON name, plus the trace index,
// jct (finish - submit; empty if unfinished), queue (start - submit, the wait
// before the first start; empty if never started) and counted (1 when the job is inside the run's window, or
// there is none). Times are seconds; start and finish keep -1 for "never".
// reason, queue_position and predicted_start are the policy's last
// explanation for keeping the job waiting (JobRecord.Reason), empty when it
// gave none. wait_seconds, last, is the total time waiting
// (JobRecord.WaitSeconds).
func WriteJobsCSV(w io.Writer, r *Run) error {
	cw := csv.NewWriter(w)
	if err := cw.Write(jobsCSVHeader); err != nil {
		return err
	}
	lo, hi, _ := window(r)
	f := func(x float64) string { return strconv.FormatFloat(x, 'f', -1, 64) }
	row := make([]string, len(jobsCSVHeader))
	for i := range r.Jobs {
		j := &r.Jobs[i]
		jct, queue, counted := "", "", "0"
		if finished(j) {
			jct = f(j.Finish - j.Submit)
		}
		if started(j) {
			queue = f(j.Start - j.Submit)
		}
		if i >= lo && i < hi {
			counted = "1"
		}
		row = append(row[:0], strconv.Itoa(i), j.ID, j.Tenant, j.Model, strconv.Itoa(j.GPUs),
			f(j.Submit), f(j.Start), f(j.Finish), f(j.Deadline), j.State,
			strconv.Itoa(j.Preemptions), strconv.Itoa(j.Restarts), strconv.Itoa(j.Resizes),
			f(j.GPUSeconds), f(j.UsefulGPUSeconds), f(j.RestartSeconds), f(j.LowerBound),
			jct, queue, counted, j.Reason, optInt(j.QueuePosition), optFloat(j.PredictedStart),
			f(j.WaitSeconds))
		if err := cw.Write(row); err != nil {
			return err
		}
	}
	cw.Flush()
	return cw.Error()
}

// optInt and optFloat write 0 ("unknown") as an empty cell.
func optInt(n int) string {
	if n == 0 {
		return ""
	}
	return strconv.Itoa(n)
}

func optFloat(x float64) string {
	if x == 0 {
		return ""
	}
	return strconv.FormatFloat(x, 'f', -1, 64)
}
