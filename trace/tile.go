package trace

import (
	"bufio"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"

	"github.com/tide-sched/tide/job"
)

// TileOptions say how Tile builds a larger trace from a smaller one.
type TileOptions struct {
	// Copies is how many copies of the trace to lay out (>= 1).
	Copies int
	// Overlap is how many copies run at once in steady state (>= 1): copy k
	// starts k x span/Overlap after the first, where span is the trace's
	// submission span, so the load is about Overlap times the original's.
	Overlap int
	// Seed draws each copy's extra shift, uniform in [0, span/Overlap) and
	// rounded down to whole seconds, so copies do not line up exactly.
	Seed uint64
}

// Tile lays copies of jobs (a trace in submit order) out in time, to build
// a trace of datacenter size from a published one: copy k is shifted by
// floor((k + u_k) x span/Overlap) seconds, u_k drawn from a PCG generator
// seeded with Seed, and its jobs are renamed "k/ID" (k from 0) so IDs stay
// unique. Everything else is kept, deadlines (and soft-deadline options)
// move with their jobs. The result is sorted by submit time, ties in (copy,
// original order). It is a pure function of its inputs.
func Tile(jobs []*job.Job, opt TileOptions) ([]*job.Job, error) {
	if len(jobs) == 0 {
		return nil, fmt.Errorf("tile: the trace has no jobs")
	}
	if opt.Copies < 1 {
		return nil, fmt.Errorf("tile: copies %d: want at least 1", opt.Copies)
	}
	if opt.Overlap < 1 {
		return nil, fmt.Errorf("tile: overlap %d: want at least 1", opt.Overlap)
	}
	first, last := jobs[0].Submit, jobs[0].Submit
	for _, j := range jobs {
		first, last = min(first, j.Submit), max(last, j.Submit)
	}
	span := max(last-first, 1)
	stride := span / float64(opt.Overlap)
	rng := rand.New(rand.NewPCG(opt.Seed, 0x7469646574696c65)) // "tidetile"
	out := make([]*job.Job, 0, len(jobs)*opt.Copies)
	slab := make([]job.Job, len(jobs)*opt.Copies)
	for k := 0; k < opt.Copies; k++ {
		shift := math.Floor((float64(k) + rng.Float64()) * stride)
		prefix := strconv.Itoa(k) + "/"
		for i, j := range jobs {
			c := &slab[k*len(jobs)+i]
			*c = *j
			c.ID = prefix + j.ID
			c.Submit = j.Submit + shift
			if c.Deadline > 0 {
				c.Deadline += shift
			}
			c.Utility = j.Utility.Moved(func(d float64) float64 { return d + shift })
			out = append(out, c)
		}
	}
	slices.SortStableFunc(out, func(a, b *job.Job) int {
		switch {
		case a.Submit < b.Submit:
			return -1
		case a.Submit > b.Submit:
			return 1
		}
		return 0
	})
	return out, nil
}

// WriteCSV writes jobs in tide's CSV format (docs/trace-formats.md), every
// number in its shortest exact form, so that reading the file back gives the
// same jobs. Soft-deadline options (Job.Utility) have no column and are
// refused.
func WriteCSV(w io.Writer, jobs []*job.Job) error {
	bw := bufio.NewWriterSize(w, 1<<16)
	for i, c := range tideColumns {
		if i > 0 {
			bw.WriteByte(',')
		}
		bw.WriteString(c)
	}
	bw.WriteByte('\n')
	var line []byte
	num := func(v float64) {
		line = append(line, ',')
		if v != 0 {
			line = strconv.AppendFloat(line, v, 'g', -1, 64)
		}
	}
	count := func(v int) {
		line = append(line, ',')
		if v != 0 {
			line = strconv.AppendInt(line, int64(v), 10)
		}
	}
	text := func(s string) {
		line = append(line, ',')
		line = appendField(line, s)
	}
	for _, j := range jobs {
		if j.Utility != nil {
			return fmt.Errorf("write csv: job %s has soft-deadline options, which tide-csv cannot carry (use the trace it came from)", j.ID)
		}
		line = appendField(line[:0], j.ID)
		line = append(line, ',') // submit is required, 0 included
		line = strconv.AppendFloat(line, j.Submit, 'g', -1, 64)
		text(j.Tenant)
		count(j.Priority)
		count(j.GPUs)
		count(j.MinGPUs)
		count(j.MaxGPUs)
		text(j.GPUType)
		text(j.Model)
		count(j.BatchSize)
		num(j.Work)
		text(string(j.Unit))
		num(j.Deadline)
		num(j.Duration)
		num(j.CPUs)
		num(j.MemGiB)
		num(j.Share)
		num(j.GPUMemGiB)
		text(j.MIG)
		line = append(line, '\n')
		if _, err := bw.Write(line); err != nil {
			return fmt.Errorf("write csv: %w", err)
		}
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write csv: %w", err)
	}
	return nil
}

// appendField appends s as one CSV field, quoted when it must be.
func appendField(b []byte, s string) []byte {
	quote := false
	for i := 0; i < len(s); i++ {
		if c := s[i]; c == ',' || c == '"' || c == '\n' || c == '\r' {
			quote = true
			break
		}
	}
	if !quote && (len(s) == 0 || (s[0] != ' ' && s[len(s)-1] != ' ')) {
		return append(b, s...)
	}
	b = append(b, '"')
	for i := 0; i < len(s); i++ {
		if s[i] == '"' {
			b = append(b, '"')
		}
		b = append(b, s[i])
	}
	return append(b, '"')
}
