package report

import (
	"encoding/json"
	"io"
	"math"
	"reflect"
)

// Meta describes what a set of runs was replayed on. It heads summary.json
// and titles the HTML page.
type Meta struct {
	Trace     string `json:"trace"`
	Cluster   string `json:"cluster"`
	TotalGPUs int    `json:"total_gpus"`
	Seed      int64  `json:"seed"`
	Jobs      int    `json:"jobs"` // jobs in the trace
}

// MetaOf takes Meta from the first run: its trace, cluster, GPUs, seed and
// job count. It is the zero Meta for no runs.
func MetaOf(runs []*Run) Meta {
	for _, r := range runs {
		if r != nil {
			return Meta{Trace: r.Trace, Cluster: r.Cluster, TotalGPUs: r.TotalGPUs, Seed: r.Seed, Jobs: len(r.Jobs)}
		}
	}
	return Meta{}
}

// fill returns m with its zero fields taken from d.
func (m Meta) fill(d Meta) Meta {
	if m.Trace == "" {
		m.Trace = d.Trace
	}
	if m.Cluster == "" {
		m.Cluster = d.Cluster
	}
	if m.TotalGPUs == 0 {
		m.TotalGPUs = d.TotalGPUs
	}
	if m.Seed == 0 {
		m.Seed = d.Seed
	}
	if m.Jobs == 0 {
		m.Jobs = d.Jobs
	}
	return m
}

// jsonReport is summary.json: Meta's fields then "policies".
type jsonReport struct {
	Meta
	Policies []Summary `json:"policies"`
}

// WriteJSON writes meta and sums as one JSON object indented by two spaces:
// {"trace": ..., "cluster": ..., "total_gpus": ..., "seed": ..., "jobs": ...,
// "policies": [Summary, ...]}. The bytes depend only on the arguments. A
// float that is NaN or infinite is written as 0, or null for the optional
// (pointer) metrics, so the output is always valid JSON.
func WriteJSON(w io.Writer, meta Meta, sums []Summary) error {
	clean := make([]Summary, len(sums))
	for i := range sums {
		clean[i] = sanitize(sums[i])
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(jsonReport{Meta: meta, Policies: clean})
}

// sanitize returns s with non-finite float64 fields set to 0 and non-finite
// *float64 fields set to nil. It walks the fields by reflection so that
// metrics added later are covered too.
func sanitize(s Summary) Summary {
	v := reflect.ValueOf(&s).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		switch {
		case f.Kind() == reflect.Float64:
			f.SetFloat(finite(f.Float()))
		case f.Kind() == reflect.Pointer && f.Type().Elem().Kind() == reflect.Float64 && !f.IsNil():
			if x := f.Elem().Float(); math.IsNaN(x) || math.IsInf(x, 0) {
				f.SetZero()
			} else {
				f.Set(reflect.ValueOf(finitePtr(x))) // a copy: never alias the caller's value
			}
		}
	}
	return s
}
