package trace

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-sched/tide/job"
)

// polluxEpochs is the number of epochs each Pollux application trains for
// (the shared data README, from the Pollux artifact's profiles).
var polluxEpochs = map[string]float64{
	"bert":        2,
	"cifar10":     100,
	"ncf":         10,
	"imagenet":    90,
	"deepspeech2": 80,
	"yolov3":      50,
}

// pollux: name,time,application,num_replicas,batch_size. The jobs are rigid
// at the tuned num_replicas; work is the application's epochs.
var polluxFormat = csvFormat{
	required: []string{"name", "time", "application", "num_replicas", "batch_size"},
	id:       "name",
	row: func(p *parser, r *row, j *job.Job, _ int) {
		j.ID = r.text("name")
		j.Submit = r.num("time")
		j.Model = r.text("application")
		j.GPUs = r.count("num_replicas", 1)
		j.MinGPUs, j.MaxGPUs = j.GPUs, j.GPUs
		j.BatchSize = r.count("batch_size", 0)
		j.Unit = job.Epochs
		if r.err == nil {
			e, ok := polluxEpochs[j.Model]
			if !ok {
				known := make([]string, 0, len(polluxEpochs))
				for k := range polluxEpochs {
					known = append(known, k)
				}
				slices.Sort(known)
				r.fail("application", "unknown application %q: want one of %s", j.Model, strings.Join(known, ", "))
			}
			j.Work = e
		}
	},
}

// phillyLayout is the timestamp layout of philly.csv (UTC assumed).
const phillyLayout = "2006-01-02 15:04:05"

func unixText(s float64) string {
	return time.Unix(int64(s), 0).UTC().Format(phillyLayout)
}

// philly: timestamp,duration,num_gpus,gpu_time,cluster. Submit is seconds
// since the earliest timestamp in the file; IDs are "philly-<data row index>".
var phillyFormat = csvFormat{
	required: []string{"timestamp", "duration", "num_gpus", "cluster"},
	optional: []string{"gpu_time"},
	shift:    true,
	row: func(p *parser, r *row, j *job.Job, index int) {
		p.buf = strconv.AppendInt(append(p.buf[:0], "philly-"...), int64(index), 10)
		j.ID = string(p.buf)
		ts := r.raw("timestamp")
		if r.err == nil {
			t, err := time.Parse(phillyLayout, ts)
			switch {
			case err != nil:
				r.fail("timestamp", "bad timestamp %q: want %q", ts, phillyLayout)
			case t.Unix() < 0:
				r.fail("timestamp", "timestamp %q is before 1970", ts)
			}
			j.Submit = float64(t.Unix())
		}
		j.Duration = r.pos("duration")
		j.Work, j.Unit = j.Duration, job.Seconds
		j.GPUs = r.count("num_gpus", 1)
		j.Tenant = r.text("cluster")
	},
}

// tiresias: job_id,num_gpu,submit_time,iterations,model_name,duration,interval.
// Work is the duration in seconds (iterations and interval are ignored).
// Tiresias's older tf_job.csv layout, which has the same columns among
// others, reads the same way.
var tiresiasFormat = csvFormat{
	required: []string{"job_id", "num_gpu", "submit_time", "duration"},
	optional: []string{"model_name"},
	id:       "job_id",
	row: func(p *parser, r *row, j *job.Job, _ int) {
		j.ID = r.text("job_id")
		j.GPUs = r.count("num_gpu", 1)
		j.Submit = r.num("submit_time")
		j.Model = r.optText("model_name")
		j.Duration = r.pos("duration")
		j.Work, j.Unit = j.Duration, job.Seconds
	},
}

// elasticflow: job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,
// duration, optionally real_iteration,real_duration (equal to iteration and
// duration in the shipped files, ignored) and best_effort. ddl is an absolute
// time; best_effort=1 means no deadline.
var elasticFlowFormat = csvFormat{
	required: []string{"job_id", "submit_time", "iteration", "model_name", "ddl", "batch_size", "num_gpu", "duration"},
	optional: []string{"best_effort", "real_iteration", "real_duration"},
	id:       "job_id",
	row: func(p *parser, r *row, j *job.Job, _ int) {
		j.ID = r.text("job_id")
		j.Submit = r.num("submit_time")
		j.Work, j.Unit = r.pos("iteration"), job.Iterations
		j.Model = r.text("model_name")
		ddl := r.num("ddl")
		j.BatchSize = r.count("batch_size", 0)
		j.GPUs = r.count("num_gpu", 1)
		j.Duration = r.num("duration")
		if r.optCount("best_effort", 0) == 0 {
			j.Deadline = r.deadline("ddl", ddl, j.Submit)
		}
	},
}

// itp: the Microsoft ITP traces of microsoft/elasticflow-traces.
// deadline/*.csv: job_id,submission_time,num_iteration,model_name,deadline,
// batch_size,num_gpu,duration (deadline absolute, work in iterations);
// raw/*.csv: job_id,submission_time,duration,num_gpu (work in seconds).
var itpFormat = csvFormat{
	required: []string{"job_id", "submission_time", "num_gpu", "duration"},
	optional: []string{"num_iteration", "model_name", "deadline", "batch_size"},
	need: func(h header) []string {
		if h.has("num_iteration") || h.has("deadline") {
			return []string{"num_iteration", "model_name", "deadline", "batch_size"}
		}
		return nil
	},
	id: "job_id",
	row: func(p *parser, r *row, j *job.Job, _ int) {
		j.ID = r.text("job_id")
		j.Submit = r.num("submission_time")
		j.GPUs = r.count("num_gpu", 1)
		if !r.h.has("num_iteration") {
			j.Duration = r.pos("duration")
			j.Work, j.Unit = j.Duration, job.Seconds
			return
		}
		j.Duration = r.num("duration")
		j.Work, j.Unit = r.pos("num_iteration"), job.Iterations
		j.Model = r.text("model_name")
		j.Deadline = r.deadline("deadline", r.num("deadline"), j.Submit)
		j.BatchSize = r.count("batch_size", 0)
	},
}

// Chronus priorities by job_type.
const (
	chronusStrict     = 2 // strict SLO: must meet its deadline
	chronusSoft       = 1 // soft SLO: utility falls after the first deadline
	chronusBestEffort = 0 // no deadline
)

// chronus: job_id,user,num_gpu,submit_time,iterations,model_name,duration,
// interval,expect_time_list,expect_value_list,best_effort,job_type.
// expect_time_list holds deadlines relative to submit_time, "-"-separated for
// soft jobs (the first is the full-utility one); best-effort jobs have none.
var chronusFormat = csvFormat{
	required: []string{"job_id", "user", "num_gpu", "submit_time", "iterations", "model_name", "duration", "expect_time_list", "job_type"},
	optional: []string{"interval", "expect_value_list", "best_effort"},
	id:       "job_id",
	row: func(p *parser, r *row, j *job.Job, _ int) {
		j.ID = r.text("job_id")
		j.Tenant = r.text("user")
		j.GPUs = r.count("num_gpu", 1)
		j.Submit = r.num("submit_time")
		j.Work, j.Unit = r.pos("iterations"), job.Iterations
		j.Model = r.text("model_name")
		j.Duration = r.num("duration")
		kind := strings.ToLower(r.raw("job_type"))
		if r.err != nil {
			return
		}
		switch kind {
		case "strict":
			j.Priority = chronusStrict
		case "soft":
			j.Priority = chronusSoft
		case "best", "best-effort", "best_effort", "besteffort":
			j.Priority = chronusBestEffort
			return
		default:
			r.fail("job_type", "unknown job type %q: want strict, soft or best", kind)
			return
		}
		list := r.raw("expect_time_list")
		first, _, _ := strings.Cut(list, "-")
		for _, s := range strings.Split(list, "-") {
			if v, msg := parseNum(strings.TrimSpace(s)); msg != "" || v <= 0 {
				r.fail("expect_time_list", "bad deadline list %q: want \"-\"-separated numbers of seconds > 0 after submit", list)
				return
			}
		}
		rel, _ := parseNum(strings.TrimSpace(first))
		j.Deadline = r.deadline("expect_time_list", j.Submit+rel, j.Submit)
		if kind == "soft" && r.err == nil {
			j.Utility = chronusUtility(r, j.Submit, list)
		}
	},
}

// chronusUtility reads a soft job's deadline options: expect_time_list
// (relative to submit) with expect_value_list, one value per deadline
// (Chronus's values are 10-8-5-2). Without values, or for a single deadline,
// it returns nil: the job has one deadline.
func chronusUtility(r *row, submit float64, list string) *job.Utility {
	times := strings.Split(list, "-")
	vals := r.raw("expect_value_list")
	if len(times) < 2 || vals == "" {
		return nil
	}
	parts := strings.Split(vals, "-")
	if len(parts) != len(times) {
		r.fail("expect_value_list", "%d values for %d deadlines in expect_time_list: want one each", len(parts), len(times))
		return nil
	}
	u := &job.Utility{}
	for i := range times {
		t, _ := parseNum(strings.TrimSpace(times[i]))
		v, msg := parseNum(strings.TrimSpace(parts[i]))
		if msg != "" || v < 0 || (i > 0 && v > u.Values[i-1]) || (i > 0 && submit+t <= u.Deadlines[i-1]) {
			r.fail("expect_value_list", "bad options %q for deadlines %q: want values >= 0, not increasing, for ascending deadlines", vals, list)
			return nil
		}
		u.Deadlines = append(u.Deadlines, submit+t)
		u.Values = append(u.Values, v)
	}
	return u
}

// tideColumns are the columns (CSV) and keys (JSON) of tide's own format.
var tideColumns = []string{"id", "submit", "tenant", "priority", "gpus", "min_gpus", "max_gpus",
	"gpu_type", "model", "batch_size", "work", "unit", "deadline", "duration", "cpus", "mem_gib",
	"gpu_share", "gpu_mem_gib", "mig"}

// tide-csv: see docs/trace-formats.md.
var tideCSVFormat = csvFormat{
	required: []string{"id", "submit", "gpus"},
	optional: tideColumns[2:],
	strict:   true,
	id:       "id",
	row: func(p *parser, r *row, j *job.Job, _ int) {
		j.ID = r.text("id")
		j.Submit = r.num("submit")
		j.Tenant = r.optText("tenant")
		if s := r.raw("priority"); s != "" {
			v, msg := parseInt(s, -maxInt)
			if msg != "" {
				r.fail("priority", "%s", msg)
			}
			j.Priority = v
		}
		j.GPUs = r.count("gpus", 1)
		j.MinGPUs = r.optCount("min_gpus", 0)
		j.MaxGPUs = r.optCount("max_gpus", 0)
		j.GPUType = r.optText("gpu_type")
		j.Model = r.optText("model")
		j.BatchSize = r.optCount("batch_size", 0)
		hasWork := r.raw("work") != ""
		if hasWork {
			j.Work = r.pos("work")
		}
		unit := r.raw("unit")
		j.Deadline = r.optNum("deadline")
		j.Duration = r.optNum("duration")
		j.CPUs = r.optNum("cpus")
		j.MemGiB = r.optNum("mem_gib")
		j.Share = readShareText(r)
		j.GPUMemGiB = r.optNum("gpu_mem_gib")
		j.MIG = r.optText("mig")
		if r.err != nil {
			return
		}
		if field, msg := tideCheck(j, hasWork, unit); msg != "" {
			r.fail(field, "%s", msg)
		}
	},
}

// tideCheck applies the rules shared by tide-csv and tide-jsonl once the
// values are parsed: work and unit go together, or a duration alone means
// seconds of work; GPU bounds; deadline after submit.
func tideCheck(j *job.Job, hasWork bool, unit string) (field, msg string) {
	switch {
	case hasWork && unit == "":
		return "unit", "missing: work needs a unit (iterations, samples, epochs or seconds)"
	case hasWork:
		// The constant, not the cell: a substring of the CSV line would
		// keep the whole line in memory for as long as the job lives.
		switch u := job.Unit(unit); u {
		case job.Iterations:
			j.Unit = job.Iterations
		case job.Samples:
			j.Unit = job.Samples
		case job.Epochs:
			j.Unit = job.Epochs
		case job.Seconds:
			j.Unit = job.Seconds
		default:
			return "unit", fmt.Sprintf("unknown unit %q: want iterations, samples, epochs or seconds", unit)
		}
	case unit != "":
		return "work", fmt.Sprintf("missing: unit %q given without work", unit)
	case j.Duration > 0:
		j.Work, j.Unit = j.Duration, job.Seconds
	default:
		return "work", "missing: want work and unit, or a duration (seconds of work)"
	}
	switch {
	case j.MaxGPUs > 0 && j.MinGPUs > j.MaxGPUs:
		return "min_gpus", fmt.Sprintf("min_gpus %d > max_gpus %d", j.MinGPUs, j.MaxGPUs)
	case j.MinGPUs > j.GPUs:
		return "gpus", fmt.Sprintf("gpus %d < min_gpus %d", j.GPUs, j.MinGPUs)
	case j.MaxGPUs > 0 && j.GPUs > j.MaxGPUs:
		return "gpus", fmt.Sprintf("gpus %d > max_gpus %d", j.GPUs, j.MaxGPUs)
	case j.Deadline != 0 && j.Deadline <= j.Submit:
		return "deadline", fmt.Sprintf("deadline %v is not after the submit time %v", j.Deadline, j.Submit)
	}
	return fractionCheck(j)
}
