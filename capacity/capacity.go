// Package capacity describes how much of each site of a cluster is
// available to training over time: an availability file, or a generated
// diurnal pattern, and node faults.
//
// Two measures exist. For a site of servers that come and go (an edge site
// whose servers are idle only part of the day), Available is the number of
// servers training may use. For an inference pool, Inference is the number
// of GPUs inference needs: training may use the rest. Inference always
// wins: a simulator that applies a drop in capacity reclaims GPUs from the
// jobs holding them.
package capacity

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"strconv"
	"strings"
)

// Change is one step of a site's capacity. Exactly one of Available and
// Inference is >= 0; the other is -1.
type Change struct {
	T         float64 // time, s from the start of the trace
	Site      string
	Available int // servers of Site available to training, or -1
	Inference int // GPUs of Site needed by inference, or -1
	// Source and Line say where the change was read ("" and 0 when it was
	// generated), for errors found later (an unknown site).
	Source string
	Line   int
}

// Error is a bad line or field of an availability file.
type Error struct {
	File  string
	Line  int
	Field string // column name, "" for the whole line
	Err   error
}

func (e *Error) Error() string {
	s := "availability " + e.File
	if e.Line > 0 {
		s += fmt.Sprintf(" line %d", e.Line)
	}
	if e.Field != "" {
		s += fmt.Sprintf(" field %q", e.Field)
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// MaxValue bounds a count in a file, so a typo is an error rather than an
// absurd cluster.
const MaxValue = 1 << 22

// ReadFile reads an availability file (see Parse).
func ReadFile(path string) ([]Change, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("availability: %w", err)
	}
	defer f.Close()
	return Parse(f, path)
}

// Parse reads an availability file: CSV with a header naming the columns
// time and site and at least one of available and inference, in any order;
// then one row per change. time is seconds (>= 0, not decreasing from row to
// row); site a site name; available a count of servers; inference a count of
// GPUs. Each row gives exactly one of available and inference. Blank lines
// and lines starting with # are ignored. name names the input in errors.
func Parse(r io.Reader, name string) ([]Change, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 1<<20)
	line := 0
	var cols []string
	idx := map[string]int{}
	var out []Change
	last := 0.0
	for sc.Scan() {
		line++
		text := strings.TrimSpace(strings.TrimPrefix(sc.Text(), "\ufeff"))
		if text == "" || strings.HasPrefix(text, "#") {
			continue
		}
		fields := strings.Split(text, ",")
		for i := range fields {
			fields[i] = strings.TrimSpace(fields[i])
		}
		if cols == nil {
			cols = fields
			for i, c := range cols {
				switch c {
				case "time", "site", "available", "inference":
				default:
					return nil, &Error{File: name, Line: line, Field: c, Err: errors.New("unknown column: want time, site, available, inference")}
				}
				if _, dup := idx[c]; dup {
					return nil, &Error{File: name, Line: line, Field: c, Err: errors.New("column given twice")}
				}
				idx[c] = i
			}
			_, hasT := idx["time"]
			_, hasS := idx["site"]
			_, hasA := idx["available"]
			_, hasI := idx["inference"]
			if !hasT || !hasS || (!hasA && !hasI) {
				return nil, &Error{File: name, Line: line, Err: errors.New("header must name time, site and available and/or inference")}
			}
			continue
		}
		if len(fields) != len(cols) {
			return nil, &Error{File: name, Line: line, Err: fmt.Errorf("%d fields, the header has %d", len(fields), len(cols))}
		}
		get := func(c string) (string, bool) {
			i, ok := idx[c]
			if !ok {
				return "", false
			}
			return fields[i], fields[i] != ""
		}
		ch := Change{Available: -1, Inference: -1, Source: name, Line: line}
		ts, _ := get("time")
		t, err := strconv.ParseFloat(ts, 64)
		if err != nil || math.IsNaN(t) || math.IsInf(t, 0) || t < 0 {
			return nil, &Error{File: name, Line: line, Field: "time", Err: fmt.Errorf("%q: want seconds >= 0", ts)}
		}
		if t < last {
			return nil, &Error{File: name, Line: line, Field: "time", Err: fmt.Errorf("%v is before the previous row's %v: rows must be in time order", t, last)}
		}
		last, ch.T = t, t
		site, ok := get("site")
		if !ok {
			return nil, &Error{File: name, Line: line, Field: "site", Err: errors.New("missing")}
		}
		ch.Site = site
		av, hasA := get("available")
		inf, hasI := get("inference")
		switch {
		case hasA == hasI:
			return nil, &Error{File: name, Line: line, Err: errors.New("give exactly one of available and inference")}
		case hasA:
			if ch.Available, err = count(av); err != nil {
				return nil, &Error{File: name, Line: line, Field: "available", Err: err}
			}
		default:
			if ch.Inference, err = count(inf); err != nil {
				return nil, &Error{File: name, Line: line, Field: "inference", Err: err}
			}
		}
		out = append(out, ch)
	}
	if err := sc.Err(); err != nil {
		return nil, &Error{File: name, Line: line + 1, Err: err}
	}
	if cols == nil {
		return nil, &Error{File: name, Err: errors.New("empty file: want a header time,site,available|inference")}
	}
	return out, nil
}

func count(s string) (int, error) {
	n, err := strconv.Atoi(s)
	if err != nil || n < 0 || n > MaxValue {
		return 0, fmt.Errorf("%q: want an integer in [0, %d]", s, MaxValue)
	}
	return n, nil
}
