package trace

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"reflect"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/job"
)

// maxLine bounds the length of one line of a line-oriented trace.
const maxLine = 16 << 20

// eachLine calls fn for every non-blank line of r (without its line ending)
// with its 1-based number; fn's error stops the scan.
func (p *parser) eachLine(r io.Reader, fn func(line []byte, n int) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	n, content := 0, 0
	for sc.Scan() {
		n++
		p.lastLine = n
		l := bytes.TrimSuffix(sc.Bytes(), []byte("\r"))
		if n == 1 {
			l = bytes.TrimPrefix(l, []byte("\ufeff"))
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		content++
		if err := fn(l, n); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		msg := err.Error()
		if errors.Is(err, bufio.ErrTooLong) {
			msg = fmt.Sprintf("line longer than %d bytes", maxLine)
		}
		return &ParseError{File: p.name, Line: n + 1, Msg: msg}
	}
	if content == 0 {
		return &ParseError{File: p.name, Line: 1, Msg: "empty file"}
	}
	return nil
}

// gavelLayout names the columns of one Gavel trace layout.
type gavelLayout struct {
	names                                   []string
	jobType, steps, scale, weight, slo, arr int // indexes; -1 when absent
}

// Gavel layouts by column count: the 10-column one of Gavel's current
// scheduler/utils.py (with working_directory), the 9-column one before
// working_directory was added, and the 7-column one of the msr_seed0 traces.
var gavelLayouts = map[int]gavelLayout{
	10: {names: []string{"job_type", "command", "working_directory", "num_steps_arg", "needs_data_dir",
		"total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time"},
		jobType: 0, steps: 5, scale: 6, weight: 7, slo: 8, arr: 9},
	9: {names: []string{"job_type", "command", "num_steps_arg", "needs_data_dir",
		"total_steps", "scale_factor", "priority_weight", "SLO", "arrival_time"},
		jobType: 0, steps: 4, scale: 5, weight: 6, slo: 7, arr: 8},
	7: {names: []string{"job_type", "command", "num_steps_arg", "needs_data_dir",
		"total_steps", "arrival_time", "scale_factor"},
		jobType: 0, steps: 4, scale: 6, weight: -1, slo: -1, arr: 5},
}

// readGavel reads a Gavel trace: tab-separated, no header, the layout chosen
// by the column count of the first line. IDs are the 0-based row index.
func (p *parser) readGavel(r io.Reader) error {
	var (
		layout              *gavelLayout
		cols                int
		index               int
		fracWeight, withSLO int
		fields              []string
	)
	err := p.eachLine(r, func(l []byte, n int) error {
		fields = fields[:0]
		for f := range strings.SplitSeq(string(l), "\t") {
			fields = append(fields, strings.TrimSpace(f))
		}
		if layout == nil {
			lay, ok := gavelLayouts[len(fields)]
			if !ok {
				return &ParseError{File: p.name, Line: n, Msg: fmt.Sprintf(
					"want 7, 9 or 10 tab-separated columns (Gavel trace), got %d", len(fields))}
			}
			layout, cols = &lay, len(fields)
		}
		id := strconv.Itoa(index)
		index++
		if len(fields) != cols {
			return p.bad(&ParseError{File: p.name, Line: n, Msg: fmt.Sprintf(
				"row has %d tab-separated columns, the first row has %d", len(fields), cols)})
		}
		j := p.job()
		fail := func(col int, msg string) error {
			return p.bad(&ParseError{File: p.name, Line: n, Field: layout.names[col], Msg: msg})
		}
		j.ID = id
		if j.Model = p.str(fields[layout.jobType]); j.Model == "" {
			return fail(layout.jobType, "missing value")
		}
		var msg string
		if j.Work, msg = parseNum(fields[layout.steps]); msg != "" || j.Work <= 0 {
			if msg == "" {
				msg = fmt.Sprintf("want a number > 0, got %s", fields[layout.steps])
			}
			return fail(layout.steps, msg)
		}
		j.Unit = job.Iterations
		if j.GPUs, msg = parseInt(fields[layout.scale], 1); msg != "" {
			return fail(layout.scale, msg)
		}
		if j.Submit, msg = parseNum(fields[layout.arr]); msg != "" {
			return fail(layout.arr, msg)
		}
		if layout.weight >= 0 {
			w, msg := parseNum(fields[layout.weight])
			if msg != "" {
				return fail(layout.weight, msg)
			}
			if w == math.Trunc(w) && w <= maxInt {
				j.Priority = int(w)
			} else {
				fracWeight++
			}
		}
		if layout.slo >= 0 {
			s, err := strconv.ParseFloat(fields[layout.slo], 64)
			if err != nil || math.IsNaN(s) || math.IsInf(s, 0) {
				return fail(layout.slo, fmt.Sprintf("bad number %q: want a finite number (<= 0 means no SLO)", fields[layout.slo]))
			}
			if s > 0 {
				withSLO++
			}
		}
		return p.add(j, n)
	})
	if err != nil {
		return err
	}
	if fracWeight > 0 {
		p.warn(fmt.Sprintf("trace %s: %d jobs have a non-integer priority_weight; their priority is left 0", p.name, fracWeight))
	}
	if withSLO > 0 {
		p.warn(fmt.Sprintf("trace %s: %d jobs have an SLO (a multiple of their isolated duration, which the trace does not carry); no deadline is set", p.name, withSLO))
	}
	return nil
}

// jsonJob is one line of tide-jsonl. Pointers tell missing keys from zeros.
type jsonJob struct {
	ID        *string  `json:"id"`
	Submit    *float64 `json:"submit"`
	Tenant    string   `json:"tenant"`
	Priority  int      `json:"priority"`
	GPUs      *int     `json:"gpus"`
	MinGPUs   int      `json:"min_gpus"`
	MaxGPUs   int      `json:"max_gpus"`
	GPUType   string   `json:"gpu_type"`
	Model     string   `json:"model"`
	BatchSize int      `json:"batch_size"`
	Work      *float64 `json:"work"`
	Unit      string   `json:"unit"`
	Deadline  float64  `json:"deadline"`
	Duration  float64  `json:"duration"`
	CPUs      float64  `json:"cpus"`
	MemGiB    float64  `json:"mem_gib"`
	Share     float64  `json:"gpu_share"`
	GPUMemGiB float64  `json:"gpu_mem_gib"`
	MIG       string   `json:"mig"`
}

// jsonWant says in words what a JSON value must be to decode into kind k.
func jsonWant(k reflect.Kind) string {
	switch k {
	case reflect.Int:
		return "an integer"
	case reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	}
	return k.String()
}

// readJSONL reads tide-jsonl: one JSON object per line, keys as the columns
// of tide-csv; unknown keys are errors.
func (p *parser) readJSONL(r io.Reader) error {
	p.idCol = "id"
	return p.eachLine(r, func(l []byte, n int) error {
		fail := func(field, format string, args ...any) error {
			return p.bad(&ParseError{File: p.name, Line: n, Field: field, Msg: fmt.Sprintf(format, args...)})
		}
		var v jsonJob
		dec := json.NewDecoder(bytes.NewReader(l))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&v); err != nil {
			var te *json.UnmarshalTypeError
			var se *json.SyntaxError
			switch {
			case errors.As(err, &te) && te.Field == "":
				return fail("", "want a JSON object, got %s", te.Value)
			case errors.As(err, &te):
				return fail(te.Field, "want %s, got JSON %s", jsonWant(te.Type.Kind()), te.Value)
			case errors.As(err, &se):
				return fail("", "bad JSON at byte %d: %v", se.Offset, err)
			}
			if k, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
				k, _ = strconv.Unquote(k)
				return fail(k, "unknown key %q; known keys: %s", k, strings.Join(tideColumns, ", "))
			}
			return fail("", "bad JSON: %v", err)
		}
		var extra json.RawMessage
		if err := dec.Decode(&extra); err != io.EOF {
			return fail("", "want one JSON object per line, found more after it")
		}
		j := p.job()
		switch {
		case v.ID == nil || *v.ID == "":
			return fail("id", "missing")
		case v.Submit == nil:
			return fail("submit", "missing")
		case *v.Submit < 0:
			return fail("submit", "negative number %v: want a number >= 0", *v.Submit)
		case v.GPUs == nil:
			return fail("gpus", "missing")
		case *v.GPUs < 1:
			return fail("gpus", "want an integer >= 1, got %d", *v.GPUs)
		case v.MinGPUs < 0:
			return fail("min_gpus", "want an integer >= 0, got %d", v.MinGPUs)
		case v.MaxGPUs < 0:
			return fail("max_gpus", "want an integer >= 0, got %d", v.MaxGPUs)
		case v.BatchSize < 0:
			return fail("batch_size", "want an integer >= 0, got %d", v.BatchSize)
		case v.Work != nil && *v.Work <= 0:
			return fail("work", "want a number > 0, got %v", *v.Work)
		case v.Deadline < 0:
			return fail("deadline", "negative number %v: want a number >= 0", v.Deadline)
		case v.Duration < 0:
			return fail("duration", "negative number %v: want a number >= 0", v.Duration)
		case v.CPUs < 0:
			return fail("cpus", "negative number %v: want a number >= 0", v.CPUs)
		case v.MemGiB < 0:
			return fail("mem_gib", "negative number %v: want a number >= 0", v.MemGiB)
		}
		*j = job.Job{
			ID: p.str(*v.ID), Submit: *v.Submit, Tenant: p.str(v.Tenant), Priority: v.Priority,
			GPUs: *v.GPUs, MinGPUs: v.MinGPUs, MaxGPUs: v.MaxGPUs, GPUType: p.str(v.GPUType),
			Model: p.str(v.Model), BatchSize: v.BatchSize,
			Deadline: v.Deadline, Duration: v.Duration, CPUs: v.CPUs, MemGiB: v.MemGiB,
			Share: v.Share, GPUMemGiB: v.GPUMemGiB, MIG: p.str(v.MIG),
		}
		if v.Work != nil {
			j.Work = *v.Work
		}
		if field, msg := tideCheck(j, v.Work != nil, v.Unit); msg != "" {
			return fail(field, "%s", msg)
		}
		return p.add(j, n)
	})
}
