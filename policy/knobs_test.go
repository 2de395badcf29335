package policy

import (
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/solver"
)

// TestKnobsDocumented: the knobs a policy reads with its defaults are the
// knobs it declares (Info.KnobList), so `tide policies NAME` and the
// unknown-knob error name exactly what the policy takes. It found
// undeclared knobs in fifo-perf, gavel-fifo, pollux and tidal, and four
// of tidal's knobs that `tide policies tidal` listed with no doc.
func TestKnobsDocumented(t *testing.T) {
	ctx := Context{Jobs: []*job.Job{{ID: "a", GPUs: 1, Duration: 100, Work: 100, Unit: job.Seconds}}}
	for _, i := range All() {
		if i.NeedsSolver && solver.Available() != nil {
			continue
		}
		opts := contract.NewOptions(i.Name, map[string]string{})
		if _, err := i.Build(ctx, opts); err != nil {
			t.Errorf("%s with its defaults: %v", i.Name, err)
			continue
		}
		read := opts.Read()
		var doc []string
		for _, k := range i.KnobList() {
			doc = append(doc, k.Key)
			if strings.TrimSpace(k.Doc) == "" {
				t.Errorf("%s declares knob %s=%s without saying what it does", i.Name, k.Key, k.Default)
			}
		}
		for _, k := range read {
			if !slices.Contains(doc, k) {
				t.Errorf("%s reads knob %s, which its Knobs do not declare (%q)", i.Name, k, i.Knobs)
			}
		}
		for _, k := range doc {
			if !slices.Contains(read, k) {
				t.Errorf("%s declares knob %s, which it does not read with its defaults", i.Name, k)
			}
		}
	}
}

// TestKnobDefaultsTyped: a policy whose knobs are a Go struct
// (Info.Defaults) declares, in Knobs, the defaults that struct holds, so
// `tide policies NAME` shows what the constructor gets without the knob.
func TestKnobDefaultsTyped(t *testing.T) {
	typed := 0
	for _, i := range All() {
		if i.Defaults == nil {
			continue
		}
		typed++
		declared := map[string]string{}
		for _, k := range i.KnobList() {
			declared[k.Key] = k.Default
		}
		v := reflect.ValueOf(i.Defaults)
		if v.Kind() != reflect.Struct {
			t.Errorf("%s: Defaults is a %T, want a struct", i.Name, i.Defaults)
			continue
		}
		var check func(v reflect.Value)
		check = func(v reflect.Value) {
			for f := range v.NumField() {
				sf, fv := v.Type().Field(f), v.Field(f)
				if sf.Anonymous && sf.Type.Kind() == reflect.Struct {
					check(fv)
					continue
				}
				key := sf.Tag.Get("knob")
				if key == "" {
					continue
				}
				if (fv.Kind() == reflect.Pointer || fv.Kind() == reflect.Slice || fv.Kind() == reflect.Map) && fv.IsNil() {
					continue // a default that depends on other knobs (a preset's)
				}
				d, ok := declared[key]
				if !ok {
					t.Errorf("%s: knob %s (field %s) is not declared", i.Name, key, sf.Name)
					continue
				}
				if got := specValue(fv.Interface()); got != d {
					t.Errorf("%s: knob %s declares default %q, the Go default is %q", i.Name, key, d, got)
				}
			}
		}
		check(v)
	}
	if typed == 0 {
		t.Fatal("no policy declares typed knobs: the test checks nothing")
	}
}

// specValue writes a knob's Go value as a spec writes it.
func specValue(v any) string {
	switch x := v.(type) {
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64)
	case []float64:
		var parts []string
		for _, f := range x {
			parts = append(parts, strconv.FormatFloat(f, 'g', -1, 64))
		}
		return strings.Join(parts, "/")
	}
	return fmt.Sprint(v)
}
