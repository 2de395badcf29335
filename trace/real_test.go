package trace

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
)

// dataDir is the shared folder of real traces, ../shared/data relative to
// the repository root; the test is skipped when it is absent.
func dataDir(t testing.TB) string { return enginetest.SharedData(t) }

// table is a trace file as the test reads it, independently of the package:
// split on the separator, no quoting (the shipped files have none).
type table struct {
	header []string   // nil for headerless formats
	rows   [][]string // data rows, blank lines dropped
	lines  []int      // 1-based line of each row
}

func readTable(t *testing.T, path, sep string, hasHeader bool) table {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if sep == "," && strings.Contains(string(b), `"`) {
		t.Fatalf("%s has quotes; the test's simple splitter cannot read it", path)
	}
	var tb table
	for i, l := range strings.Split(string(b), "\n") {
		l = strings.TrimRight(l, "\r")
		if strings.TrimSpace(l) == "" {
			continue
		}
		f := strings.Split(l, sep)
		if hasHeader && tb.header == nil {
			tb.header = f
			continue
		}
		tb.rows = append(tb.rows, f)
		tb.lines = append(tb.lines, i+1)
	}
	return tb
}

// col returns the value of column name in row r.
func (tb table) col(r []string, name string) string {
	for i, h := range tb.header {
		if h == name {
			return strings.TrimSpace(r[i])
		}
	}
	return ""
}

func num(t *testing.T, s string) float64 {
	t.Helper()
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		t.Fatalf("test cannot parse %q: %v", s, err)
	}
	return v
}

// realCase is a group of real files of one format.
type realCase struct {
	globs  []string
	format string
	files  int // number of files the globs must find
	opt    Options
	sep    string // "," (with header) or "\t" (gavel, no header)
	// bad reports rows the reader must skip (with SkipBad) or reject.
	bad func(tb table, r []string) bool
	// id is the ID the row's job must have; check compares its fields.
	id    func(tb table, r []string, index int) string
	check func(t *testing.T, tb table, r []string, j *job.Job)
}

func TestRealTraces(t *testing.T) {
	data := dataDir(t)
	eq := func(t *testing.T, what string, got, want float64) {
		t.Helper()
		if got != want {
			t.Errorf("%s = %v, want %v", what, got, want)
		}
	}
	col := func(name string) func(table, []string, int) string {
		return func(tb table, r []string, _ int) string { return tb.col(r, name) }
	}
	rowIndex := func(_ table, _ []string, i int) string { return strconv.Itoa(i) }
	cases := []realCase{
		{
			globs: []string{"pollux/workloads*/workload-*.csv"}, format: Pollux, files: 32, sep: ",",
			id: col("name"),
			check: func(t *testing.T, tb table, r []string, j *job.Job) {
				eq(t, "submit", j.Submit, num(t, tb.col(r, "time")))
				eq(t, "gpus", float64(j.GPUs), num(t, tb.col(r, "num_replicas")))
				eq(t, "max gpus", float64(j.MaxGPUs), float64(j.GPUs))
				eq(t, "min gpus", float64(j.MinGPUs), float64(j.GPUs))
				eq(t, "batch", float64(j.BatchSize), num(t, tb.col(r, "batch_size")))
				if j.Model != tb.col(r, "application") || j.Unit != job.Epochs || !(j.Work >= 2) {
					t.Errorf("job %+v", *j)
				}
			},
		},
		{
			globs: []string{"tiresias/60_job.csv"}, format: Tiresias, files: 1, sep: ",",
			id: col("job_id"),
			check: func(t *testing.T, tb table, r []string, j *job.Job) {
				eq(t, "submit", j.Submit, num(t, tb.col(r, "submit_time")))
				eq(t, "gpus", float64(j.GPUs), num(t, tb.col(r, "num_gpu")))
				eq(t, "work", j.Work, num(t, tb.col(r, "duration")))
				eq(t, "duration", j.Duration, j.Work)
				if j.Model != tb.col(r, "model_name") || j.Unit != job.Seconds {
					t.Errorf("job %+v", *j)
				}
			},
		},
		{
			// resnet_cifar_trace.csv is not in submit order (row 5).
			globs: []string{"elasticflow/traces_for_ElasticFlow/*.csv"}, format: ElasticFlow, files: 3, sep: ",",
			opt: Options{Sort: true},
			id:  col("job_id"),
			check: func(t *testing.T, tb table, r []string, j *job.Job) {
				eq(t, "submit", j.Submit, num(t, tb.col(r, "submit_time")))
				eq(t, "gpus", float64(j.GPUs), num(t, tb.col(r, "num_gpu")))
				eq(t, "work", j.Work, num(t, tb.col(r, "iteration")))
				eq(t, "duration", j.Duration, num(t, tb.col(r, "duration")))
				eq(t, "batch", float64(j.BatchSize), num(t, tb.col(r, "batch_size")))
				want := num(t, tb.col(r, "ddl"))
				if tb.col(r, "best_effort") == "1" {
					want = 0
				}
				eq(t, "deadline", j.Deadline, want)
				if j.Model != tb.col(r, "model_name") || j.Unit != job.Iterations {
					t.Errorf("job %+v", *j)
				}
			},
		},
		{
			globs: []string{"itp-2021/deadline/*.csv"}, format: ITP, files: 11, sep: ",",
			id: col("job_id"),
			check: func(t *testing.T, tb table, r []string, j *job.Job) {
				eq(t, "submit", j.Submit, num(t, tb.col(r, "submission_time")))
				eq(t, "gpus", float64(j.GPUs), num(t, tb.col(r, "num_gpu")))
				eq(t, "work", j.Work, num(t, tb.col(r, "num_iteration")))
				eq(t, "deadline", j.Deadline, num(t, tb.col(r, "deadline")))
				eq(t, "duration", j.Duration, num(t, tb.col(r, "duration")))
				eq(t, "batch", float64(j.BatchSize), num(t, tb.col(r, "batch_size")))
				if j.Model != tb.col(r, "model_name") || j.Unit != job.Iterations {
					t.Errorf("job %+v", *j)
				}
			},
		},
		{
			globs: []string{"itp-2021/raw/*.csv"}, format: ITP, files: 10, sep: ",",
			id: col("job_id"),
			check: func(t *testing.T, tb table, r []string, j *job.Job) {
				eq(t, "submit", j.Submit, num(t, tb.col(r, "submission_time")))
				eq(t, "gpus", float64(j.GPUs), num(t, tb.col(r, "num_gpu")))
				eq(t, "work", j.Work, num(t, tb.col(r, "duration")))
				if j.Unit != job.Seconds || j.Deadline != 0 || j.Model != "" {
					t.Errorf("job %+v", *j)
				}
			},
		},
		{
			// Unsorted, and with jobs asking for 0 GPUs (Chronus skips them too).
			globs: []string{"chronus/trace_job_Philly_*.csv"}, format: Chronus, files: 3, sep: ",",
			opt: Options{Sort: true, SkipBad: true},
			bad: func(tb table, r []string) bool { return tb.col(r, "num_gpu") == "0" },
			id:  col("job_id"),
			check: func(t *testing.T, tb table, r []string, j *job.Job) {
				submit := num(t, tb.col(r, "submit_time"))
				eq(t, "submit", j.Submit, submit)
				eq(t, "gpus", float64(j.GPUs), num(t, tb.col(r, "num_gpu")))
				eq(t, "work", j.Work, num(t, tb.col(r, "iterations")))
				eq(t, "duration", j.Duration, num(t, tb.col(r, "duration")))
				first, _, _ := strings.Cut(tb.col(r, "expect_time_list"), "-")
				switch tb.col(r, "job_type") {
				case "strict":
					eq(t, "priority", float64(j.Priority), 2)
					eq(t, "deadline", j.Deadline, submit+num(t, first))
				case "soft":
					eq(t, "priority", float64(j.Priority), 1)
					eq(t, "deadline", j.Deadline, submit+num(t, first))
				case "best":
					eq(t, "priority", float64(j.Priority), 0)
					eq(t, "deadline", j.Deadline, 0)
				default:
					t.Errorf("test does not know job_type %q", tb.col(r, "job_type"))
				}
				if j.Tenant != tb.col(r, "user") || j.Model != tb.col(r, "model_name") || j.Unit != job.Iterations {
					t.Errorf("job %+v", *j)
				}
			},
		},
		{
			globs:  []string{"gavel/*.trace", "gavel/*/*.trace"},
			format: Gavel, files: 26, sep: "\t",
			id: rowIndex,
			check: func(t *testing.T, tb table, r []string, j *job.Job) {
				var steps, scale, arrival string
				switch len(r) {
				case 10:
					steps, scale, arrival = r[5], r[6], r[9]
				case 7:
					steps, scale, arrival = r[4], r[6], r[5]
				default:
					t.Fatalf("test expects 7 or 10 columns, got %d", len(r))
				}
				eq(t, "submit", j.Submit, num(t, arrival))
				eq(t, "gpus", float64(j.GPUs), num(t, scale))
				eq(t, "work", j.Work, num(t, steps))
				if j.Model != r[0] || j.Unit != job.Iterations || j.Deadline != 0 {
					t.Errorf("job %+v", *j)
				}
			},
		},
	}
	for _, c := range cases {
		var files []string
		for _, g := range c.globs {
			m, err := filepath.Glob(filepath.Join(data, g))
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, m...)
		}
		if len(files) != c.files {
			t.Errorf("%v: found %d files, want %d", c.globs, len(files), c.files)
		}
		for _, path := range files {
			rel, _ := filepath.Rel(data, path)
			t.Run(rel, func(t *testing.T) {
				tb := readTable(t, path, c.sep, c.sep == ",")
				want := map[string][]string{} // id -> row
				var order []string
				nbad := 0
				for i, r := range tb.rows {
					if c.bad != nil && c.bad(tb, r) {
						nbad++
						continue
					}
					id := c.id(tb, r, i)
					want[id] = r
					order = append(order, id)
				}
				warns := 0
				opt := c.opt
				opt.Warn = func(string) { warns++ }
				tr, err := ReadFile(path, "", opt)
				if err != nil {
					t.Fatal(err)
				}
				if tr.Format != c.format {
					t.Errorf("detected %q, want %q", tr.Format, c.format)
				}
				if len(tr.Jobs) != len(tb.rows)-nbad {
					t.Errorf("%d jobs; the file has %d data rows, %d of them bad", len(tr.Jobs), len(tb.rows), nbad)
				}
				if warns != nbad {
					t.Errorf("%d warnings, want %d (one per bad row)", warns, nbad)
				}
				sane(t, tr.Jobs)
				for i, j := range tr.Jobs {
					r, ok := want[j.ID]
					if !ok {
						t.Fatalf("job %q is not in the file", j.ID)
					}
					if !c.opt.Sort && order[i] != j.ID {
						t.Fatalf("job %d is %q, want %q (file order)", i, j.ID, order[i])
					}
					c.check(t, tb, r, j)
					if t.Failed() {
						t.Fatalf("row %q", strings.Join(r, c.sep))
					}
				}
			})
		}
	}
}

// sane checks what must hold for any trace: valid jobs, unique IDs, submit
// order, deadlines after submission.
func sane(t *testing.T, jobs []*job.Job) {
	t.Helper()
	seen := map[string]bool{}
	for i, j := range jobs {
		if err := j.Validate(); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if seen[j.ID] {
			t.Fatalf("job %d: duplicate id %q", i, j.ID)
		}
		seen[j.ID] = true
		if i > 0 && j.Submit < jobs[i-1].Submit {
			t.Fatalf("job %d (%s): submit %v before the previous job's %v", i, j.ID, j.Submit, jobs[i-1].Submit)
		}
		if j.Deadline != 0 && j.Deadline <= j.Submit {
			t.Fatalf("job %d (%s): deadline %v not after submit %v", i, j.ID, j.Deadline, j.Submit)
		}
	}
}

func TestRealPhilly(t *testing.T) {
	path := filepath.Join(dataDir(t), "pollux", "philly.csv")
	tb := readTable(t, path, ",", true)
	if len(tb.rows) != 82247 {
		t.Errorf("philly.csv has %d rows; the data README says 82,247", len(tb.rows))
	}
	// Unsorted: the error points at the first row earlier than the one
	// before it (the timestamps compare as text).
	firstBad := 0
	for i := 1; i < len(tb.rows); i++ {
		if tb.col(tb.rows[i], "timestamp") < tb.col(tb.rows[i-1], "timestamp") {
			firstBad = tb.lines[i]
			break
		}
	}
	_, err := ReadFile(path, "", Options{})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != firstBad || !strings.Contains(pe.Msg, "--sort") {
		t.Fatalf("got %v; want an unsorted error on line %d that mentions --sort", err, firstBad)
	}

	start := time.Now()
	tr, err := ReadFile(path, "", Options{Sort: true})
	took := time.Since(start)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("read %d philly jobs in %v", len(tr.Jobs), took)
	if tr.Format != Philly || len(tr.Jobs) != len(tb.rows) {
		t.Fatalf("format %q, %d jobs; want philly, %d", tr.Format, len(tr.Jobs), len(tb.rows))
	}
	sane(t, tr.Jobs)
	var t0 time.Time
	stamps := make([]time.Time, len(tb.rows))
	for i, r := range tb.rows {
		ts, err := time.Parse(time.DateTime, tb.col(r, "timestamp"))
		if err != nil {
			t.Fatal(err)
		}
		stamps[i] = ts
		if i == 0 || ts.Before(t0) {
			t0 = ts
		}
	}
	for _, j := range tr.Jobs {
		i, err := strconv.Atoi(strings.TrimPrefix(j.ID, "philly-"))
		if err != nil || i < 0 || i >= len(tb.rows) {
			t.Fatalf("bad id %q", j.ID)
		}
		r := tb.rows[i]
		if j.Submit != stamps[i].Sub(t0).Seconds() || j.Duration != num(t, tb.col(r, "duration")) ||
			j.Work != j.Duration || j.Unit != job.Seconds || float64(j.GPUs) != num(t, tb.col(r, "num_gpus")) ||
			j.Tenant != tb.col(r, "cluster") {
			t.Fatalf("job %+v does not match row %q", *j, r)
		}
	}
	if tr.Jobs[0].Submit != 0 {
		t.Errorf("earliest submit %v, want 0", tr.Jobs[0].Submit)
	}
}

func TestRealTotals(t *testing.T) {
	data := dataDir(t)
	// The data README: ITP 69,351 jobs over 10 clusters; Chronus 30,940 jobs each.
	total := 0
	files, _ := filepath.Glob(filepath.Join(data, "itp-2021", "raw", "cluster*.csv"))
	for _, f := range files {
		tr, err := ReadFile(f, "", Options{})
		if err != nil {
			t.Fatal(err)
		}
		total += len(tr.Jobs)
	}
	if total != 69351 {
		t.Errorf("ITP raw: %d jobs in %d files, want 69,351", total, len(files))
	}
	files, _ = filepath.Glob(filepath.Join(data, "chronus", "trace_job_Philly_*.csv"))
	for _, f := range files {
		tb := readTable(t, f, ",", true)
		if len(tb.rows) != 30940 {
			t.Errorf("%s: %d rows, want 30,940", f, len(tb.rows))
		}
		// Without SkipBad the first 0-GPU row stops reading.
		first := 0
		for i, r := range tb.rows {
			if tb.col(r, "num_gpu") == "0" {
				first = tb.lines[i]
				break
			}
		}
		_, err := ReadFile(f, "", Options{Sort: true})
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != first || pe.Field != "num_gpu" {
			t.Errorf("%s: got %v, want a num_gpu error on line %d", f, err, first)
		}
	}
}

func TestRealTiresiasTFJob(t *testing.T) {
	// Tiresias's example tf_job.csv repeats its only job: a duplicate ID.
	path := filepath.Join(dataDir(t), "tiresias", "tf_job.csv")
	tb := readTable(t, path, ",", true)
	seen := map[string]int{}
	dup := 0
	for i, r := range tb.rows {
		id := tb.col(r, "job_id")
		if _, ok := seen[id]; ok && dup == 0 {
			dup = tb.lines[i]
		}
		seen[id] = i
	}
	_, err := ReadFile(path, "", Options{})
	var pe *ParseError
	if !errors.As(err, &pe) || pe.Line != dup || pe.Field != "job_id" {
		t.Fatalf("got %v, want a duplicate job_id on line %d", err, dup)
	}
	tr, err := ReadFile(path, "", Options{SkipBad: true})
	if err != nil || len(tr.Jobs) != len(seen) {
		t.Fatalf("SkipBad: %v, want %d jobs", err, len(seen))
	}
}

func BenchmarkReadPhilly(b *testing.B) {
	data, err := os.ReadFile(filepath.Join(dataDir(b), "pollux", "philly.csv"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Read(bytes.NewReader(data), "philly.csv", Philly, Options{Sort: true}); err != nil {
			b.Fatal(err)
		}
	}
}
