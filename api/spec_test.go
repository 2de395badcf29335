package api

import (
	"encoding/json"
	"errors"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
)

func TestDecodeJobSpec(t *testing.T) {
	s, err := DecodeJobSpec([]byte(`{"name": "resnet", "command": ["python", "train.py"], "gpus": 2, "max_gpus": 4,
		"env": {"LR": "0.1"}, "estimate_s": 600, "deadline": "2030-01-02T03:04:05Z", "max_retries": 0, "batch_size": 256}`))
	if err != nil {
		t.Fatal(err)
	}
	if errs := s.Validate(); errs != nil {
		t.Fatalf("valid spec refused: %v", errs)
	}
	j, err := s.Job("j1", 10)
	if err != nil {
		t.Fatal(err)
	}
	if j.MinGPUs != 2 || j.MaxGPUs != 4 || j.Work != 600 || j.Unit != job.Seconds || j.Deadline != 1893553445 || j.Submit != 10 {
		t.Errorf("job %+v", j)
	}
	if *s.MaxRetries != 0 {
		t.Error("max_retries 0 lost")
	}
	for body, want := range map[string]string{
		``:                            "empty body",
		`{"command": ["x"], "zz": 1}`: "zz: unknown field",
		`{"gpus": "2"}`:               "gpus: want a number",
		`{"gpus": 1}{"gpus": 1}`:      "after the JSON value",
		`{"gpus": 1`:                  "truncated",
		`nux`:                         "malformed JSON",
	} {
		_, err := DecodeJobSpec([]byte(body))
		var de *DecodeError
		if !errors.As(err, &de) || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want a DecodeError with %q", body, err, want)
		}
	}
}

func TestValidateFields(t *testing.T) {
	two := 2
	for _, tc := range []struct {
		spec  JobSpec
		field string
	}{
		{JobSpec{GPUs: 1}, "command"},
		{JobSpec{Command: []string{""}, GPUs: 1}, "command"},
		{JobSpec{Command: []string{"x"}}, "gpus"},
		{JobSpec{Command: []string{"x"}, MinGPUs: 2, MaxGPUs: 1}, "min_gpus"},
		{JobSpec{Command: []string{"x"}, GPUs: 3, MinGPUs: 1, MaxGPUs: 2}, "gpus"},
		{JobSpec{Command: []string{"x"}, GPUs: 3, MaxGPUs: 2}, "min_gpus"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, Name: "a\x00b"}, "name"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, GPUType: "t 4"}, "gpu_type"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, Env: map[string]string{"CUDA_VISIBLE_DEVICES": "0"}}, "env"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, Tenant: "a b"}, "tenant"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, BatchSize: -1}, "batch_size"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, MaxRetries: &two, Workdir: "."}, "workdir"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, GPUShare: 1.5}, "gpu_share"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, GPUMemGiB: -2}, "gpu_mem_gib"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, MIG: "2g"}, "mig"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, MIG: "1g.5gb", GPUShare: 0.5}, "mig"},
		{JobSpec{Command: []string{"x"}, MinGPUs: 1, MaxGPUs: 2, GPUShare: 0.5}, "max_gpus"},
		// Outside UnixNano's years: 9999 once became no deadline at all.
		{JobSpec{Command: []string{"x"}, GPUs: 1, Deadline: "9999-01-01T00:00:00Z"}, "deadline"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, Deadline: "1600-01-01T00:00:00Z"}, "deadline"},
		{JobSpec{Command: []string{"x"}, GPUs: 1, Deadline: "2300-01-01T00:00:00Z"}, "deadline"},
	} {
		errs := tc.spec.Validate()
		if len(errs) == 0 || errs[0].Field != tc.field {
			t.Errorf("%+v: %v, want an error on %s", tc.spec, errs, tc.field)
		}
		// The field is named once: tide submit printed "gpu_share:
		// gpu_share: want a number in (0, 1)".
		if len(errs) > 0 && strings.HasPrefix(errs[0].Message, errs[0].Field+": ") {
			t.Errorf("%+v: message %q repeats its field %s", tc.spec, errs[0].Message, errs[0].Field)
		}
	}
}

// TestValidateNamesEveryField: a spec with bad GPU counts and a bad part
// of a GPU is told of both at once. The part's fields were checked only by
// job.Validate, which runs once every field is valid: a spec with gpus -1
// and gpu_share 1.5 heard of gpus alone (found by the server's random
// operations search, seed 5).
func TestValidateNamesEveryField(t *testing.T) {
	for _, tc := range []struct {
		spec   JobSpec
		fields []string
	}{
		{JobSpec{Command: []string{"x"}, GPUs: -1, GPUShare: 1.5}, []string{"gpus", "gpu_share"}},
		{JobSpec{Command: []string{"x"}, GPUs: -1, GPUMemGiB: -2}, []string{"gpus", "gpu_mem_gib"}},
		{JobSpec{Command: []string{"x"}, GPUs: -1, MIG: "5g.40gb"}, []string{"gpus", "mig"}},
		{JobSpec{Command: []string{"x"}, GPUs: 1, Deadline: "tomorrow", GPUShare: -0.5}, []string{"deadline", "gpu_share"}},
	} {
		var got []string
		for _, e := range tc.spec.Validate() {
			got = append(got, e.Field)
			if strings.HasPrefix(e.Message, e.Field+": ") {
				t.Errorf("%+v: message %q repeats its field %s", tc.spec, e.Message, e.Field)
			}
		}
		for _, f := range tc.fields {
			if !slices.Contains(got, f) {
				t.Errorf("%+v: errors on %v, want each of %v", tc.spec, got, tc.fields)
			}
		}
	}
}

func TestReportValidate(t *testing.T) {
	half := 0.5
	r := Report{Progress: &half, Throughput: 3}
	if errs := r.Validate(); errs != nil {
		t.Errorf("valid report refused: %v", errs)
	}
	if f, ok := (&Report{Step: 3, TotalSteps: 4}).Fraction(); !ok || f != 0.75 {
		t.Errorf("step fraction %v %v", f, ok)
	}
	if _, ok := (&Report{Message: "x"}).Fraction(); ok {
		t.Error("a report without progress gives a fraction")
	}
}

// FuzzDecodeJobSpec: any bytes either decode into a spec or give a
// DecodeError, never a panic; a spec Validate accepts always makes a job
// the scheduler accepts, and survives a JSON round trip unchanged.
func FuzzDecodeJobSpec(f *testing.F) {
	for _, seed := range []string{
		`{"command": ["python", "train.py"], "gpus": 1}`,
		`{"name": "x", "command": ["a"], "min_gpus": 1, "max_gpus": 8, "gpu_type": "a100", "estimate_s": 1e3}`,
		`{"command": ["a"], "gpus": 2, "env": {"A": "1"}, "deadline": "2030-01-01T00:00:00Z", "max_retries": 5}`,
		`{"command": [], "gpus": -1}`,
		`{"command": ["a"], "gpus": 1, "extra": true}`,
		`[]`, `null`, `{"gpus": 1e309}`, "{\"command\": [\"\\u0000\"]}",
		`{"command": ["a"], "gpus": 1, "gpu_share": 0.25}`, `{"command": ["a"], "gpus": 2, "mig": "3g.40gb"}`,
		`{"command": ["a"], "gpus": 1, "gpu_mem_gib": 8, "gpu_share": 0.1}`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := DecodeJobSpec(data)
		if err != nil {
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if errs := s.Validate(); len(errs) > 0 {
			for _, e := range errs {
				if e.Field == "" || e.Message == "" {
					t.Fatalf("field error without field or message: %+v", e)
				}
			}
			return
		}
		j, err := s.Job("j1", 0)
		if err != nil {
			t.Fatalf("valid spec, invalid job: %v", err)
		}
		if err := j.Validate(); err != nil {
			t.Fatalf("job fails Validate twice: %v", err)
		}
		enc, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := DecodeJobSpec(enc)
		if err != nil {
			t.Fatalf("re-decoding %s: %v", enc, err)
		}
		if !reflect.DeepEqual(normal(s), normal(s2)) {
			t.Fatalf("round trip changed the spec: %+v -> %+v", s, s2)
		}
	})
}

// normal maps empty maps to nil (omitempty drops them).
func normal(s *JobSpec) JobSpec {
	c := *s
	if len(c.Env) == 0 {
		c.Env = nil
	}
	return c
}

// TestUnknownFieldPath: an unknown key inside an object is named by its
// path; encoding/json names the key alone ("bogus" for a tenant's
// limits.bogus).
func TestUnknownFieldPath(t *testing.T) {
	for _, tc := range []struct {
		body string
		v    any
		want string
	}{
		{`{"name": "a", "limits": {"max_gpus": 2, "bogus": 1}}`, &NewTenant{}, "limits.bogus"},
		{`{"limits": {"bogus": 1}}`, &TenantUpdate{}, "limits.bogus"},
		{`{"bogus": 1, "limits": {}}`, &TenantUpdate{}, "bogus"},
		{`{"command": ["x"], "env": {"bogus": "1"}, "bogus": 2}`, &JobSpec{}, "bogus"}, // env's keys are its own
		{`{"command": ["x"], "GPUS": 1, "zz": 1}`, &JobSpec{}, "zz"},                   // keys match fields without regard to case
	} {
		err := DecodeStrict(strings.NewReader(tc.body), tc.v)
		var de *DecodeError
		if !errors.As(err, &de) || de.Field != tc.want || de.Msg != "unknown field" {
			t.Errorf("%s: %v, want %s: unknown field", tc.body, err, tc.want)
		}
	}
}
