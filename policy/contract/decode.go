package contract

import (
	"fmt"
	"math"
	"reflect"

	"github.com/tide-sched/tide/engine"
)

// Decode fills the struct k points to from the spec's knobs: each field
// tagged `knob:"key"` reads that knob, and keeps its value (the default)
// when the spec does not give it. Field types: float64 (finite), int (a
// whole number), bool, string, []float64 ("/"-separated), Weights, and *float64,
// *bool, *string for knobs whose default depends on others (left nil
// unless given); an embedded struct's fields are knobs too. Errors name the
// policy, the knob, the value given and what the knob wants. A field of
// another type is a programming error, reported as one.
func (o Options) Decode(k any) error {
	v := reflect.ValueOf(k)
	if v.Kind() != reflect.Pointer || v.Elem().Kind() != reflect.Struct {
		return fmt.Errorf("policy %s: knobs decoded into %T, want a pointer to a struct", o.policy, k)
	}
	return o.decode(v.Elem())
}

// decode fills the struct v (embedded structs too).
func (o Options) decode(v reflect.Value) error {
	for i := range v.NumField() {
		if sf := v.Type().Field(i); sf.Anonymous && sf.Type.Kind() == reflect.Struct {
			if err := o.decode(v.Field(i)); err != nil {
				return err
			}
			continue
		}
		key := v.Type().Field(i).Tag.Get("knob")
		if key == "" {
			continue
		}
		f := v.Field(i)
		switch f.Interface().(type) {
		case float64:
			x, err := o.Float(key, f.Float())
			if err != nil {
				return err
			}
			f.SetFloat(x)
		case int:
			x, err := o.Float(key, float64(f.Int()))
			if err != nil {
				return err
			}
			if x != math.Trunc(x) || math.Abs(x) > 1<<53 {
				s, _ := o.Lookup(key)
				return fmt.Errorf("policy %s: %s=%q: want a whole number", o.policy, key, s)
			}
			f.SetInt(int64(x))
		case bool:
			x, err := o.Bool(key, f.Bool())
			if err != nil {
				return err
			}
			f.SetBool(x)
		case string:
			f.SetString(o.String(key, f.String()))
		case []float64:
			x, err := o.Floats(key, f.Interface().([]float64))
			if err != nil {
				return err
			}
			f.Set(reflect.ValueOf(x))
		case Weights:
			x, err := o.weights(key, f.Interface().(Weights))
			if err != nil {
				return err
			}
			f.Set(reflect.ValueOf(x))
		case *float64, *bool, *string:
			// A pointer is a knob whose default depends on others (a
			// preset's): nil unless the spec gives it.
			if _, given := o.kv[key]; !given {
				o.used[key] = true
				continue
			}
			p := reflect.New(f.Type().Elem())
			var err error
			switch x := p.Interface().(type) {
			case *float64:
				*x, err = o.Float(key, 0)
			case *bool:
				*x, err = o.Bool(key, false)
			case *string:
				*x = o.String(key, "")
			}
			if err != nil {
				return err
			}
			f.Set(p)
		default:
			return fmt.Errorf("policy %s: knob %s is a %s field, which Decode cannot fill", o.policy, key, f.Type())
		}
	}
	return nil
}

// Typed adapts a constructor that takes its knobs as Go values to
// Info.Build: the spec's knobs are decoded once (Options.Decode) into a
// copy of def, the defaults, and build sees the typed struct only. (A
// constructor's error leaves no typed nil pointer in the policy.)
func Typed[K any, P engine.Policy](def K, build func(ctx Context, k K) (P, error)) func(Context, Options) (engine.Policy, error) {
	return func(ctx Context, o Options) (engine.Policy, error) {
		k := def
		if err := o.Decode(&k); err != nil {
			return nil, err
		}
		p, err := build(ctx, k)
		if err != nil {
			return nil, err
		}
		return p, nil
	}
}
