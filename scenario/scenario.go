// Package scenario reads an experiment from one YAML file: the cluster with
// its sites, how their capacity changes, the trace, the performance model,
// the policies with their knobs, and optionally a sweep of one parameter.
// `tide sim --scenario FILE` runs it.
//
//	name: edgeflow-edge-servers
//	cluster:                      # a cluster spec (docs/simulator.md), or a shorthand string
//	  sites:
//	    - {name: cloud, nodes: [{count: 4, gpus: 8, gpu: a100}]}
//	    - {name: edge, kind: edge, nodes: [{count: 8, gpus: 1, gpu: v100}]}
//	availability:
//	  file: edge.csv              # time,site,available|inference (relative to this file)
//	  diurnal: [{site: edge, measure: available, period: 86400, trough: 2, peak: 8, noise: 1, step: 600, seed: 1}]
//	  faults: [{site: cloud, mtbf: 864000, mttr: 3600, seed: 1}]
//	migration: {remote_gibps: 0.125, memory_gibps: 10, local_gibps: 1, checkpoint_interval: 600}  # or {free: true}
//	trace: {file: ../data/x.csv, format: itp, sort: true, first: 0, limit: 300, arrival_scale: 1}
//	model:
//	  kind: elasticflow           # elasticflow, duration, pollux (with dir: PROFILES, default embedded)
//	  tables: [throughputs_A100@a100]
//	  costs: elasticflow          # elasticflow, or seconds
//	  edge: {type: v100, ref: a100, lambda: 0.5}
//	priorities: {classes: [1, 0], weights: [0.3, 0.7], seed: 1}
//	round: 60
//	seed: 1
//	policies: [elasticflow, edgeflow]
//	sweep: {param: edge_servers, values: [0, 2, 4, 8, 16]}
//
// Relative paths are relative to the scenario file. Errors name the file,
// the line and the field.
package scenario

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tide-sched/tide/capacity"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/decodemsg"
	"github.com/tide-sched/tide/trace"
)

// Scenario is one experiment file.
type Scenario struct {
	Name         string       `yaml:"name"`
	Description  string       `yaml:"description"`
	Cluster      ClusterField `yaml:"cluster"`
	Availability Availability `yaml:"availability"`
	Migration    Migration    `yaml:"migration"`
	Trace        Trace        `yaml:"trace"`
	Model        Model        `yaml:"model"`
	Priorities   *Priorities  `yaml:"priorities"`
	Round        float64      `yaml:"round"`
	OnEvents     *bool        `yaml:"on_events"`
	Seed         int64        `yaml:"seed"`
	Policies     []string     `yaml:"policies"`
	Sweep        *Sweep       `yaml:"sweep"`

	// File is the path the scenario was read from; Dir resolves its
	// relative paths.
	File string `yaml:"-"`
	Dir  string `yaml:"-"`
	root *yaml.Node
}

// ClusterField is a cluster spec or a shorthand string ("16x8:a100").
type ClusterField struct {
	Spec      cluster.Spec
	Shorthand string
}

// UnmarshalYAML implements yaml.Unmarshaler.
func (c *ClusterField) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode {
		c.Shorthand = n.Value
		return nil
	}
	return n.Decode(&c.Spec)
}

// Availability is how the sites' capacity changes.
type Availability struct {
	File    string    `yaml:"file"`
	Diurnal []Diurnal `yaml:"diurnal"`
	Faults  []Faults  `yaml:"faults"`
}

// Diurnal is capacity.Diurnal in YAML.
type Diurnal struct {
	Site    string  `yaml:"site"`
	Measure string  `yaml:"measure"`
	Period  float64 `yaml:"period"`
	Trough  float64 `yaml:"trough"`
	Peak    float64 `yaml:"peak"`
	Noise   float64 `yaml:"noise"`
	Step    float64 `yaml:"step"`
	Phase   float64 `yaml:"phase"`
	Seed    uint64  `yaml:"seed"`
}

// Faults is capacity.Faults in YAML.
type Faults struct {
	Site string  `yaml:"site"`
	MTBF float64 `yaml:"mtbf"`
	MTTR float64 `yaml:"mttr"`
	Seed uint64  `yaml:"seed"`
}

// Migration is sim.Migration's bandwidths and the checkpoint interval.
type Migration struct {
	RemoteGiBps        float64 `yaml:"remote_gibps"`
	MemoryGiBps        float64 `yaml:"memory_gibps"`
	LocalGiBps         float64 `yaml:"local_gibps"`
	CheckpointInterval float64 `yaml:"checkpoint_interval"`
	// Free makes moves and checkpoints cost nothing beyond the model's
	// start, restart and resize costs, as in `tide sim` without a
	// scenario; the bandwidths are then unused.
	Free bool `yaml:"free"`
}

// Trace says which jobs to replay.
type Trace struct {
	File   string `yaml:"file"`
	Format string `yaml:"format"`
	Sort   bool   `yaml:"sort"`
	// SkipBad skips invalid rows (the Chronus traces' zero-GPU jobs)
	// instead of failing.
	SkipBad bool `yaml:"skip_bad"`
	// First and Limit take jobs First .. First+Limit-1 (Limit 0: all).
	First int `yaml:"first"`
	Limit int `yaml:"limit"`
	// ArrivalScale multiplies the arrival rate: submit times (from the
	// first job's) are divided by it, each deadline keeping its distance
	// from its job's submission. Default 1.
	ArrivalScale float64 `yaml:"arrival_scale"`
	// DeadlineScale multiplies each job's window (deadline - submission).
	// Default 1; the shipped ElasticFlow/ITP deadlines give each job at
	// most 1.5x its time on one A100, which no slower edge GPU can meet.
	DeadlineScale float64 `yaml:"deadline_scale"`
}

// Model is the performance model.
type Model struct {
	Kind   string   `yaml:"kind"`   // elasticflow (default), duration or pollux
	Tables []string `yaml:"tables"` // DIR@TYPE, ElasticFlow throughput tables
	// Dir is the directory of Pollux profiles (kind pollux); empty: the
	// profiles embedded in tide.
	Dir   string     `yaml:"dir"`
	Costs string     `yaml:"costs"` // elasticflow (default for tables) or a number of seconds
	Edge  *EdgeModel `yaml:"edge"`
}

// EdgeModel runs a slower GPU type at Lambda times a reference type.
type EdgeModel struct {
	Type   string  `yaml:"type"`
	Ref    string  `yaml:"ref"`
	Lambda float64 `yaml:"lambda"`
}

// Priorities assigns each job a priority class at random (seeded).
type Priorities struct {
	Classes []int     `yaml:"classes"`
	Weights []float64 `yaml:"weights"`
	Seed    uint64    `yaml:"seed"`
}

// Sweep runs the scenario once per value of one parameter.
type Sweep struct {
	Param  string    `yaml:"param"`
	Values []float64 `yaml:"values"`
}

// Sweep parameters.
var SweepParams = []string{"arrival_scale", "deadline_scale", "cloud_gpus", "edge_servers", "edge_gpus", "lambda", "mtbf"}

// Error is a problem at one place of a scenario file.
type Error struct {
	File  string
	Line  int
	Field string
	Err   error
}

func (e *Error) Error() string {
	s := "scenario " + e.File
	if e.Line > 0 {
		s += fmt.Sprintf(" line %d", e.Line)
	}
	if e.Field != "" {
		s += " field " + e.Field
	}
	return s + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// MaxSize bounds a scenario file.
const MaxSize = 1 << 20

// Load reads and checks a scenario file.
func Load(path string) (*Scenario, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("scenario: %w", err)
	}
	return Parse(data, path)
}

// Parse decodes and checks a scenario; file names it in errors and
// resolves relative paths.
func Parse(data []byte, file string) (*Scenario, error) {
	if len(data) > MaxSize {
		return nil, &Error{File: file, Err: fmt.Errorf("larger than %d bytes", MaxSize)}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		if err == io.EOF {
			return nil, &Error{File: file, Err: errors.New("empty file")}
		}
		return nil, yamlError(file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		if err != nil {
			return nil, yamlError(file, err)
		}
		if len(extra.Content) > 0 {
			return nil, &Error{File: file, Line: extra.Line, Err: errors.New("more than one YAML document")}
		}
	}
	sc := &Scenario{File: file, Dir: filepath.Dir(file), root: &root}
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(sc); err != nil {
		return nil, yamlError(file, err)
	}
	if err := sc.check(); err != nil {
		return nil, err
	}
	return sc, nil
}

// yamlError turns a yaml error ("yaml: line 3: ...") into an Error.
func yamlError(file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = decodemsg.YAMLMessage(te.Errors[0])
	}
	line := 0
	if strings.HasPrefix(msg, "line ") {
		rest := msg[len("line "):]
		if i := strings.Index(rest, ":"); i > 0 {
			if _, err := fmt.Sscanf(rest[:i], "%d", &line); err == nil {
				msg = strings.TrimSpace(rest[i+1:])
			}
		}
	}
	return &Error{File: file, Line: line, Err: errors.New(msg)}
}

// lineOf is the line of the value at path (keys, or "[i]" indexes), or of
// its deepest existing ancestor.
func (sc *Scenario) lineOf(path ...string) int {
	if sc.root == nil || len(sc.root.Content) == 0 {
		return 0
	}
	n := sc.root.Content[0]
	line := n.Line
	for _, p := range path {
		var next *yaml.Node
		switch {
		case strings.HasPrefix(p, "[") && n.Kind == yaml.SequenceNode:
			var i int
			if _, err := fmt.Sscanf(p, "[%d]", &i); err == nil && i >= 0 && i < len(n.Content) {
				next = n.Content[i]
			}
		case n.Kind == yaml.MappingNode:
			for k := 0; k+1 < len(n.Content); k += 2 {
				if n.Content[k].Value == p {
					next = n.Content[k+1]
				}
			}
		}
		if next == nil {
			return line
		}
		n, line = next, next.Line
	}
	return line
}

func (sc *Scenario) errAt(field string, path []string, format string, args ...any) error {
	return &Error{File: sc.File, Line: sc.lineOf(path...), Field: field, Err: fmt.Errorf(format, args...)}
}

// minGiBps is the slowest link a scenario may model, GiB/s: 1 KiB/s.
const minGiBps = 1.0 / (1 << 20)

func bad(v float64) bool { return math.IsNaN(v) || math.IsInf(v, 0) }

// badSweepValue is a sweep value no parameter takes (every parameter is a
// count, a scale or seconds, none of them above 1e7).
func badSweepValue(v float64) bool { return v < 0 || bad(v) || v > 1e7 }

// check validates what can be checked without reading other files.
func (sc *Scenario) check() error {
	if sc.Trace.File == "" {
		return sc.errAt("trace.file", []string{"trace"}, "missing: the trace to replay")
	}
	if f := sc.Trace.Format; f != "" && !slices.Contains(trace.Formats, f) {
		return sc.errAt("trace.format", []string{"trace", "format"}, "unknown format %q; want one of %s (or none: detected from the file)", f, strings.Join(trace.Formats, ", "))
	}
	if len(sc.Policies) == 0 {
		return sc.errAt("policies", []string{"policies"}, "missing: a list of policy specs")
	}
	for i, p := range sc.Policies {
		if strings.TrimSpace(p) == "" {
			return sc.errAt(fmt.Sprintf("policies[%d]", i), []string{"policies", fmt.Sprintf("[%d]", i)}, "empty policy spec")
		}
	}
	if sc.Trace.First < 0 || sc.Trace.Limit < 0 {
		return sc.errAt("trace.first", []string{"trace"}, "first and limit must be >= 0")
	}
	if sc.Trace.ArrivalScale == 0 {
		sc.Trace.ArrivalScale = 1
	}
	if !(sc.Trace.ArrivalScale > 0) || bad(sc.Trace.ArrivalScale) {
		return sc.errAt("trace.arrival_scale", []string{"trace", "arrival_scale"}, "want a number > 0, got %v", sc.Trace.ArrivalScale)
	}
	if sc.Trace.DeadlineScale == 0 {
		sc.Trace.DeadlineScale = 1
	}
	if !(sc.Trace.DeadlineScale > 0) || bad(sc.Trace.DeadlineScale) {
		return sc.errAt("trace.deadline_scale", []string{"trace", "deadline_scale"}, "want a number > 0, got %v", sc.Trace.DeadlineScale)
	}
	if sc.Round == 0 {
		sc.Round = 60
	}
	if !(sc.Round > 0) || bad(sc.Round) {
		return sc.errAt("round", []string{"round"}, "want seconds > 0, got %v", sc.Round)
	}
	switch sc.Model.Kind {
	case "":
		sc.Model.Kind = "elasticflow"
	case "elasticflow", "duration", "pollux":
	default:
		return sc.errAt("model.kind", []string{"model", "kind"}, "%q: want elasticflow, duration or pollux", sc.Model.Kind)
	}
	if sc.Model.Kind == "elasticflow" && len(sc.Model.Tables) == 0 {
		return sc.errAt("model.tables", []string{"model"}, "missing: DIR@TYPE of ElasticFlow throughput tables")
	}
	for i, t := range sc.Model.Tables {
		if dir, typ, ok := strings.Cut(t, "@"); !ok || dir == "" || typ == "" {
			return sc.errAt(fmt.Sprintf("model.tables[%d]", i), []string{"model", "tables", fmt.Sprintf("[%d]", i)}, "%q: want DIR@TYPE, e.g. throughputs_A100@a100", t)
		}
	}
	if e := sc.Model.Edge; e != nil {
		if e.Type == "" || e.Ref == "" {
			return sc.errAt("model.edge", []string{"model", "edge"}, "want type and ref GPU types")
		}
		if !(e.Lambda > 0 && e.Lambda <= 1) {
			return sc.errAt("model.edge.lambda", []string{"model", "edge", "lambda"}, "want a speed ratio in (0, 1], got %v", e.Lambda)
		}
	}
	// The generators' own checks, on copies (they fill defaults), named by
	// the field's line.
	at := func(list string, i int, err error) error {
		var fe *capacity.FieldError
		if !errors.As(err, &fe) {
			return fmt.Errorf("scenario %s: availability.%s[%d]: %w", sc.File, list, i, err)
		}
		return sc.errAt(fmt.Sprintf("availability.%s[%d].%s", list, i, fe.Field), []string{"availability", list, fmt.Sprintf("[%d]", i), fe.Field}, "%s", fe.Msg)
	}
	for i, d := range sc.Availability.Diurnal {
		c := capacity.Diurnal(d)
		if err := c.Validate(); err != nil {
			return at("diurnal", i, err)
		}
	}
	for i, f := range sc.Availability.Faults {
		c := capacity.Faults(f)
		if err := c.Validate(); err != nil {
			return at("faults", i, err)
		}
	}
	m := sc.Migration
	for _, f := range []struct {
		name string
		v    float64
	}{{"remote_gibps", m.RemoteGiBps}, {"memory_gibps", m.MemoryGiBps}, {"local_gibps", m.LocalGiBps}, {"checkpoint_interval", m.CheckpointInterval}} {
		if f.v < 0 || bad(f.v) {
			return sc.errAt("migration."+f.name, []string{"migration", f.name}, "want a number >= 0 (0: default), got %v", f.v)
		}
		// 1e-300 GiB/s once made a move take 1e300 s: a run that ends,
		// with figures no table can print.
		if f.name != "checkpoint_interval" && f.v > 0 && f.v < minGiBps {
			return sc.errAt("migration."+f.name, []string{"migration", f.name}, "want at least %.3g GiB/s (1 KiB/s; 0: default), got %v", minGiBps, f.v)
		}
	}
	if p := sc.Priorities; p != nil {
		if len(p.Classes) == 0 {
			return sc.errAt("priorities.classes", []string{"priorities"}, "missing: the priority classes")
		}
		if len(p.Weights) != 0 && len(p.Weights) != len(p.Classes) {
			return sc.errAt("priorities.weights", []string{"priorities", "weights"}, "%d weights for %d classes", len(p.Weights), len(p.Classes))
		}
		for _, w := range p.Weights {
			if !(w >= 0) || bad(w) {
				return sc.errAt("priorities.weights", []string{"priorities", "weights"}, "want numbers >= 0, got %v", w)
			}
		}
	}
	if s := sc.Sweep; s != nil {
		ok := false
		for _, p := range SweepParams {
			ok = ok || p == s.Param
		}
		if !ok {
			return sc.errAt("sweep.param", []string{"sweep", "param"}, "%q: want one of %s", s.Param, strings.Join(SweepParams, ", "))
		}
		if len(s.Values) == 0 {
			return sc.errAt("sweep.values", []string{"sweep"}, "missing: the values to sweep")
		}
		for i, v := range s.Values {
			if badSweepValue(v) {
				return sc.errAt(fmt.Sprintf("sweep.values[%d]", i), []string{"sweep", "values", fmt.Sprintf("[%d]", i)}, "want a finite number from 0 to 1e7, got %v", v)
			}
		}
	}
	return nil
}

// SetSweepValues replaces the values of the file's sweep, as
// `tide sim --points` does: the parameter stays the file's, so one point
// of a sweep can be rerun alone. The values are checked as the file's are.
func (sc *Scenario) SetSweepValues(values []float64) error {
	if sc.Sweep == nil {
		return fmt.Errorf("scenario %s has no sweep: --points picks values of a sweep's parameter", sc.File)
	}
	if len(values) == 0 {
		return fmt.Errorf("no sweep value given")
	}
	for _, v := range values {
		if badSweepValue(v) {
			return fmt.Errorf("sweep value %v of %s: want a finite number from 0 to 1e7", v, sc.Sweep.Param)
		}
	}
	sc.Sweep.Values = append([]float64(nil), values...)
	return nil
}

// path resolves a path of the file.
func (sc *Scenario) path(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(sc.Dir, p)
}
