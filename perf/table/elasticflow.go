package table

import (
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// BatchColumn is the name ElasticFlow gives the first column of its throughput
// tables (its profiles.py reads rows with csv.DictReader keyed on it).
const BatchColumn = "global_batch_size"

// Interpolation says how Table.Rate treats a GPU count that lies between two
// measured columns.
type Interpolation int

const (
	// Linear interpolates the throughput linearly in the GPU count between
	// the two nearest measured columns. It is the default.
	Linear Interpolation = iota
	// Floor uses the nearest measured column below: the job runs as fast as
	// on the largest measured count that its GPUs can hold, and the extra
	// GPUs idle. This is what ElasticFlow's scheduler does: it only ever
	// hands out measured counts, rounding a number of free GPUs down to the
	// next table column (utils.get_last_level).
	Floor
)

// String implements fmt.Stringer.
func (i Interpolation) String() string {
	switch i {
	case Linear:
		return "linear"
	case Floor:
		return "floor"
	}
	return fmt.Sprintf("Interpolation(%d)", int(i))
}

// ParseError is a malformed cell, row or header of a throughput CSV file.
type ParseError struct {
	File   string // file name as given to the loader
	Line   int    // 1-based line, 0 when not known
	Column string // header name of the column ("" when the whole row or file is at fault)
	Err    error
}

func (e *ParseError) Error() string {
	var b strings.Builder
	b.WriteString("throughputs ")
	b.WriteString(e.File)
	if e.Line > 0 {
		fmt.Fprintf(&b, " line %d", e.Line)
	}
	if e.Column != "" {
		fmt.Fprintf(&b, " column %q", e.Column)
	}
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	return b.String()
}

func (e *ParseError) Unwrap() error { return e.Err }

// Table is a perf.Model over ElasticFlow-style throughput tables, for one or
// more GPU types. The zero value is not usable; use NewTable or a loader.
//
// Rate(j, a, p) is the iterations/s of model j.Model at global batch size
// j.BatchSize on a.GPUs() GPUs of type a.GPUType:
//
//   - on a measured GPU count, exactly the table's value;
//   - between two measured counts, per Interp (Linear by default);
//   - above the largest measured count, the value at the largest measured
//     count: extra GPUs give no extrapolated speed-up;
//   - below the smallest measured count (or 0 GPUs), 0: the job cannot run;
//   - 0 as well when there is no table for a.GPUType, or the batch size has
//     no row in it.
//
// Cells that are empty, "nan" or 0 count as not measured: ElasticFlow's files
// use all three for configurations that were not profiled (its resnet50_cifar10
// table has zeros beyond 8 A100s, and its own code skips "nan" when computing
// a job's largest GPU count). Measured values must be finite and positive.
type Table struct {
	// Cost gives Costs(j) by model name.
	Cost perf.CostTable
	// CostsByGPUs, when set, replaces Cost: Costs(j) is CostsByGPUs(j.GPUs).
	// Set it to ElasticFlowCosts for ElasticFlow's overhead model, evaluated
	// at the job's requested GPU count (perf.Model's Costs cannot see the
	// allocation).
	CostsByGPUs func(n int) perf.Costs
	// Interp is how GPU counts between measured columns are treated.
	Interp Interpolation

	models   map[string]map[string]*sheet // model -> GPU type key -> sheet
	gpuNames map[string]string            // GPU type key -> name as first given
}

// sheet is one model's table on one GPU type.
type sheet struct {
	source  string
	gpuType string
	batches []int // ascending
	rows    map[int]*curve
}

// curve is one row: throughput at the measured GPU counts, ascending.
type curve struct {
	gpus  []int
	rates []float64
	line  int
}

// NewTable returns an empty Table.
func NewTable() *Table {
	return &Table{models: map[string]map[string]*sheet{}, gpuNames: map[string]string{}}
}

func gpuKey(t string) string { return strings.ToLower(strings.TrimSpace(t)) }

// LoadElasticFlowDir reads every <model>.csv file in dir as the throughputs
// of GPU type gpuType (dir is, e.g., .../elasticflow/throughputs_A100).
func LoadElasticFlowDir(dir, gpuType string) (*Table, error) {
	return LoadElasticFlowFS(os.DirFS(dir), ".", gpuType)
}

// LoadElasticFlowFS is LoadElasticFlowDir on a file system: it reads every
// *.csv file directly under dir in fsys. The model name is the file name
// without ".csv", as in ElasticFlow's profiles.py.
func LoadElasticFlowFS(fsys fs.FS, dir, gpuType string) (*Table, error) {
	t := NewTable()
	if err := t.AddFS(fsys, dir, gpuType); err != nil {
		return nil, err
	}
	return t, nil
}

// AddFS adds the *.csv files directly under dir in fsys as the tables of
// gpuType. It fails, adding nothing, when a file is malformed, when dir holds
// no CSV file, or when t already has a table for one of the models on gpuType.
func (t *Table) AddFS(fsys fs.FS, dir, gpuType string) error {
	entries, err := fs.ReadDir(fsys, dir)
	if err != nil {
		return fmt.Errorf("throughputs %s: %w", dir, err)
	}
	staged := NewTable()
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".csv") {
			continue
		}
		name := path.Join(dir, e.Name())
		f, err := fsys.Open(name)
		if err != nil {
			return fmt.Errorf("throughputs %s: %w", name, err)
		}
		err = staged.AddCSV(gpuType, strings.TrimSuffix(e.Name(), ".csv"), name, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	if len(staged.models) == 0 {
		return fmt.Errorf("throughputs %s: no .csv files", dir)
	}
	return t.Add(staged)
}

// AddCSV parses one throughput table (model's throughputs on gpuType) from r.
// source names the input in error messages.
func (t *Table) AddCSV(gpuType, model, source string, r io.Reader) error {
	if gpuKey(gpuType) == "" {
		return fmt.Errorf("throughputs %s: GPU type: missing", source)
	}
	if model == "" {
		return fmt.Errorf("throughputs %s: model name: missing", source)
	}
	if t.has(model, gpuType) {
		return fmt.Errorf("throughputs %s: model %q on %s: already loaded from %s", source, model, gpuType, t.models[model][gpuKey(gpuType)].source)
	}
	s, err := parseSheet(source, r)
	if err != nil {
		return err
	}
	s.gpuType = gpuType
	t.put(model, s)
	return nil
}

func (t *Table) has(model, gpuType string) bool {
	_, ok := t.models[model][gpuKey(gpuType)]
	return ok
}

func (t *Table) put(model string, s *sheet) {
	if t.models == nil {
		t.models = map[string]map[string]*sheet{}
		t.gpuNames = map[string]string{}
	}
	k := gpuKey(s.gpuType)
	if t.models[model] == nil {
		t.models[model] = map[string]*sheet{}
	}
	t.models[model][k] = s
	if _, ok := t.gpuNames[k]; !ok {
		t.gpuNames[k] = s.gpuType
	}
}

// Add merges other's tables into t (typically another GPU type). It fails,
// changing nothing, when both hold a table for the same model and GPU type.
// t keeps its own Cost, CostsByGPUs and Interp. other is not modified; t
// shares its (read-only) tables.
func (t *Table) Add(other *Table) error {
	for _, model := range other.Models() {
		for k, s := range other.models[model] {
			if old, ok := t.models[model][k]; ok {
				return fmt.Errorf("throughputs: model %q on %s: in both %s and %s", model, s.gpuType, old.source, s.source)
			}
		}
	}
	for model, bySheet := range other.models {
		for _, s := range bySheet {
			t.put(model, s)
		}
	}
	return nil
}

// parseSheet reads one CSV table.
func parseSheet(source string, r io.Reader) (*sheet, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = -1 // checked here, to name the line
	cr.TrimLeadingSpace = true
	header, err := cr.Read()
	if err == io.EOF {
		return nil, &ParseError{File: source, Err: errors.New("empty file: want a header of " + BatchColumn + " and GPU counts")}
	}
	if err != nil {
		return nil, csvError(source, err)
	}
	for i := range header {
		header[i] = strings.TrimSpace(header[i])
	}
	header[0] = strings.TrimPrefix(header[0], "\ufeff")
	if header[0] != BatchColumn {
		return nil, &ParseError{File: source, Line: 1, Column: header[0], Err: fmt.Errorf("first header field must be %q", BatchColumn)}
	}
	if len(header) < 2 {
		return nil, &ParseError{File: source, Line: 1, Err: errors.New("no GPU-count columns after " + BatchColumn)}
	}
	counts := make([]int, len(header))
	seen := map[int]bool{}
	for i := 1; i < len(header); i++ {
		n, err := strconv.Atoi(header[i])
		if err != nil || n < 1 {
			return nil, &ParseError{File: source, Line: 1, Column: header[i], Err: errors.New("GPU count must be an integer >= 1")}
		}
		if seen[n] {
			return nil, &ParseError{File: source, Line: 1, Column: header[i], Err: errors.New("GPU count appears twice")}
		}
		seen[n] = true
		counts[i] = n
	}
	s := &sheet{source: source, rows: map[int]*curve{}}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, csvError(source, err)
		}
		line, _ := cr.FieldPos(0)
		if len(rec) != len(header) {
			return nil, &ParseError{File: source, Line: line, Err: fmt.Errorf("%d fields, the header has %d", len(rec), len(header))}
		}
		bs, err := strconv.Atoi(strings.TrimSpace(rec[0]))
		if err != nil || bs < 1 {
			return nil, &ParseError{File: source, Line: line, Column: header[0], Err: fmt.Errorf("batch size %q: want an integer >= 1", rec[0])}
		}
		if prev, ok := s.rows[bs]; ok {
			return nil, &ParseError{File: source, Line: line, Column: header[0], Err: fmt.Errorf("batch size %d already given on line %d", bs, prev.line)}
		}
		c := &curve{line: line}
		for i := 1; i < len(rec); i++ {
			v, ok, err := parseCell(rec[i])
			if err != nil {
				return nil, &ParseError{File: source, Line: line, Column: header[i], Err: err}
			}
			if ok {
				c.gpus = append(c.gpus, counts[i])
				c.rates = append(c.rates, v)
			}
		}
		sort.Sort(byGPUs{c})
		s.rows[bs] = c
		s.batches = append(s.batches, bs)
	}
	if len(s.rows) == 0 {
		return nil, &ParseError{File: source, Err: errors.New("no rows after the header")}
	}
	sort.Ints(s.batches)
	return s, nil
}

func csvError(source string, err error) error {
	var pe *csv.ParseError
	if errors.As(err, &pe) {
		return &ParseError{File: source, Line: pe.Line, Err: fmt.Errorf("column %d: %w", pe.Column, pe.Err)}
	}
	return &ParseError{File: source, Err: err}
}

// parseCell reads one throughput. ok is false for a cell that was not
// measured: empty, "nan" (any case) or 0.
func parseCell(s string) (v float64, ok bool, err error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return 0, false, nil
	}
	v, err = strconv.ParseFloat(s, 64)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not a number", s)
	}
	switch {
	case math.IsNaN(v):
		return 0, false, nil
	case math.IsInf(v, 0):
		return 0, false, fmt.Errorf("%q: want a finite throughput", s)
	case v < 0:
		return 0, false, fmt.Errorf("%q: throughput must not be negative", s)
	case v == 0:
		return 0, false, nil
	}
	return v, true, nil
}

type byGPUs struct{ c *curve }

func (b byGPUs) Len() int           { return len(b.c.gpus) }
func (b byGPUs) Less(i, j int) bool { return b.c.gpus[i] < b.c.gpus[j] }
func (b byGPUs) Swap(i, j int) {
	b.c.gpus[i], b.c.gpus[j] = b.c.gpus[j], b.c.gpus[i]
	b.c.rates[i], b.c.rates[j] = b.c.rates[j], b.c.rates[i]
}

// at is the throughput on n GPUs.
func (c *curve) at(n int, interp Interpolation) float64 {
	k := len(c.gpus)
	if k == 0 || n < c.gpus[0] {
		return 0
	}
	if n >= c.gpus[k-1] {
		return c.rates[k-1]
	}
	// c.gpus[i-1] <= n < c.gpus[i]
	i := sort.SearchInts(c.gpus, n+1)
	lo, hi := c.gpus[i-1], c.gpus[i]
	if n == lo || interp == Floor {
		return c.rates[i-1]
	}
	a, b := c.rates[i-1], c.rates[i]
	v := a + float64(n-lo)/float64(hi-lo)*(b-a)
	// Keep rounding from stepping outside the two measurements.
	return max(min(a, b), min(max(a, b), v))
}

// Models lists the loaded model names, sorted.
func (t *Table) Models() []string {
	names := make([]string, 0, len(t.models))
	for m := range t.models {
		names = append(names, m)
	}
	sort.Strings(names)
	return names
}

// GPUTypes lists the GPU types with at least one table, as first given,
// sorted.
func (t *Table) GPUTypes() []string {
	names := make([]string, 0, len(t.gpuNames))
	for _, n := range t.gpuNames {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// BatchSizes lists the batch sizes with a row in model's table on gpuType,
// ascending; nil when there is no such table.
func (t *Table) BatchSizes(model, gpuType string) []int {
	s := t.models[model][gpuKey(gpuType)]
	if s == nil {
		return nil
	}
	return append([]int(nil), s.batches...)
}

// Measured returns the measured GPU counts (ascending) and their throughputs,
// iterations/s, for model at global batch size batch on gpuType; nil when not
// in the table. These are the counts ElasticFlow's scheduler allocates.
func (t *Table) Measured(model, gpuType string, batch int) (gpus []int, rates []float64) {
	c := t.row(model, gpuType, batch)
	if c == nil {
		return nil, nil
	}
	return append([]int(nil), c.gpus...), append([]float64(nil), c.rates...)
}

// PeakGPUs is the measured GPU count with the highest throughput for model at
// batch size batch on gpuType (the smallest such count on a tie); 0 when not
// in the table. Beyond it more GPUs make the job slower or no faster.
func (t *Table) PeakGPUs(model, gpuType string, batch int) int {
	c := t.row(model, gpuType, batch)
	if c == nil {
		return 0
	}
	best := -1
	for i, r := range c.rates {
		if best < 0 || r > c.rates[best] {
			best = i
		}
	}
	if best < 0 {
		return 0
	}
	return c.gpus[best]
}

// Throughput is the rate Rate gives a job of model at global batch size batch
// on gpus GPUs of gpuType, iterations/s (see Table). A batch size of 0 means
// the model's default (see Check).
func (t *Table) Throughput(model, gpuType string, batch, gpus int) float64 {
	if batch == 0 {
		b, ok := t.defaultBatch(model)
		if !ok {
			return 0
		}
		batch = b
	}
	c := t.row(model, gpuType, batch)
	if c == nil {
		return 0
	}
	return c.at(gpus, t.Interp)
}

func (t *Table) row(model, gpuType string, batch int) *curve {
	s := t.models[model][gpuKey(gpuType)]
	if s == nil {
		return nil
	}
	return s.rows[batch]
}

// defaultBatch is the batch size of a job that gives none: the model's only
// batch size across all GPU types; ok is false when it has several.
func (t *Table) defaultBatch(model string) (int, bool) {
	b := 0
	for _, s := range t.models[model] {
		for _, bs := range s.batches {
			if b != 0 && bs != b {
				return 0, false
			}
			b = bs
		}
	}
	return b, b != 0
}

// Name implements perf.Model.
func (t *Table) Name() string { return "elasticflow-throughputs" }

// Check implements perf.Model. It wants a loaded model; work in iterations or
// samples (epochs and seconds cannot be converted to iterations from a
// table); and a batch size with a row holding at least one measurement on
// j.GPUType, or on some GPU type when j.GPUType is "". A batch size of 0
// (the model's default) is accepted only for a model with a single batch size
// across all its tables. The table does not interpolate between batch sizes:
// iterations/s fall roughly as the inverse of the batch size, not linearly,
// and a per-row measurement is all the data say.
func (t *Table) Check(j *job.Job) error {
	if j.Model == "" {
		return fmt.Errorf("job %s: model: missing (throughput tables are per model)", j.ID)
	}
	sheets := t.models[j.Model]
	if sheets == nil {
		return fmt.Errorf("job %s: model %q: %w (throughput tables have %s)", j.ID, j.Model, perf.ErrUnknownModel, strings.Join(t.Models(), ", "))
	}
	switch j.Unit {
	case job.Iterations, job.Samples:
	default:
		return fmt.Errorf("job %s: work unit %q: throughput tables count iterations; give work in iterations or samples", j.ID, j.Unit)
	}
	bs := j.BatchSize
	if bs == 0 {
		b, ok := t.defaultBatch(j.Model)
		if !ok {
			return fmt.Errorf("job %s: model %q: batch size: missing, and the tables have several (%s)", j.ID, j.Model, t.batchList(j.Model, ""))
		}
		bs = b
	}
	if j.GPUType != "" {
		s := sheets[gpuKey(j.GPUType)]
		if s == nil {
			return fmt.Errorf("job %s: model %q: no throughput table for GPU type %q (have %s)", j.ID, j.Model, j.GPUType, t.typeList(j.Model))
		}
		if c := s.rows[bs]; c == nil || len(c.gpus) == 0 {
			return fmt.Errorf("job %s: model %q batch size %d: not in the %s table (batch sizes %s)", j.ID, j.Model, bs, s.gpuType, t.batchList(j.Model, j.GPUType))
		}
		return nil
	}
	for _, s := range sheets {
		if c := s.rows[bs]; c != nil && len(c.gpus) > 0 {
			return nil
		}
	}
	return fmt.Errorf("job %s: model %q batch size %d: not in any throughput table (batch sizes %s)", j.ID, j.Model, bs, t.batchList(j.Model, ""))
}

// batchList describes the batch sizes with measurements of model, on gpuType
// or, for "", on every type ("A100: 64, 128; T4: 384").
func (t *Table) batchList(model, gpuType string) string {
	var parts []string
	for _, k := range sortedKeys(t.models[model]) {
		s := t.models[model][k]
		if gpuType != "" && k != gpuKey(gpuType) {
			continue
		}
		var bs []string
		for _, b := range s.batches {
			if len(s.rows[b].gpus) > 0 {
				bs = append(bs, strconv.Itoa(b))
			}
		}
		if len(bs) == 0 {
			bs = []string{"none measured"}
		}
		parts = append(parts, s.gpuType+": "+strings.Join(bs, ", "))
	}
	return strings.Join(parts, "; ")
}

func (t *Table) typeList(model string) string {
	var names []string
	for _, k := range sortedKeys(t.models[model]) {
		names = append(names, t.models[model][k].gpuType)
	}
	return strings.Join(names, ", ")
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// Work implements perf.Model: iterations. Work in samples is divided by the
// global batch size. Other units are rejected by Check; Work returns j.Work
// for them.
func (t *Table) Work(j *job.Job) float64 {
	if j.Unit != job.Samples {
		return j.Work
	}
	bs := j.BatchSize
	if bs == 0 {
		b, ok := t.defaultBatch(j.Model)
		if !ok {
			return j.Work
		}
		bs = b
	}
	return j.Work / float64(bs)
}

// Rate implements perf.Model (see Table). The rate is constant: the second
// result is +Inf.
func (t *Table) Rate(j *job.Job, a perf.Alloc, p float64) (float64, float64) {
	return t.Throughput(j.Model, a.GPUType, j.BatchSize, a.GPUs()), math.Inf(1)
}

// Costs implements perf.Model: CostsByGPUs(j.GPUs) when set, otherwise
// Cost.For(j.Model).
func (t *Table) Costs(j *job.Job) perf.Costs {
	if t.CostsByGPUs != nil {
		return t.CostsByGPUs(j.GPUs)
	}
	return t.Cost.For(j.Model)
}

var _ perf.Model = (*Table)(nil)
