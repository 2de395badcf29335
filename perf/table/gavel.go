package table

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// UnconsolidatedSuffix marks, in Gavel's throughput files, the GPU types whose
// rates are for a multi-GPU job spread over several servers
// ("v100_unconsolidated").
const UnconsolidatedSuffix = "_unconsolidated"

// JobType is a Gavel job type at a scale factor (its GPU count).
type JobType struct {
	Name        string // e.g. "ResNet-18 (batch size 64)", as in Gavel's traces
	ScaleFactor int
}

func (k JobType) String() string { return fmt.Sprintf("(%q, %d)", k.Name, k.ScaleFactor) }

// Gavel is a perf.Model over Gavel's throughput file
// (simulation_throughputs.json, physical_cluster_throughputs.json):
//
//	{gpu_type: {"('<job type>', <scale factor>)": {
//	    "null": isolated iterations/s,
//	    "('<other job type>', <sf>)": [this job's, the other's iterations/s when sharing a GPU]}}}
//
// A job's j.Model is the job type exactly as in Gavel's traces and j.GPUs its
// scale factor. Rate(j, a, p) is the isolated ("null") throughput of
// (j.Model, j.GPUs) on a.GPUType:
//
//   - from the "<type>_unconsolidated" table when the allocation spans more
//     than one node (a.Nodes() > 1), the table exists and holds the job type
//     (unless AlwaysConsolidated); otherwise from the consolidated table;
//   - 0 when a holds fewer than j.GPUs GPUs (Gavel's jobs are rigid), when
//     there is no table for a.GPUType or no entry for the job type, and when
//     the file says 0 (the job does not fit, e.g. ResNet-50 at batch size 128
//     on a K80);
//   - GPUs beyond j.GPUs add nothing.
//
// Gavel's own simulator (scheduler/scheduler.py at c4fa4009) always reads the
// consolidated table: _set_initial_throughput takes
// oracle_throughputs[worker_type][(job_type, scale_factor)]['null'] for the
// registered worker types (v100, p100, k80), places a job's workers on as few
// servers as it can (_assign_workers_to_job), and uses the _unconsolidated
// keys nowhere but to exclude them from its throughput estimator. Set
// AlwaysConsolidated to reproduce that.
type Gavel struct {
	// Cost gives Costs(j) by job type. Gavel's simulator charges no
	// restart cost; the zero value does the same.
	Cost perf.CostTable
	// AlwaysConsolidated makes Rate ignore the _unconsolidated tables, as
	// Gavel's own simulator does.
	AlwaysConsolidated bool

	types map[string]*gavelType // GPU type key (lower case) -> table
	names map[string]string     // GPU type key -> name as in the file
	jobs  map[string][]int      // job type -> scale factors in any table, ascending
}

type gavelType struct {
	isolated map[JobType]float64
	pairs    map[JobType]map[JobType][2]float64
	bestPair map[JobType]float64 // MaxRate's pair bound (bestPairs)
}

// LoadGavel reads a Gavel throughput file.
func LoadGavel(path string) (*Gavel, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("gavel throughputs: %w", err)
	}
	return ParseGavel(path, b)
}

// LoadGavelFS reads the Gavel throughput file name in fsys.
func LoadGavelFS(fsys fs.FS, name string) (*Gavel, error) {
	b, err := fs.ReadFile(fsys, name)
	if err != nil {
		return nil, fmt.Errorf("gavel throughputs: %w", err)
	}
	return ParseGavel(name, b)
}

// ReadGavel reads a Gavel throughput file from r; source names it in errors.
func ReadGavel(source string, r io.Reader) (*Gavel, error) {
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("gavel throughputs %s: %w", source, err)
	}
	return ParseGavel(source, b)
}

// ParseGavel parses the contents of a Gavel throughput file; source names it
// in errors.
func ParseGavel(source string, data []byte) (*Gavel, error) {
	var raw map[string]map[string]map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		return nil, gavelJSONError(source, data, err)
	}
	if raw == nil {
		return nil, fmt.Errorf("gavel throughputs %s: want an object of GPU types, got null", source)
	}
	if len(raw) == 0 {
		return nil, fmt.Errorf("gavel throughputs %s: no GPU types", source)
	}
	g := &Gavel{types: map[string]*gavelType{}, names: map[string]string{}, jobs: map[string][]int{}}
	sfs := map[string]map[int]bool{}
	for _, gpu := range sortedKeys(raw) {
		k := gpuKey(gpu)
		if k == "" {
			return nil, fmt.Errorf("gavel throughputs %s: GPU type %q: empty name", source, gpu)
		}
		if prev, ok := g.names[k]; ok {
			return nil, fmt.Errorf("gavel throughputs %s: GPU type %q: same as %q", source, gpu, prev)
		}
		gt := &gavelType{isolated: map[JobType]float64{}, pairs: map[JobType]map[JobType][2]float64{}}
		keyOf := map[JobType]string{}
		for _, key := range sortedKeys(raw[gpu]) {
			entry := raw[gpu][key]
			where := fmt.Sprintf("gavel throughputs %s: GPU type %q key %q", source, gpu, key)
			jt, err := ParseJobTypeKey(key)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", where, err)
			}
			if prev, ok := keyOf[jt]; ok {
				return nil, fmt.Errorf("%s: same job type as key %q", where, prev)
			}
			keyOf[jt] = key
			if entry == nil {
				return nil, fmt.Errorf("%s: want an object, got null", where)
			}
			rawIso, ok := entry["null"]
			if !ok {
				return nil, fmt.Errorf("%s: no \"null\" (isolated throughput) entry", where)
			}
			iso, err := gavelNumber(rawIso)
			if err != nil {
				return nil, fmt.Errorf("%s: \"null\": %w", where, err)
			}
			gt.isolated[jt] = iso
			if sfs[jt.Name] == nil {
				sfs[jt.Name] = map[int]bool{}
			}
			sfs[jt.Name][jt.ScaleFactor] = true
			otherKeyOf := map[JobType]string{}
			for _, other := range sortedKeys(entry) {
				if other == "null" {
					continue
				}
				ot, err := ParseJobTypeKey(other)
				if err != nil {
					return nil, fmt.Errorf("%s, co-located key %q: %w", where, other, err)
				}
				if prev, ok := otherKeyOf[ot]; ok {
					return nil, fmt.Errorf("%s, co-located key %q: same job type as %q", where, other, prev)
				}
				otherKeyOf[ot] = other
				pair, err := gavelPair(entry[other])
				if err != nil {
					return nil, fmt.Errorf("%s, co-located key %q: %w", where, other, err)
				}
				if gt.pairs[jt] == nil {
					gt.pairs[jt] = map[JobType][2]float64{}
				}
				gt.pairs[jt][ot] = pair
			}
		}
		gt.bestPairs()
		g.types[k] = gt
		g.names[k] = gpu
	}
	for name, set := range sfs {
		for sf := range set {
			g.jobs[name] = append(g.jobs[name], sf)
		}
		sort.Ints(g.jobs[name])
	}
	return g, nil
}

// gavelJSONError names the line and column of a JSON error.
func gavelJSONError(source string, data []byte, err error) error {
	var off int64 = -1
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		off = se.Offset
	case errors.As(err, &te):
		off = te.Offset
	}
	if off < 0 || off > int64(len(data)) {
		return fmt.Errorf("gavel throughputs %s: %w", source, err)
	}
	before := data[:off]
	line := bytes.Count(before, []byte("\n")) + 1
	col := utf8.RuneCount(before[bytes.LastIndexByte(before, '\n')+1:])
	return fmt.Errorf("gavel throughputs %s line %d column %d: %w", source, line, col, err)
}

// gavelNumber reads a throughput: a finite number >= 0 (null is refused: Go
// would silently read it as 0).
func gavelNumber(raw json.RawMessage) (float64, error) {
	s := bytes.TrimSpace(raw)
	if string(s) == "null" {
		return 0, errors.New("want a throughput, got null")
	}
	var v float64
	if err := json.Unmarshal(s, &v); err != nil {
		return 0, fmt.Errorf("want a throughput, got %s", truncate(string(s), 40))
	}
	if math.IsNaN(v) || math.IsInf(v, 0) || v < 0 {
		return 0, fmt.Errorf("want a finite throughput >= 0, got %v", v)
	}
	return v, nil
}

// gavelPair reads [this job's, the other job's] co-located throughputs.
func gavelPair(raw json.RawMessage) ([2]float64, error) {
	var xs []json.RawMessage
	if err := json.Unmarshal(raw, &xs); err != nil || xs == nil {
		return [2]float64{}, fmt.Errorf("want [this, other] throughputs, got %s", truncate(string(bytes.TrimSpace(raw)), 40))
	}
	if len(xs) != 2 {
		return [2]float64{}, fmt.Errorf("want [this, other] throughputs, got %d values", len(xs))
	}
	var p [2]float64
	for i, x := range xs {
		v, err := gavelNumber(x)
		if err != nil {
			return [2]float64{}, fmt.Errorf("value %d: %w", i+1, err)
		}
		p[i] = v
	}
	return p, nil
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// ParseJobTypeKey parses a Gavel job-type key, the Python repr of a
// (job type, scale factor) tuple: "('ResNet-18 (batch size 64)', 1)". It
// accepts either quote, Python string escapes, and any spacing around the
// parts. Gavel parses the same keys with the regular expression
// \('(.*)', (\d+)\) (scheduler/utils.py, parse_job_type_tuple).
func ParseJobTypeKey(key string) (JobType, error) {
	s := strings.TrimSpace(key)
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return JobType{}, errors.New("want a tuple ('<job type>', <scale factor>)")
	}
	inner := strings.TrimSpace(s[1 : len(s)-1])
	i := strings.LastIndexByte(inner, ',')
	if i < 0 {
		return JobType{}, errors.New("want a tuple ('<job type>', <scale factor>): no comma")
	}
	name, err := unquotePython(strings.TrimSpace(inner[:i]))
	if err != nil {
		return JobType{}, fmt.Errorf("job type: %w", err)
	}
	if name == "" {
		return JobType{}, errors.New("job type: empty")
	}
	sfText := strings.TrimSpace(inner[i+1:])
	sf, err := strconv.Atoi(sfText)
	if err != nil || sf < 1 {
		return JobType{}, fmt.Errorf("scale factor %q: want an integer >= 1", sfText)
	}
	return JobType{Name: name, ScaleFactor: sf}, nil
}

// unquotePython decodes a Python str literal in single or double quotes.
func unquotePython(s string) (string, error) {
	if len(s) < 2 || (s[0] != '\'' && s[0] != '"') || s[len(s)-1] != s[0] {
		return "", fmt.Errorf("%s: want a quoted string", truncate(s, 40))
	}
	q := s[0]
	body := s[1 : len(s)-1]
	var b strings.Builder
	for i := 0; i < len(body); i++ {
		c := body[i]
		if c == q {
			return "", fmt.Errorf("%s: unescaped quote inside the string", truncate(s, 40))
		}
		if c != '\\' {
			b.WriteByte(c)
			continue
		}
		i++
		if i >= len(body) {
			return "", fmt.Errorf("%s: string ends in a backslash", truncate(s, 40))
		}
		switch e := body[i]; e {
		case '\\', '\'', '"':
			b.WriteByte(e)
		case 'n':
			b.WriteByte('\n')
		case 't':
			b.WriteByte('\t')
		case 'r':
			b.WriteByte('\r')
		case 'x', 'u', 'U':
			n := 2
			switch e {
			case 'u':
				n = 4
			case 'U':
				n = 8
			}
			if i+1+n > len(body) {
				return "", fmt.Errorf("%s: short \\%c escape", truncate(s, 40), e)
			}
			r, err := strconv.ParseUint(body[i+1:i+1+n], 16, 32)
			if err != nil || r > utf8.MaxRune {
				return "", fmt.Errorf("%s: bad \\%c escape", truncate(s, 40), e)
			}
			b.WriteRune(rune(r))
			i += n
		default:
			return "", fmt.Errorf("%s: unknown escape \\%c", truncate(s, 40), e)
		}
	}
	return b.String(), nil
}

// GPUTypes lists the GPU types in the file, as spelt there, sorted; the
// "_unconsolidated" tables included.
func (g *Gavel) GPUTypes() []string {
	names := make([]string, 0, len(g.names))
	for _, n := range g.names {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// JobTypes lists the job types with an isolated throughput on at least one
// GPU type, sorted by name then scale factor.
func (g *Gavel) JobTypes() []JobType {
	var out []JobType
	for _, name := range sortedKeys(g.jobs) {
		for _, sf := range g.jobs[name] {
			out = append(out, JobType{name, sf})
		}
	}
	return out
}

// Isolated is the isolated throughput, iterations/s, of jobType at scale
// factor sf on gpuType (a key of the file, "_unconsolidated" ones included);
// ok is false when the file has no such entry.
func (g *Gavel) Isolated(jobType string, sf int, gpuType string) (float64, bool) {
	gt := g.types[gpuKey(gpuType)]
	if gt == nil {
		return 0, false
	}
	v, ok := gt.isolated[JobType{jobType, sf}]
	return v, ok
}

// PairRate is the throughput, iterations/s, of each of two jobs sharing GPUs
// of gpuType (space sharing): r1 for (jobType1, sf1), r2 for (jobType2, sf2).
// ok is false when the file has no such pair; it only pairs jobs of the same
// scale factor. An entry recorded only in the other order is used swapped.
func (g *Gavel) PairRate(jobType1 string, sf1 int, jobType2 string, sf2 int, gpuType string) (r1, r2 float64, ok bool) {
	gt := g.types[gpuKey(gpuType)]
	if gt == nil {
		return 0, 0, false
	}
	a, b := JobType{jobType1, sf1}, JobType{jobType2, sf2}
	if p, ok := gt.pairs[a][b]; ok {
		return p[0], p[1], true
	}
	if p, ok := gt.pairs[b][a]; ok {
		return p[1], p[0], true
	}
	return 0, 0, false
}

// Name implements perf.Model.
func (g *Gavel) Name() string { return "gavel-throughputs" }

var batchInName = regexp.MustCompile(`\(batch size (\d+)\)`)

// batchOf is the global batch size of j: j.BatchSize, or the one in Gavel's
// job type name ("LM (batch size 20)"); 0 when neither.
func batchOf(j *job.Job) int {
	if j.BatchSize > 0 {
		return j.BatchSize
	}
	if m := batchInName.FindStringSubmatch(j.Model); m != nil {
		if b, err := strconv.Atoi(m[1]); err == nil {
			return b
		}
	}
	return 0
}

// Check implements perf.Model: j.Model must be a job type of the file at
// scale factor j.GPUs, with a throughput > 0 on j.GPUType (or on some GPU type
// when j.GPUType is ""), and the work in iterations, or in samples with a
// batch size (j.BatchSize, or the one in the job type's name).
func (g *Gavel) Check(j *job.Job) error {
	if j.Model == "" {
		return fmt.Errorf("job %s: model: missing (Gavel throughputs are per job type)", j.ID)
	}
	sfs, ok := g.jobs[j.Model]
	if !ok {
		return fmt.Errorf("job %s: job type %q: %w (Gavel throughputs have %s)", j.ID, j.Model, perf.ErrUnknownModel, strings.Join(sortedKeys(g.jobs), "; "))
	}
	if i := sort.SearchInts(sfs, j.GPUs); i == len(sfs) || sfs[i] != j.GPUs {
		return fmt.Errorf("job %s: job type %q: no throughput at scale factor (GPUs) %d (have %s)", j.ID, j.Model, j.GPUs, joinInts(sfs))
	}
	switch j.Unit {
	case job.Iterations:
	case job.Samples:
		if batchOf(j) == 0 {
			return fmt.Errorf("job %s: work in samples needs a batch size: job type %q names none and the job gives none", j.ID, j.Model)
		}
	default:
		return fmt.Errorf("job %s: work unit %q: Gavel throughputs count iterations; give work in iterations or samples", j.ID, j.Unit)
	}
	jt := JobType{j.Model, j.GPUs}
	if j.GPUType != "" {
		k := gpuKey(j.GPUType)
		gt := g.types[k]
		if gt == nil || strings.HasSuffix(k, UnconsolidatedSuffix) {
			return fmt.Errorf("job %s: no Gavel throughputs for GPU type %q (have %s)", j.ID, j.GPUType, strings.Join(g.consolidatedTypes(), ", "))
		}
		v, ok := gt.isolated[jt]
		if !ok {
			return fmt.Errorf("job %s: job type %s: no throughput on %s", j.ID, jt, g.names[k])
		}
		if v <= 0 {
			return fmt.Errorf("job %s: job type %s cannot run on %s (throughput 0 in the file)", j.ID, jt, g.names[k])
		}
		return nil
	}
	for k, gt := range g.types {
		if strings.HasSuffix(k, UnconsolidatedSuffix) {
			continue
		}
		if gt.isolated[jt] > 0 {
			return nil
		}
	}
	return fmt.Errorf("job %s: job type %s has no throughput > 0 on any GPU type", j.ID, jt)
}

func (g *Gavel) consolidatedTypes() []string {
	var out []string
	for _, k := range sortedKeys(g.names) {
		if !strings.HasSuffix(k, UnconsolidatedSuffix) {
			out = append(out, g.names[k])
		}
	}
	return out
}

func joinInts(xs []int) string {
	s := make([]string, len(xs))
	for i, x := range xs {
		s[i] = strconv.Itoa(x)
	}
	return strings.Join(s, ", ")
}

// Work implements perf.Model: iterations (Gavel's steps). Work in samples is
// divided by the batch size. Other units are rejected by Check; Work returns
// j.Work for them.
func (g *Gavel) Work(j *job.Job) float64 {
	if j.Unit == job.Samples {
		if b := batchOf(j); b > 0 {
			return j.Work / float64(b)
		}
	}
	return j.Work
}

// Rate implements perf.Model (see Gavel). The rate is constant: the second
// result is +Inf.
func (g *Gavel) Rate(j *job.Job, a perf.Alloc, p float64) (float64, float64) {
	inf := math.Inf(1)
	if j.GPUs < 1 || a.GPUs() < j.GPUs {
		return 0, inf
	}
	jt := JobType{j.Model, j.GPUs}
	k := gpuKey(a.GPUType)
	if a.Nodes() > 1 && !g.AlwaysConsolidated && !strings.HasSuffix(k, UnconsolidatedSuffix) {
		if u := g.types[k+UnconsolidatedSuffix]; u != nil {
			if v, ok := u.isolated[jt]; ok {
				return v, inf
			}
		}
	}
	if gt := g.types[k]; gt != nil {
		return gt.isolated[jt], inf
	}
	return 0, inf
}

// Costs implements perf.Model.
func (g *Gavel) Costs(j *job.Job) perf.Costs { return g.Cost.For(j.Model) }

var _ perf.Model = (*Gavel)(nil)
