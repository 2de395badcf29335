// Package trace reads job traces into []*job.Job.
//
// It understands the public traces tide is evaluated on (Pollux, Philly,
// Tiresias, ElasticFlow, Microsoft ITP, Chronus, Gavel) and tide's own CSV and
// JSON-lines formats. docs/trace-formats.md documents every format, how its
// columns map onto job.Job and the decisions taken where a trace is
// ambiguous (deadline semantics, priorities, rows without GPUs).
//
// Every reader follows the same rules:
//
//   - Jobs come back in file order, which must be submit order. Unsorted
//     submit times are an error unless Options.Sort asks for a stable sort.
//   - A bad row (missing or malformed value, negative or non-finite number,
//     zero GPUs or zero work, duplicate ID, deadline not after submit) is a
//     *ParseError naming the file, the 1-based line and the column. With
//     Options.SkipBad the row is skipped and the error reported through
//     Options.Warn instead. Errors in the file's structure (no header, a
//     missing column, CSV syntax, unsorted times) are always fatal.
//   - Every returned job has passed job.Validate.
//   - A file without any job is an error.
package trace

import (
	"bufio"
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tide-sched/tide/job"
)

// Format names.
const (
	Pollux      = "pollux"      // Pollux workloads: name,time,application,num_replicas,batch_size
	Philly      = "philly"      // Pollux's philly.csv: timestamp,duration,num_gpus,gpu_time,cluster
	Tiresias    = "tiresias"    // Tiresias: job_id,num_gpu,submit_time,iterations,model_name,duration,interval
	ElasticFlow = "elasticflow" // ElasticFlow: job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration
	ITP         = "itp"         // Microsoft ITP 2021 (elasticflow-traces): deadline/ and raw/ files
	Chronus     = "chronus"     // Chronus Philly traces with expect_time_list and job_type
	Gavel       = "gavel"       // Gavel tab-separated traces, 7, 9 or 10 columns, no header
	TideCSV     = "tide-csv"    // tide's CSV format (docs/trace-formats.md)
	TideJSONL   = "tide-jsonl"  // tide's JSON-lines format (docs/trace-formats.md)
)

// Formats lists the format names Read accepts, in the order Detect tries them.
var Formats = []string{Pollux, Philly, Tiresias, ElasticFlow, ITP, Chronus, Gavel, TideCSV, TideJSONL}

// Trace is a parsed trace.
type Trace struct {
	Name   string     // the name given to Read (the path for ReadFile)
	Format string     // the format it was read as
	Jobs   []*job.Job // in file order, which is submit order (or sorted, with Options.Sort)
}

// Options tune reading.
type Options struct {
	// Sort sorts jobs by submit time (stably) instead of failing on a file
	// whose submit times are not in order.
	Sort bool
	// SkipBad skips invalid rows, reporting each through Warn, instead of
	// failing on the first.
	SkipBad bool
	// Warn receives skipped rows (as ParseError text) and notes about data
	// the format cannot carry. It may be nil.
	Warn func(msg string)
}

// ParseError is an error at one place in a trace file.
type ParseError struct {
	File  string // name of the trace
	Line  int    // 1-based line; 0 when the error is not about one line
	Field string // column or key; "" when the error is about the whole row or file
	Msg   string
}

// Error formats e as "trace FILE line N field F: MSG", leaving out the parts
// that are not set.
func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("trace ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Field != "" {
		b.WriteString(" field ")
		b.WriteString(e.Field)
	}
	b.WriteString(": ")
	b.WriteString(e.Msg)
	return b.String()
}

// headSize is how much of a file Detect gets to look at.
const headSize = 64 << 10

// ReadFile reads the trace at path. An empty format means Detect.
func ReadFile(path, format string, opt Options) (*Trace, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("trace: %w", err) // the path is in err
	}
	defer f.Close()
	return Read(f, path, format, opt)
}

// Read reads a trace from r; name is used in errors and as Trace.Name (and
// by Detect, for its extension). An empty format means Detect.
func Read(r io.Reader, name, format string, opt Options) (*Trace, error) {
	br := bufio.NewReaderSize(r, headSize)
	if format == "" {
		head, err := br.Peek(headSize)
		if err != nil && err != io.EOF && !errors.Is(err, bufio.ErrBufferFull) {
			return nil, fmt.Errorf("trace %s: %w", name, err)
		}
		format, err = Detect(name, head)
		if err != nil {
			return nil, err
		}
	}
	p := &parser{name: name, opt: opt}
	var err error
	switch format {
	case Pollux:
		err = p.readCSV(br, polluxFormat)
	case Philly:
		err = p.readCSV(br, phillyFormat)
	case Tiresias:
		err = p.readCSV(br, tiresiasFormat)
	case ElasticFlow:
		err = p.readCSV(br, elasticFlowFormat)
	case ITP:
		err = p.readCSV(br, itpFormat)
	case Chronus:
		err = p.readCSV(br, chronusFormat)
	case TideCSV:
		err = p.readCSV(br, tideCSVFormat)
	case Gavel:
		err = p.readGavel(br)
	case TideJSONL:
		err = p.readJSONL(br)
	default:
		return nil, fmt.Errorf("trace %s: unknown format %q; want one of %s", name, format, strings.Join(Formats, ", "))
	}
	if err != nil {
		return nil, err
	}
	if err := p.finish(); err != nil {
		return nil, err
	}
	return &Trace{Name: name, Format: format, Jobs: p.jobs}, nil
}

// Detect guesses the format of a trace from its name's extension and the
// start of its content (its header line, or its first line where the format
// has no header). The error lists the formats.
func Detect(name string, head []byte) (string, error) {
	head = bytes.TrimPrefix(head, []byte("\ufeff"))
	line, lineNo := firstLine(head)
	ext := strings.ToLower(filepath.Ext(name))
	fail := func(why string) (string, error) {
		return "", &ParseError{File: name, Line: lineNo, Msg: fmt.Sprintf(
			"cannot detect the trace format: %s; name one of: %s", why, strings.Join(Formats, ", "))}
	}
	switch {
	case ext == ".jsonl" || ext == ".ndjson" || strings.HasPrefix(line, "{"):
		return TideJSONL, nil
	case ext == ".trace" || strings.Contains(line, "\t"):
		return Gavel, nil
	case line == "":
		return fail("the file is empty")
	}
	cols := map[string]bool{}
	for _, c := range strings.Split(line, ",") {
		cols[strings.ToLower(strings.Trim(strings.TrimSpace(c), `"`))] = true
	}
	has := func(names ...string) bool {
		for _, n := range names {
			if !cols[n] {
				return false
			}
		}
		return true
	}
	switch {
	case has("expect_time_list"):
		return Chronus, nil
	case has("ddl"):
		return ElasticFlow, nil
	case has("submission_time"):
		return ITP, nil
	case has("timestamp", "num_gpus", "cluster"):
		return Philly, nil
	case has("application", "num_replicas"):
		return Pollux, nil
	case has("job_id", "num_gpu", "submit_time", "duration"):
		return Tiresias, nil
	case has("id", "submit"):
		return TideCSV, nil
	}
	return fail(fmt.Sprintf("header %q matches no known format", truncate(line, 200)))
}

// firstLine returns the first non-blank line of head, trimmed, and its
// 1-based number.
func firstLine(head []byte) (string, int) {
	for n := 1; len(head) > 0; n++ {
		var l []byte
		l, head, _ = bytes.Cut(head, []byte("\n"))
		if s := strings.TrimSpace(string(l)); s != "" {
			return s, n
		}
	}
	return "", 1
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// parser accumulates the jobs of one trace.
type parser struct {
	name string
	opt  Options

	jobs  []*job.Job
	lines []int          // line of each job
	ids   map[string]int // job ID -> line
	idCol string         // the column holding IDs, for duplicate errors
	slab  []job.Job      // jobs are carved from slabs: one allocation per chunk

	lastLine int // line of the last row read
	skipped  int
	intern   map[string]string
	shift    bool   // Submit holds absolute times: rebase on the earliest (philly)
	buf      []byte // scratch space for building IDs
}

// job returns a zeroed job to fill. It becomes part of the trace only when
// added; otherwise the next call reuses it.
func (p *parser) job() *job.Job {
	if len(p.slab) == cap(p.slab) {
		n := 2 * cap(p.slab)
		n = max(256, min(n, 8192))
		p.slab = make([]job.Job, 0, n)
	}
	j := &p.slab[:len(p.slab)+1][len(p.slab)]
	*j = job.Job{}
	return j
}

// add checks j (validity, duplicate ID, submit order) and appends it. It
// returns a non-nil error only when reading must stop.
func (p *parser) add(j *job.Job, line int) error {
	if err := j.Validate(); err != nil {
		return p.bad(&ParseError{File: p.name, Line: line, Msg: err.Error()})
	}
	if p.ids == nil {
		p.ids = make(map[string]int)
	}
	if first, dup := p.ids[j.ID]; dup {
		return p.bad(&ParseError{File: p.name, Line: line, Field: p.idCol,
			Msg: fmt.Sprintf("duplicate id %q (first on line %d)", j.ID, first)})
	}
	if n := len(p.jobs); n > 0 && !p.opt.Sort && j.Submit < p.jobs[n-1].Submit {
		return &ParseError{File: p.name, Line: line, Msg: fmt.Sprintf(
			"submit times are not sorted: %v comes after %v on line %d; "+
				"sort the file, or pass --sort to sort jobs by submit time (sort: true in a scenario)",
			p.submitText(j.Submit), p.submitText(p.jobs[n-1].Submit), p.lines[n-1])}
	}
	p.ids[j.ID] = line
	p.slab = p.slab[:len(p.slab)+1]
	p.jobs = append(p.jobs, j)
	p.lines = append(p.lines, line)
	return nil
}

func (p *parser) submitText(s float64) string {
	if p.shift {
		return "time " + unixText(s)
	}
	return fmt.Sprintf("submit %v", s)
}

// bad reports a row error: fatal, or a warning with SkipBad.
func (p *parser) bad(e *ParseError) error {
	if !p.opt.SkipBad {
		return e
	}
	p.skipped++
	p.warn(e.Error() + " (row skipped)")
	return nil
}

func (p *parser) warn(msg string) {
	if p.opt.Warn != nil {
		p.opt.Warn(msg)
	}
}

// str returns s as a string that does not keep its input line alive,
// sharing repeated values (tenants, models).
func (p *parser) str(s string) string {
	if s == "" {
		return ""
	}
	if v, ok := p.intern[s]; ok {
		return v
	}
	v := strings.Clone(s)
	if p.intern == nil {
		p.intern = make(map[string]string)
	}
	if len(p.intern) < 4096 {
		p.intern[v] = v
	}
	return v
}

// finish rebases absolute times, sorts, and refuses empty traces.
func (p *parser) finish() error {
	if len(p.jobs) == 0 {
		msg := "no jobs in the file"
		if p.skipped > 0 {
			msg = fmt.Sprintf("no valid jobs: all %d rows were skipped", p.skipped)
		}
		return &ParseError{File: p.name, Line: p.lastLine + 1, Msg: msg}
	}
	if p.shift {
		t0 := p.jobs[0].Submit
		for _, j := range p.jobs {
			t0 = min(t0, j.Submit)
		}
		for _, j := range p.jobs {
			j.Submit -= t0
		}
	}
	if p.opt.Sort {
		slices.SortStableFunc(p.jobs, func(a, b *job.Job) int { return cmp.Compare(a.Submit, b.Submit) })
	}
	p.jobs = slices.Clip(p.jobs)
	return nil
}
