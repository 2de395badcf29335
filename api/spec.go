// Package api holds tide's HTTP/JSON API types (version 1, under /v1): the
// job spec a client submits, the views the server returns, the progress
// report a job sends, and a Go client. docs/api.md documents the protocol.
//
// The decoder is strict: unknown fields, trailing data and values of the
// wrong type are errors that name the field, and Validate returns one
// message per bad field, reusing job.Validate's wording for the fields the
// scheduler checks.
package api

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/tide-sched/tide/job"
)

// MaxBodyBytes is the largest request body the server reads (1 MiB).
const MaxBodyBytes = 1 << 20

// DefaultEstimate is the run time assumed for a job that gives none, s.
const DefaultEstimate = 3600

// Limits on a spec's sizes, so one request cannot make the server hold or
// log unbounded data.
const (
	maxName    = 128
	maxArgs    = 4096
	maxEnv     = 1024
	maxRetries = 100
	maxGPUs    = 1 << 16
	maxAfter   = 1024
	// MaxArrayIndex is the largest array index ($TIDE_ARRAY_INDEX).
	MaxArrayIndex = 1<<20 - 1
	// MaxArgBytes is the longest argument or NAME=VALUE string a process
	// may be given on Linux (MAX_ARG_STRLEN, with its NUL): a longer one
	// makes every launch fail with "argument list too long".
	MaxArgBytes = 128<<10 - 1
	// MaxExecBytes bounds the command and env together, leaving room
	// below the kernel's total (ARG_MAX, 2 MiB at the smallest usual
	// stack limit) for tide's own variables and the server's environment.
	MaxExecBytes = 512 << 10
)

// ExitNoRetry is the exit code (EX_CONFIG of sysexits.h) by which a job
// says it cannot run as configured (a module missing, say): tide fails it
// at once instead of retrying it.
const ExitNoRetry = 78

// JobSpec is what a client submits: a command and what it needs. The same
// fields are accepted in JSON (the API) and YAML (job files for the CLI).
type JobSpec struct {
	// Name is a label for humans; it need not be unique.
	Name string `json:"name,omitempty" yaml:"name"`
	// Command is the argv to run; Command[0] is looked up in PATH unless it
	// contains a slash (then relative to Workdir).
	Command []string `json:"command" yaml:"command"`
	// Workdir is the absolute working directory (default: the job's own
	// directory in the server's data directory).
	Workdir string `json:"workdir,omitempty" yaml:"workdir"`
	// Env is added to the job's environment. TIDE_* and
	// CUDA_VISIBLE_DEVICES are set by tide and may not be given.
	Env map[string]string `json:"env,omitempty" yaml:"env"`

	// GPUs is the GPU count a non-elastic policy gives the job. An elastic
	// job sets MinGPUs < MaxGPUs. Defaults as job.Validate: MinGPUs and
	// MaxGPUs default to GPUs, GPUs to MaxGPUs.
	GPUs    int    `json:"gpus,omitempty" yaml:"gpus"`
	MinGPUs int    `json:"min_gpus,omitempty" yaml:"min_gpus"`
	MaxGPUs int    `json:"max_gpus,omitempty" yaml:"max_gpus"`
	GPUType string `json:"gpu_type,omitempty" yaml:"gpu_type"`
	// GPUShare, GPUMemGiB and MIG ask for part of each GPU instead of a
	// whole one (docs/sharing.md): a share of its compute in (0, 1), its
	// memory in GiB, or a MIG profile such as "1g.10gb". Jobs sharing a
	// GPU see the same CUDA_VISIBLE_DEVICES. Such a job is rigid.
	GPUShare  float64 `json:"gpu_share,omitempty" yaml:"gpu_share"`
	GPUMemGiB float64 `json:"gpu_mem_gib,omitempty" yaml:"gpu_mem_gib"`
	MIG       string  `json:"mig,omitempty" yaml:"mig"`
	// JobType names what the job trains in the server's table of measured
	// pair throughputs (tide serve --pair-throughputs: a job type of
	// Gavel's, such as "ResNet-18 (batch size 64)"): the packing policies
	// read there how fast it runs beside another job on one GPU
	// (docs/sharing.md). Optional; a job without one is packed only once
	// its reports have measured the pair.
	JobType string `json:"job_type,omitempty" yaml:"job_type"`

	// Priority: larger is more important (policies that use priorities).
	Priority int `json:"priority,omitempty" yaml:"priority"`
	// EstimateS is the expected run time on GPUs GPUs, seconds
	// (default 3600). Policies that predict remaining time (SRTF,
	// Optimus) use it, scaled by the progress the job reports.
	EstimateS float64 `json:"estimate_s,omitempty" yaml:"estimate_s"`
	// Deadline is an RFC 3339 time by which the job should finish (EDF).
	Deadline string `json:"deadline,omitempty" yaml:"deadline"`
	// MaxRetries is how many times a job that exits non-zero is restarted
	// before it is marked failed (default: the server's --max-retries).
	// An exit with ExitNoRetry, or a Python import error, is not retried.
	MaxRetries *int `json:"max_retries,omitempty" yaml:"max_retries"`
	// BatchSize is the job's global batch size, samples (0 = unknown); it
	// sets the batch limits of the goodput model fitted from its reports.
	BatchSize int `json:"batch_size,omitempty" yaml:"batch_size"`
	// MaxBatchSize, above BatchSize, lets a policy that adapts batch sizes
	// (Pollux) choose the job's global batch, between BatchSize and it, at
	// each launch ($TIDE_BATCH_SIZE, $TIDE_LOCAL_BSZ, $TIDE_ACCUM_STEPS).
	MaxBatchSize int `json:"max_batch_size,omitempty" yaml:"max_batch_size"`
	// MaxLocalBsz is the largest per-GPU batch that fits in a GPU's
	// memory (0 = no limit); a larger one is split into gradient
	// accumulation steps.
	MaxLocalBsz int `json:"max_local_bsz,omitempty" yaml:"max_local_bsz"`
	// Tenant submits on behalf of a tenant; only the admin may set it.
	Tenant string `json:"tenant,omitempty" yaml:"tenant"`

	// After lists jobs (IDs) this one starts after: it waits until every
	// one has finished (exit 0). When one ends otherwise (failed,
	// cancelled, declined), this job fails without running, its reason
	// naming that dependency (Slurm's afterok).
	After []string `json:"after,omitempty" yaml:"after"`
	// ArrayIndex makes the job a task of an array: tide passes it on as
	// $TIDE_ARRAY_INDEX (tide submit --array 0-99 submits one job each).
	ArrayIndex *int `json:"array_index,omitempty" yaml:"array_index"`
	// TimeLimitS is a wall-clock limit, seconds: once the job's attempts
	// have run that long in all, it is stopped (SIGTERM, then SIGKILL
	// after the grace period) and fails. 0: no limit.
	TimeLimitS float64 `json:"time_limit_s,omitempty" yaml:"time_limit_s"`
	// Hold submits the job held: it does not start until released
	// (POST /v1/jobs/{id}/release).
	Hold bool `json:"hold,omitempty" yaml:"hold"`
}

// FieldError is one problem with one field of a request.
type FieldError struct {
	Field   string `json:"field"`
	Message string `json:"message"`
}

func (f FieldError) String() string { return f.Field + ": " + f.Message }

// DecodeError is a request body that could not be decoded.
type DecodeError struct {
	Field string // the field at fault, when known
	Msg   string
}

func (e *DecodeError) Error() string {
	if e.Field != "" {
		return e.Field + ": " + e.Msg
	}
	return e.Msg
}

// DecodeStrict decodes one JSON value from r into v: unknown fields,
// trailing data and mistyped values are *DecodeError. Errors from r (such
// as *http.MaxBytesError) are returned as they are.
func DecodeStrict(r io.Reader, v any) error {
	data, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		err = jsonError(err)
		if de := (*DecodeError)(nil); errors.As(err, &de) && de.Msg == "unknown field" {
			// encoding/json names the key alone: "bogus" for
			// {"limits": {"bogus": 1}}. The path says which object.
			if path := unknownPath(data, reflect.TypeOf(v), de.Field); path != "" {
				de.Field = path
			}
		}
		return err
	}
	var extra json.RawMessage
	if err := dec.Decode(&extra); err != io.EOF {
		if err == nil {
			return &DecodeError{Msg: "unexpected data after the JSON value"}
		}
		return jsonError(err)
	}
	return nil
}

func jsonError(err error) error {
	var syn *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.Is(err, io.EOF):
		return &DecodeError{Msg: "empty body: want a JSON object"}
	case errors.Is(err, io.ErrUnexpectedEOF):
		return &DecodeError{Msg: "truncated JSON"}
	case errors.As(err, &syn):
		return &DecodeError{Msg: fmt.Sprintf("malformed JSON at byte %d: %s", syn.Offset, strings.TrimPrefix(syn.Error(), "json: "))}
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			return &DecodeError{Msg: fmt.Sprintf("want a JSON %s, got %s", typ.Type, typ.Value)}
		}
		return &DecodeError{Field: field, Msg: fmt.Sprintf("want %s, got %s", typeName(typ.Type.String()), typ.Value)}
	}
	msg := err.Error()
	if f, ok := strings.CutPrefix(msg, "json: unknown field "); ok {
		return &DecodeError{Field: strings.Trim(f, `"`), Msg: "unknown field"}
	}
	if strings.HasPrefix(msg, "json: ") {
		return &DecodeError{Msg: strings.TrimPrefix(msg, "json: ")}
	}
	// Errors from the reader (oversized bodies, broken connections) pass
	// through unchanged so the caller can tell them apart.
	return err
}

func typeName(t string) string {
	switch t {
	case "int", "int64", "uint64", "float64":
		return "a number"
	case "string":
		return "a string"
	case "[]string":
		return "an array of strings"
	case "map[string]string":
		return "an object of strings"
	case "bool":
		return "true or false"
	}
	return t
}

// DecodeJobSpec reads a job spec as JSON (strictly, see DecodeStrict).
func DecodeJobSpec(data []byte) (*JobSpec, error) {
	var s JobSpec
	if err := DecodeStrict(bytes.NewReader(data), &s); err != nil {
		return nil, err
	}
	return &s, nil
}

// Validate checks the spec and returns one message per bad field (nil when
// it is valid). It fills nothing in; Job applies the defaults.
func (s *JobSpec) Validate() []FieldError {
	var errs []FieldError
	add := func(field, format string, a ...any) {
		errs = append(errs, FieldError{Field: field, Message: fmt.Sprintf(format, a...)})
	}
	if len(s.Name) > maxName {
		add("name", "at most %d bytes, got %d", maxName, len(s.Name))
	} else if !printable(s.Name) {
		add("name", "must be printable UTF-8")
	}
	if len(s.JobType) > maxName {
		add("job_type", "at most %d bytes, got %d", maxName, len(s.JobType))
	} else if !printable(s.JobType) {
		add("job_type", "must be printable UTF-8")
	}
	switch {
	case len(s.Command) == 0:
		add("command", "missing: want the argv to run, e.g. [\"python\", \"train.py\"]")
	case len(s.Command) > maxArgs:
		add("command", "at most %d arguments, got %d", maxArgs, len(s.Command))
	case s.Command[0] == "":
		add("command", "the program (command[0]) is empty")
	default:
		for i, a := range s.Command {
			if strings.IndexByte(a, 0) >= 0 || !utf8.ValidString(a) {
				add("command", "argument %d holds a NUL byte or invalid UTF-8", i)
				break
			}
		}
	}
	total := 0
	for i, a := range s.Command {
		total += len(a) + 1
		if len(a) > MaxArgBytes {
			add("command", "argument %d is %d bytes, over the %d a process may be given (Linux MAX_ARG_STRLEN): pass large data in a file", i, len(a), MaxArgBytes)
		}
	}
	for _, k := range sortedKeys(s.Env) {
		n := len(k) + 1 + len(s.Env[k])
		total += n + 1
		if n > MaxArgBytes {
			add("env", "%s=VALUE is %d bytes, over the %d a process may be given (Linux MAX_ARG_STRLEN): pass large data in a file", k, n, MaxArgBytes)
		}
	}
	if total > MaxExecBytes {
		add("command", "the command and env together are %d bytes, over tide's limit of %d: pass large data in a file", total, MaxExecBytes)
	}
	if s.Workdir != "" {
		if !filepath.IsAbs(s.Workdir) {
			add("workdir", "want an absolute path, got %q", s.Workdir)
		} else if strings.IndexByte(s.Workdir, 0) >= 0 {
			add("workdir", "holds a NUL byte")
		}
	}
	if len(s.Env) > maxEnv {
		add("env", "at most %d variables, got %d", maxEnv, len(s.Env))
	} else {
		for _, k := range sortedKeys(s.Env) {
			v := s.Env[k]
			switch {
			case !envName(k):
				add("env", "%q is not a variable name (letters, digits and _, not starting with a digit)", k)
			case strings.HasPrefix(k, "TIDE_") || k == "CUDA_VISIBLE_DEVICES":
				add("env", "%s is set by tide and may not be given", k)
			case strings.IndexByte(v, 0) >= 0:
				add("env", "the value of %s holds a NUL byte", k)
			}
		}
	}
	for _, g := range []struct {
		name string
		v    int
	}{{"gpus", s.GPUs}, {"min_gpus", s.MinGPUs}, {"max_gpus", s.MaxGPUs}} {
		if g.v < 0 {
			add(g.name, "want at least 1 GPU, got %d", g.v)
		} else if g.v > maxGPUs {
			add(g.name, "at most %d, got %d", maxGPUs, g.v)
		}
	}
	if s.GPUs == 0 && s.MaxGPUs == 0 {
		add("gpus", "missing: want at least 1 GPU")
	}
	if len(s.GPUType) > 64 || !printable(s.GPUType) || strings.ContainsAny(s.GPUType, " \t") {
		add("gpu_type", "want a GPU type such as t4 or a100, got %q", s.GPUType)
	}
	if math.IsNaN(s.EstimateS) || math.IsInf(s.EstimateS, 0) || s.EstimateS < 0 {
		add("estimate_s", "want a finite number of seconds > 0, got %v", s.EstimateS)
	}
	if s.Deadline != "" {
		if t, err := time.Parse(time.RFC3339, s.Deadline); err != nil {
			add("deadline", "want an RFC 3339 time such as 2026-01-02T15:04:05Z, got %q", s.Deadline)
		} else if _, err := job.LiveTime(t); err != nil {
			add("deadline", "%v", err)
		}
	}
	if s.MaxRetries != nil && (*s.MaxRetries < 0 || *s.MaxRetries > maxRetries) {
		add("max_retries", "want 0 to %d, got %d", maxRetries, *s.MaxRetries)
	}
	if s.BatchSize < 0 {
		add("batch_size", "want >= 0, got %d", s.BatchSize)
	}
	switch {
	case s.MaxBatchSize < 0:
		add("max_batch_size", "want >= 0, got %d", s.MaxBatchSize)
	case s.MaxBatchSize > 0 && s.BatchSize <= 0:
		add("max_batch_size", "needs batch_size, the batch the job starts with")
	case s.MaxBatchSize > 0 && s.MaxBatchSize < s.BatchSize:
		add("max_batch_size", "want at least batch_size (%d), got %d", s.BatchSize, s.MaxBatchSize)
	}
	if s.MaxLocalBsz < 0 {
		add("max_local_bsz", "want >= 0, got %d", s.MaxLocalBsz)
	}
	// The part of each GPU, field by field (job.Validate checks them
	// again, with how they go together, once every field is valid).
	if s.GPUShare != 0 && !(s.GPUShare > 0 && s.GPUShare < 1) {
		add("gpu_share", "want a number in (0, 1), got %v (for whole GPUs ask for a GPU count)", s.GPUShare)
	}
	if s.GPUMemGiB < 0 || math.IsNaN(s.GPUMemGiB) || math.IsInf(s.GPUMemGiB, 0) {
		add("gpu_mem_gib", "want a finite number >= 0, got %v", s.GPUMemGiB)
	}
	if s.MIG != "" {
		if _, _, err := job.ParseMIG(s.MIG); err != nil {
			add("mig", "%v", err)
		}
	}
	if len(s.After) > maxAfter {
		add("after", "at most %d jobs, got %d", maxAfter, len(s.After))
	}
	for _, id := range s.After {
		if !JobID(id) {
			add("after", "%q is not a job ID (such as j000042)", id)
			break
		}
	}
	if s.ArrayIndex != nil && (*s.ArrayIndex < 0 || *s.ArrayIndex > MaxArrayIndex) {
		add("array_index", "want 0 to %d, got %d", MaxArrayIndex, *s.ArrayIndex)
	}
	if math.IsNaN(s.TimeLimitS) || math.IsInf(s.TimeLimitS, 0) || s.TimeLimitS < 0 {
		add("time_limit_s", "want a finite number of seconds >= 0 (0: no limit), got %v", s.TimeLimitS)
	}
	if len(s.Tenant) > maxName || (s.Tenant != "" && !TenantName(s.Tenant)) {
		add("tenant", "want letters, digits, '-', '_' or '.', got %q", s.Tenant)
	}
	if len(errs) > 0 {
		return errs
	}
	// The scheduler's own checks, with job.Validate's messages.
	if _, err := s.Job("new", 0); err != nil {
		return []FieldError{jobField(err)}
	}
	return nil
}

// Job builds the scheduler's job from the spec: work is the estimate in
// seconds on GPUs GPUs (the duration model). The returned job has passed
// job.Validate; the error is job.Validate's.
func (s *JobSpec) Job(id string, submit float64) (*job.Job, error) {
	est := s.EstimateS
	if est == 0 {
		est = DefaultEstimate
	}
	j := &job.Job{ID: id, Submit: submit, Priority: s.Priority, GPUs: s.GPUs, MinGPUs: s.MinGPUs,
		MaxGPUs: s.MaxGPUs, GPUType: strings.ToLower(s.GPUType), BatchSize: s.BatchSize,
		Work: est, Unit: job.Seconds, Duration: est, Tenant: s.Tenant,
		Share: s.GPUShare, GPUMemGiB: s.GPUMemGiB, MIG: s.MIG, Model: s.JobType}
	if s.Deadline != "" {
		t, err := time.Parse(time.RFC3339, s.Deadline)
		if err != nil {
			return nil, fmt.Errorf("job %s: deadline: %w", id, err)
		}
		if j.Deadline, err = job.LiveTime(t); err != nil {
			return nil, fmt.Errorf("job %s: deadline: %w", id, err)
		}
	}
	if err := j.Validate(); err != nil {
		return nil, err
	}
	return j, nil
}

// jobField maps a job.Validate message ("job new: min gpus 3 > max gpus 2")
// to the spec field it is about, keeping the message.
func jobField(err error) FieldError {
	msg := err.Error()
	if _, rest, ok := strings.Cut(msg, ": "); ok && strings.HasPrefix(msg, "job ") {
		msg = rest
	}
	field := "spec"
	for _, m := range []struct{ prefix, field string }{
		{"min gpus", "min_gpus"}, {"max gpus", "max_gpus"}, {"gpus", "gpus"},
		{"work unit", "estimate_s"}, {"work", "estimate_s"}, {"duration", "estimate_s"},
		{"batch size", "batch_size"}, {"deadline", "deadline"}, {"id", "id"}, {"submit", "submit"},
		{"gpu_share", "gpu_share"}, {"gpu_mem_gib", "gpu_mem_gib"}, {"mig", "mig"}, {"a job with part of each GPU", "max_gpus"},
	} {
		if strings.HasPrefix(msg, m.prefix) {
			field = m.field
			msg = strings.TrimPrefix(msg, m.field+": ") // "gpu_share: want ...": the field is named once
			break
		}
	}
	return FieldError{Field: field, Message: msg}
}

// JobID reports whether s has the form of a job ID: "j" and digits.
func JobID(s string) bool {
	if len(s) < 2 || len(s) > 32 || s[0] != 'j' {
		return false
	}
	for _, r := range s[1:] {
		if r < '0' || r > '9' {
			return false
		}
	}
	return true
}

// TenantName reports whether s is a valid tenant name: 1 to 64 letters,
// digits, '-', '_' or '.'.
func TenantName(s string) bool {
	if s == "" || len(s) > 64 {
		return false
	}
	for _, r := range s {
		if !(r < utf8.RuneSelf && (unicode.IsLetter(r) || unicode.IsDigit(r) || r == '-' || r == '_' || r == '.')) {
			return false
		}
	}
	return true
}

func printable(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) {
			return false
		}
	}
	return true
}

func envName(k string) bool {
	if k == "" || len(k) > 256 {
		return false
	}
	for i, r := range k {
		ok := r == '_' || (r >= 'A' && r <= 'Z') || (r >= 'a' && r <= 'z') || (i > 0 && r >= '0' && r <= '9')
		if !ok {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// unknownPath finds, in the JSON value data decoded into t, the first key
// named name that t has no field for, and returns its path
// ("limits.bogus", "items[2].x"); "" when it finds none.
func unknownPath(data []byte, t reflect.Type, name string) string {
	var v any
	if json.Unmarshal(data, &v) != nil {
		return ""
	}
	return walkUnknown(v, t, "", name)
}

func walkUnknown(v any, t reflect.Type, path, name string) string {
	for t != nil && t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	if t == nil {
		return ""
	}
	switch x := v.(type) {
	case map[string]any:
		keys := make([]string, 0, len(x))
		for k := range x {
			keys = append(keys, k)
		}
		slices.Sort(keys) // one answer for a body with two unknown keys of a name
		for _, k := range keys {
			var ft reflect.Type
			switch t.Kind() {
			case reflect.Map:
				ft = t.Elem()
			case reflect.Struct:
				ft = jsonField(t, k)
				if ft == nil {
					if k == name {
						return joinPath(path, k)
					}
					continue
				}
			default:
				return ""
			}
			if p := walkUnknown(x[k], ft, joinPath(path, k), name); p != "" {
				return p
			}
		}
	case []any:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return ""
		}
		for i, e := range x {
			if p := walkUnknown(e, t.Elem(), fmt.Sprintf("%s[%d]", path, i), name); p != "" {
				return p
			}
		}
	}
	return ""
}

// jsonField is the type of struct t's field that encoding/json decodes
// key into (its tag's name, or the field's, matched without regard to
// case as encoding/json does), or nil.
func jsonField(t reflect.Type, key string) reflect.Type {
	for i := range t.NumField() {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		n, _, _ := strings.Cut(tag, ",")
		if n == "" {
			if f.Anonymous {
				if ft := f.Type; ft.Kind() == reflect.Struct {
					if et := jsonField(ft, key); et != nil {
						return et
					}
				}
				continue
			}
			n = f.Name
		}
		if strings.EqualFold(n, key) {
			return f.Type
		}
	}
	return nil
}

func joinPath(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}
