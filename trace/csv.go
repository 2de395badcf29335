package trace

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/job"
)

// csvFormat describes a CSV format with a header row. Columns are found by
// name, so their order is free.
type csvFormat struct {
	required []string
	optional []string
	// strict makes columns outside required and optional an error (tide's
	// own format); foreign formats ignore columns they do not use.
	strict bool
	// need adds columns required given the header (ITP: the deadline files).
	need func(h header) []string
	// id is the column holding job IDs ("" when IDs are generated).
	id string
	// shift marks Submit as absolute times to rebase on the earliest.
	shift bool
	// row fills j from one data row; index is the 0-based data row number.
	row func(p *parser, r *row, j *job.Job, index int)
}

// header holds the column names in file order. A linear scan over the few
// columns of a trace is cheaper than hashing for every field of every row.
type header []string

func (h header) has(name string) bool { return h.col(name) >= 0 }

// col is the index of name, or -1 when the header lacks it.
func (h header) col(name string) int {
	for i, c := range h {
		if c == name {
			return i
		}
	}
	return -1
}

// readCSV reads a CSV trace with format f.
func (p *parser) readCSV(r io.Reader, f csvFormat) error {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1
	cr.ReuseRecord = true
	p.idCol = f.id
	p.shift = f.shift

	rec, err := cr.Read()
	if err == io.EOF {
		return &ParseError{File: p.name, Line: 1, Msg: "empty file: want a header line"}
	}
	if err != nil {
		return p.csvError(err)
	}
	hline, _ := cr.FieldPos(0)
	p.lastLine = hline
	if len(rec) > maxColumns {
		return &ParseError{File: p.name, Line: hline, Msg: fmt.Sprintf("the header has %d columns; at most %d are supported", len(rec), maxColumns)}
	}
	names := make([]string, len(rec))
	for i, c := range rec {
		c = strings.TrimSpace(c)
		if i == 0 {
			c = strings.TrimPrefix(c, "\ufeff")
		}
		if header(names[:i]).has(c) {
			return &ParseError{File: p.name, Line: hline, Field: c, Msg: "column appears twice in the header"}
		}
		names[i] = c
	}
	h := header(names)
	seen := strings.Join(names, ",")
	required := f.required
	if f.need != nil {
		required = append(required[:len(required):len(required)], f.need(h)...)
	}
	for _, c := range required {
		if !h.has(c) {
			return &ParseError{File: p.name, Line: hline, Field: c,
				Msg: fmt.Sprintf("missing column %q; the header is %q; want columns %s", c, truncate(seen, 300), strings.Join(required, ","))}
		}
	}
	if f.strict {
		known := map[string]bool{}
		var list []string // required then optional, each once
		for _, c := range append(f.required[:len(f.required):len(f.required)], f.optional...) {
			if !known[c] {
				known[c] = true
				list = append(list, c)
			}
		}
		for _, c := range names {
			if !known[c] {
				return &ParseError{File: p.name, Line: hline, Field: c,
					Msg: fmt.Sprintf("unknown column %q; known columns: %s", c, strings.Join(list, ","))}
			}
		}
	}

	rw := &row{p: p, h: h}
	for index := 0; ; index++ {
		rec, err := cr.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return p.csvError(err)
		}
		line, _ := cr.FieldPos(0)
		p.lastLine = line
		if len(rec) != len(names) {
			e := &ParseError{File: p.name, Line: line, Msg: fmt.Sprintf("row has %d fields, the header has %d", len(rec), len(names))}
			if err := p.bad(e); err != nil {
				return err
			}
			continue
		}
		rw.rec, rw.line, rw.err = rec, line, nil
		j := p.job()
		f.row(p, rw, j, index)
		if rw.err != nil {
			if err := p.bad(rw.err); err != nil {
				return err
			}
			continue
		}
		if err := p.add(j, line); err != nil {
			return err
		}
	}
}

func (p *parser) csvError(err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: p.name, Line: pe.Line, Msg: "bad CSV: " + pe.Err.Error()}
	}
	return &ParseError{File: p.name, Line: p.lastLine + 1, Msg: err.Error()}
}

// row reads the values of one CSV row. The first error sticks: after it every
// accessor returns a zero value, so a row function reads its fields and
// checks r.err once.
type row struct {
	p    *parser
	h    header
	rec  []string
	line int
	err  *ParseError
}

func (r *row) fail(field, format string, args ...any) {
	if r.err == nil {
		r.err = &ParseError{File: r.p.name, Line: r.line, Field: field, Msg: fmt.Sprintf(format, args...)}
	}
}

// raw is the trimmed text of column name ("" when absent).
func (r *row) raw(name string) string {
	i := r.h.col(name)
	if i < 0 || r.err != nil {
		return ""
	}
	return strings.TrimSpace(r.rec[i])
}

// text is a required string value, interned.
func (r *row) text(name string) string {
	s := r.raw(name)
	if s == "" && r.err == nil {
		r.fail(name, "missing value")
	}
	return r.p.str(s)
}

// optText is an optional string value, interned.
func (r *row) optText(name string) string { return r.p.str(r.raw(name)) }

// num is a required finite number >= 0.
func (r *row) num(name string) float64 {
	s := r.raw(name)
	if r.err != nil {
		return 0
	}
	v, msg := parseNum(s)
	if msg != "" {
		r.fail(name, "%s", msg)
	}
	return v
}

// optNum is num, with an empty or absent value meaning 0.
func (r *row) optNum(name string) float64 {
	if r.raw(name) == "" {
		return 0
	}
	return r.num(name)
}

// pos is a required finite number > 0.
func (r *row) pos(name string) float64 {
	v := r.num(name)
	if r.err == nil && v <= 0 {
		r.fail(name, "want a number > 0, got %s", r.raw(name))
	}
	return v
}

// count is a required integer >= lo.
func (r *row) count(name string, lo int) int {
	s := r.raw(name)
	if r.err != nil {
		return 0
	}
	v, msg := parseInt(s, lo)
	if msg != "" {
		r.fail(name, "%s", msg)
	}
	return v
}

// optCount is count, with an empty or absent value meaning 0.
func (r *row) optCount(name string, lo int) int {
	if r.raw(name) == "" {
		return 0
	}
	return r.count(name, lo)
}

// deadline checks that an absolute deadline d from column name falls after
// submit.
func (r *row) deadline(name string, d, submit float64) float64 {
	if r.err == nil && d <= submit {
		r.fail(name, "deadline %v is not after the submit time %v", d, submit)
	}
	return d
}

// maxColumns bounds the width of a CSV trace.
const maxColumns = 1024

// maxInt bounds integer fields (GPU counts, batch sizes, priorities).
const maxInt = math.MaxInt32

// parseNum parses a finite number >= 0; msg says what is wrong otherwise.
func parseNum(s string) (v float64, msg string) {
	if s == "" {
		return 0, "missing value: want a number >= 0"
	}
	v, err := strconv.ParseFloat(s, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0, fmt.Sprintf("bad number %q: want a number >= 0", s)
	case math.IsNaN(v) || math.IsInf(v, 0):
		return 0, fmt.Sprintf("bad number %q: want a finite number >= 0", s)
	case v < 0:
		return 0, fmt.Sprintf("negative number %q: want a number >= 0", s)
	}
	return v, ""
}

// parseInt parses an integer in [lo, maxInt]. Integral decimals ("4.0", as
// pandas writes them) are accepted.
func parseInt(s string, lo int) (int, string) {
	want := func() string {
		return fmt.Sprintf("want an integer between %d and %d", lo, maxInt)
	}
	if s == "" {
		return 0, "missing value: " + want()
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil {
		f, ferr := strconv.ParseFloat(s, 64)
		if ferr != nil || f != math.Trunc(f) || math.IsInf(f, 0) {
			return 0, fmt.Sprintf("bad integer %q: %s", s, want())
		}
		if f < math.MinInt32 || f > maxInt {
			return 0, fmt.Sprintf("integer %q out of range: %s", s, want())
		}
		n = int64(f)
	}
	if n < int64(lo) || n > maxInt {
		return 0, fmt.Sprintf("integer %q out of range: %s", s, want())
	}
	return int(n), ""
}
