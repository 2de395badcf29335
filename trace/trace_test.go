package trace

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
)

// errCase is an input that must fail with a ParseError at line, field,
// whose message contains msg.
type errCase struct {
	name   string
	in     string
	opt    Options
	line   int
	field  string
	msg    string
	format string // defaults to the test's format
}

func runErrCases(t *testing.T, format string, cases []errCase) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := format
			if c.format != "" {
				f = c.format
			}
			tr, err := Read(strings.NewReader(c.in), "in.txt", f, c.opt)
			if err == nil {
				t.Fatalf("got %d jobs, want an error at line %d field %q", len(tr.Jobs), c.line, c.field)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("got %T %v, want *ParseError", err, err)
			}
			if pe.File != "in.txt" || pe.Line != c.line || pe.Field != c.field || !strings.Contains(pe.Msg, c.msg) {
				t.Fatalf("got file %q line %d field %q msg %q\nwant file in.txt line %d field %q msg containing %q",
					pe.File, pe.Line, pe.Field, pe.Msg, c.line, c.field, c.msg)
			}
		})
	}
}

func mustRead(t *testing.T, format, in string, opt Options) []*job.Job {
	t.Helper()
	tr, err := Read(strings.NewReader(in), "in.txt", format, opt)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Format != format || tr.Name != "in.txt" {
		t.Fatalf("trace %q format %q, want in.txt, %s", tr.Name, tr.Format, format)
	}
	return tr.Jobs
}

func wantJobs(t *testing.T, got []*job.Job, want ...job.Job) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d jobs, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(*got[i], want[i]) {
			t.Errorf("job %d:\n got %+v\nwant %+v", i, *got[i], want[i])
		}
	}
}

func TestParseErrorText(t *testing.T) {
	for _, c := range []struct {
		e    ParseError
		want string
	}{
		{ParseError{"a.csv", 3, "gpus", "bad"}, "trace a.csv line 3 field gpus: bad"},
		{ParseError{"a.csv", 3, "", "bad"}, "trace a.csv line 3: bad"},
		{ParseError{"a.csv", 0, "", "bad"}, "trace a.csv: bad"},
	} {
		if got := c.e.Error(); got != c.want {
			t.Errorf("got %q, want %q", got, c.want)
		}
	}
}

const polluxHead = "name,time,application,num_replicas,batch_size\n"

func TestPollux(t *testing.T) {
	got := mustRead(t, Pollux, polluxHead+
		"cifar10-0,107,cifar10,6,2048\n"+
		"bert-1,110, bert ,1,12\n", Options{})
	wantJobs(t, got,
		job.Job{ID: "cifar10-0", Submit: 107, Model: "cifar10", GPUs: 6, MinGPUs: 6, MaxGPUs: 6, BatchSize: 2048, Work: 100, Unit: job.Epochs},
		job.Job{ID: "bert-1", Submit: 110, Model: "bert", GPUs: 1, MinGPUs: 1, MaxGPUs: 1, BatchSize: 12, Work: 2, Unit: job.Epochs},
	)
	runErrCases(t, Pollux, []errCase{
		{name: "empty", in: "", line: 1, msg: "empty file"},
		{name: "header only", in: polluxHead, line: 2, msg: "no jobs"},
		{name: "missing column", in: "name,time,application,num_replicas\nx,1,bert,1\n", line: 1, field: "batch_size",
			msg: `missing column "batch_size"; the header is "name,time,application,num_replicas"`},
		{name: "bad number", in: polluxHead + "a,abc,bert,1,1\n", line: 2, field: "time", msg: `bad number "abc": want a number >= 0`},
		{name: "negative", in: polluxHead + "a,-5,bert,1,1\n", line: 2, field: "time", msg: `negative number "-5"`},
		{name: "NaN", in: polluxHead + "a,NaN,bert,1,1\n", line: 2, field: "time", msg: "finite"},
		{name: "Inf", in: polluxHead + "a,1,bert,1,1\nb,+Inf,bert,1,1\n", line: 3, field: "time", msg: "finite"},
		{name: "zero GPUs", in: polluxHead + "a,1,bert,0,1\n", line: 2, field: "num_replicas", msg: "between 1 and"},
		{name: "fractional GPUs", in: polluxHead + "a,1,bert,1.5,1\n", line: 2, field: "num_replicas", msg: `bad integer "1.5"`},
		{name: "unknown application", in: polluxHead + "a,1,gpt9,1,1\n", line: 2, field: "application",
			msg: `unknown application "gpt9": want one of bert, cifar10, deepspeech2, imagenet, ncf, yolov3`},
		{name: "missing value", in: polluxHead + ",1,bert,1,1\n", line: 2, field: "name", msg: "missing value"},
		{name: "duplicate id", in: polluxHead + "a,1,bert,1,1\nb,2,bert,1,1\na,3,bert,1,1\n", line: 4, field: "name",
			msg: `duplicate id "a" (first on line 2)`},
		{name: "unsorted", in: polluxHead + "a,5,bert,1,1\nb,2,bert,1,1\n", line: 3, msg: "pass --sort"},
		{name: "field count", in: polluxHead + "a,5,bert,1\n", line: 2, msg: "row has 4 fields, the header has 5"},
		{name: "csv syntax", in: polluxHead + "a,5,b\"ert,1,1\n", line: 2, msg: "bad CSV"},
		{name: "duplicate column", in: "name,time,name\n", line: 1, field: "name", msg: "twice"},
		{name: "all skipped", in: polluxHead + "a,x,bert,1,1\n", opt: Options{SkipBad: true}, line: 3, msg: "all 1 rows were skipped"},
		{name: "unsorted with SkipBad", in: polluxHead + "a,5,bert,1,1\nb,2,bert,1,1\n", opt: Options{SkipBad: true}, line: 3, msg: "not sorted"},
	})
}

func TestSkipBadAndSort(t *testing.T) {
	var warns []string
	opt := Options{SkipBad: true, Sort: true, Warn: func(m string) { warns = append(warns, m) }}
	got := mustRead(t, Pollux, polluxHead+
		"a,50,bert,1,1\n"+
		"b,x,bert,1,1\n"+ // bad number
		"c,10,bert,1,1\n"+
		"a,5,bert,1,1\n"+ // duplicate
		"d,10,ncf,1,1\n"+
		"e,1,nope,1,1\n", opt) // unknown application
	var ids []string
	for _, j := range got {
		ids = append(ids, j.ID)
	}
	if want := []string{"c", "d", "a"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("ids %v, want %v (stable sort by submit)", ids, want)
	}
	want := []string{
		"trace in.txt line 3 field time: bad number \"x\"",
		"trace in.txt line 5 field name: duplicate id \"a\" (first on line 2)",
		"trace in.txt line 7 field application: unknown application \"nope\"",
	}
	if len(warns) != len(want) {
		t.Fatalf("warnings %q, want %d", warns, len(want))
	}
	for i := range want {
		if !strings.HasPrefix(warns[i], want[i]) || !strings.HasSuffix(warns[i], "(row skipped)") {
			t.Errorf("warning %d: %q, want prefix %q", i, warns[i], want[i])
		}
	}
	// A nil Warn is fine.
	mustRead(t, Pollux, polluxHead+"b,x,bert,1,1\nc,10,bert,1,1\n", Options{SkipBad: true})
}

const phillyHead = "timestamp,duration,num_gpus,gpu_time,cluster\n"

func TestPhilly(t *testing.T) {
	in := phillyHead +
		"2017-10-09 07:01:55,66.0,1,66.0,11cb48\n" +
		"2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n" +
		"2017-10-09 07:01:55,10,1,10,11cb48\n"
	got := mustRead(t, Philly, in, Options{Sort: true})
	wantJobs(t, got,
		job.Job{ID: "philly-1", Submit: 0, Tenant: "6214e9", GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Work: 2951, Unit: job.Seconds, Duration: 2951},
		job.Job{ID: "philly-0", Submit: 2932, Tenant: "11cb48", GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 66, Unit: job.Seconds, Duration: 66},
		job.Job{ID: "philly-2", Submit: 2932, Tenant: "11cb48", GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 10, Unit: job.Seconds, Duration: 10},
	)
	// gpu_time is optional.
	got = mustRead(t, Philly, "cluster,num_gpus,duration,timestamp\nvc,1,5,2017-10-09 07:01:55\n", Options{})
	wantJobs(t, got, job.Job{ID: "philly-0", Tenant: "vc", GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 5, Unit: job.Seconds, Duration: 5})

	runErrCases(t, Philly, []errCase{
		{name: "unsorted", in: in, line: 3,
			msg: "submit times are not sorted: time 2017-10-09 06:13:03 comes after time 2017-10-09 07:01:55 on line 2; sort the file, or pass --sort"},
		{name: "bad timestamp", in: phillyHead + "2017-10-09T07:01:55,66.0,1,66.0,x\n", line: 2, field: "timestamp", msg: `bad timestamp "2017-10-09T07:01:55"`},
		{name: "before 1970", in: phillyHead + "1960-10-09 07:01:55,66.0,1,66.0,x\n", line: 2, field: "timestamp", msg: "before 1970"},
		{name: "zero duration", in: phillyHead + "2017-10-09 07:01:55,0.0,1,0,x\n", line: 2, field: "duration", msg: "want a number > 0, got 0.0"},
		{name: "zero GPUs", in: phillyHead + "2017-10-09 07:01:55,3,0,0,x\n", line: 2, field: "num_gpus", msg: `integer "0" out of range`},
		{name: "missing cluster", in: "timestamp,duration,num_gpus\n", line: 1, field: "cluster", msg: "missing column"},
	})
}

func TestTiresias(t *testing.T) {
	got := mustRead(t, Tiresias, "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n"+
		"0,1,0,606,vgg19,164,30\r\n"+
		"1,8,30,133,vgg11,147,23\r\n", Options{})
	wantJobs(t, got,
		job.Job{ID: "0", Submit: 0, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Model: "vgg19", Work: 164, Unit: job.Seconds, Duration: 164},
		job.Job{ID: "1", Submit: 30, GPUs: 8, MinGPUs: 8, MaxGPUs: 8, Model: "vgg11", Work: 147, Unit: job.Seconds, Duration: 147},
	)
	runErrCases(t, Tiresias, []errCase{
		{name: "missing duration", in: "job_id,num_gpu,submit_time\n0,1,0\n", line: 1, field: "duration", msg: "missing column"},
		{name: "bad gpus", in: "job_id,num_gpu,submit_time,duration\n0,one,0,5\n", line: 2, field: "num_gpu", msg: `bad integer "one"`},
		{name: "zero duration", in: "job_id,num_gpu,submit_time,duration\n0,1,0,0\n", line: 2, field: "duration", msg: "> 0"},
	})
}

const efHead = "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration\n"

func TestElasticFlow(t *testing.T) {
	got := mustRead(t, ElasticFlow, efHead+"0,3715485,2011,cifar10,3719996,4096,1,5644\n", Options{})
	wantJobs(t, got, job.Job{ID: "0", Submit: 3715485, Model: "cifar10", BatchSize: 4096, GPUs: 1, MinGPUs: 1, MaxGPUs: 1,
		Work: 2011, Unit: job.Iterations, Deadline: 3719996, Duration: 5644})

	got = mustRead(t, ElasticFlow, "job_id,submit_time,real_iteration,model_name,ddl,batch_size,num_gpu,real_duration,duration,iteration\n"+
		"0,0,1282877,vgg16,771220,256,1,976570,976570,1282877\n", Options{})
	wantJobs(t, got, job.Job{ID: "0", Model: "vgg16", BatchSize: 256, GPUs: 1, MinGPUs: 1, MaxGPUs: 1,
		Work: 1282877, Unit: job.Iterations, Deadline: 771220, Duration: 976570})

	got = mustRead(t, ElasticFlow, "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration,best_effort\n"+
		"0,0,77215,resnet50_cifar10,4426,256,1,3930,0\n"+
		"1,10,100,resnet50_cifar10,0,256,1,3930,1\n", Options{})
	if got[0].Deadline != 4426 || got[1].Deadline != 0 {
		t.Errorf("deadlines %v, %v; want 4426 and none for the best-effort job", got[0].Deadline, got[1].Deadline)
	}
	runErrCases(t, ElasticFlow, []errCase{
		{name: "deadline before submit", in: efHead + "0,100,2011,cifar10,100,4096,1,5644\n", line: 2, field: "ddl",
			msg: "deadline 100 is not after the submit time 100"},
		{name: "zero iterations", in: efHead + "0,100,0,cifar10,200,4096,1,5644\n", line: 2, field: "iteration", msg: "> 0"},
		{name: "missing ddl", in: "job_id,submit_time,iteration,model_name,batch_size,num_gpu,duration\n", line: 1, field: "ddl", msg: "missing column"},
		{name: "bad best_effort", in: "job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration,best_effort\n" +
			"0,0,77215,m,4426,256,1,3930,yes\n", line: 2, field: "best_effort", msg: `bad integer "yes"`},
	})
}

func TestITP(t *testing.T) {
	got := mustRead(t, ITP, "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n"+
		"bdd6,3715485,3249,deepspeech2,3716178,32,1,1075\n", Options{})
	wantJobs(t, got, job.Job{ID: "bdd6", Submit: 3715485, Model: "deepspeech2", BatchSize: 32, GPUs: 1, MinGPUs: 1, MaxGPUs: 1,
		Work: 3249, Unit: job.Iterations, Deadline: 3716178, Duration: 1075})
	got = mustRead(t, ITP, "job_id,submission_time,duration,num_gpu\nx1,1932025,2429,64\nx2,2000581,1532,1", Options{})
	wantJobs(t, got,
		job.Job{ID: "x1", Submit: 1932025, GPUs: 64, MinGPUs: 64, MaxGPUs: 64, Work: 2429, Unit: job.Seconds, Duration: 2429},
		job.Job{ID: "x2", Submit: 2000581, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 1532, Unit: job.Seconds, Duration: 1532},
	)
	runErrCases(t, ITP, []errCase{
		{name: "deadline file without deadline", in: "job_id,submission_time,num_iteration,model_name,batch_size,num_gpu,duration\n",
			line: 1, field: "deadline", msg: "missing column"},
		{name: "deadline before submit", in: "job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\n" +
			"a,10,5,m,9,32,1,5\n", line: 2, field: "deadline", msg: "not after the submit time"},
		{name: "raw zero duration", in: "job_id,submission_time,duration,num_gpu\nx,1,0,1\n", line: 2, field: "duration", msg: "> 0"},
	})
}

const chronusHead = "job_id,user,num_gpu,submit_time,iterations,model_name,duration,interval,expect_time_list,expect_value_list,best_effort,job_type\n"

func TestChronus(t *testing.T) {
	got := mustRead(t, Chronus, chronusHead+
		"0,vc_a,1,5601,5530,mobilenet_v2,96,5,159-189-229-289,10-8-5-2,0,soft\n"+
		"1,vc_b,4,7505,760,alexnet,106,6,235,10,0,strict\n"+
		"2,vc_a,1,14341,3621,alexnet,30,17,14341,10,1,best\n", Options{})
	// The soft job's options: the file's relative deadlines made absolute,
	// with their values.
	if u := got[0].Utility; u == nil || !slices.Equal(u.Deadlines, []float64{5601 + 159, 5601 + 189, 5601 + 229, 5601 + 289}) ||
		!slices.Equal(u.Values, []float64{10, 8, 5, 2}) {
		t.Fatalf("soft job utility %+v", got[0].Utility)
	}
	if got[1].Utility != nil {
		t.Fatalf("strict job has utility %+v", got[1].Utility)
	}
	got[0].Utility = nil
	wantJobs(t, got,
		job.Job{ID: "0", Tenant: "vc_a", Priority: 1, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Submit: 5601, Model: "mobilenet_v2",
			Work: 5530, Unit: job.Iterations, Deadline: 5601 + 159, Duration: 96},
		job.Job{ID: "1", Tenant: "vc_b", Priority: 2, GPUs: 4, MinGPUs: 4, MaxGPUs: 4, Submit: 7505, Model: "alexnet",
			Work: 760, Unit: job.Iterations, Deadline: 7505 + 235, Duration: 106},
		job.Job{ID: "2", Tenant: "vc_a", Priority: 0, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Submit: 14341, Model: "alexnet",
			Work: 3621, Unit: job.Iterations, Duration: 30},
	)
	runErrCases(t, Chronus, []errCase{
		{name: "zero GPUs", in: chronusHead + "0,vc_a,0,5601,5530,m,96,5,159,10,0,strict\n", line: 2, field: "num_gpu", msg: "out of range"},
		{name: "job type", in: chronusHead + "0,vc_a,1,5601,5530,m,96,5,159,10,0,urgent\n", line: 2, field: "job_type", msg: `unknown job type "urgent"`},
		{name: "deadline list", in: chronusHead + "0,vc_a,1,5601,5530,m,96,5,159--189,10,0,soft\n", line: 2, field: "expect_time_list", msg: `bad deadline list "159--189"`},
		{name: "zero deadline", in: chronusHead + "0,vc_a,1,5601,5530,m,96,5,0,10,0,strict\n", line: 2, field: "expect_time_list", msg: "bad deadline list"},
		{name: "value count", in: chronusHead + "0,vc_a,1,5601,5530,m,96,5,159-189,10,0,soft\n", line: 2, field: "expect_value_list", msg: "1 values for 2 deadlines"},
		{name: "values rise", in: chronusHead + "0,vc_a,1,5601,5530,m,96,5,159-189,5-8,0,soft\n", line: 2, field: "expect_value_list", msg: "not increasing"},
		{name: "missing user", in: "job_id,num_gpu,submit_time,iterations,model_name,duration,expect_time_list,job_type\n", line: 1, field: "user", msg: "missing column"},
	})
}

func TestGavel(t *testing.T) {
	var warns []string
	opt := Options{Warn: func(m string) { warns = append(warns, m) }}
	got := mustRead(t, Gavel,
		"ResNet-18 (batch size 64)\tpython3 main.py\timage_classification/cifar10\t--num_steps\t1\t100387\t1\t1\t-1.000000\t0\n"+
			"\n"+
			"LM (batch size 10)\tpython main.py\tlanguage_modeling\t--steps\t1\t490093\t2\t3\t-1.000000\t7.5\n", opt)
	wantJobs(t, got,
		job.Job{ID: "0", Model: "ResNet-18 (batch size 64)", GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Priority: 1, Work: 100387, Unit: job.Iterations},
		job.Job{ID: "1", Submit: 7.5, Model: "LM (batch size 10)", GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Priority: 3, Work: 490093, Unit: job.Iterations},
	)
	if len(warns) != 0 {
		t.Errorf("unexpected warnings %q", warns)
	}
	got = mustRead(t, Gavel,
		"Transformer (batch size 128)\tcd %s && python3 train.py\t-step\t1\t95121\t0.000000\t4\n", Options{})
	wantJobs(t, got, job.Job{ID: "0", Model: "Transformer (batch size 128)", GPUs: 4, MinGPUs: 4, MaxGPUs: 4, Work: 95121, Unit: job.Iterations})
	got = mustRead(t, Gavel, "A\tcmd\t-n\t1\t10\t2\t1\t-1\t3\n", Options{})
	wantJobs(t, got, job.Job{ID: "0", Submit: 3, Model: "A", GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Priority: 1, Work: 10, Unit: job.Iterations})

	warns = nil
	got = mustRead(t, Gavel, "A\tcmd\t-n\t1\t10\t1\t0.5\t1.2\t3\n", opt)
	if got[0].Priority != 0 || got[0].Deadline != 0 {
		t.Errorf("priority %d deadline %v, want 0 and 0", got[0].Priority, got[0].Deadline)
	}
	if len(warns) != 2 || !strings.Contains(warns[0], "non-integer priority_weight") || !strings.Contains(warns[1], "no deadline is set") {
		t.Errorf("warnings %q, want notes on the weight and the SLO", warns)
	}
	const row10 = "A\tcmd\tdir\t-n\t1\t10\t1\t1\t-1\t0\n"
	runErrCases(t, Gavel, []errCase{
		{name: "empty", in: "\n\n", line: 1, msg: "empty file"},
		{name: "columns", in: "A\tcmd\t5\n", line: 1, msg: "want 7, 9 or 10 tab-separated columns (Gavel trace), got 3"},
		{name: "row columns", in: row10 + "A\tcmd\t-n\t1\t10\t0\t1\n", line: 2, msg: "row has 7 tab-separated columns, the first row has 10"},
		{name: "steps", in: row10 + "A\tcmd\tdir\t-n\t1\t0\t1\t1\t-1\t0\n", line: 2, field: "total_steps", msg: "> 0"},
		{name: "scale", in: "A\tcmd\t-n\t1\t10\t0\t0\n", line: 1, field: "scale_factor", msg: "out of range"},
		{name: "arrival", in: row10 + "A\tcmd\tdir\t-n\t1\t10\t1\t1\t-1\tsoon\n", line: 2, field: "arrival_time", msg: `bad number "soon"`},
		{name: "weight", in: "A\tcmd\tdir\t-n\t1\t10\t1\t-2\t-1\t0\n", line: 1, field: "priority_weight", msg: "negative"},
		{name: "SLO", in: "A\tcmd\tdir\t-n\t1\t10\t1\t1\tNaN\t0\n", line: 1, field: "SLO", msg: "finite"},
		{name: "model", in: "\tcmd\tdir\t-n\t1\t10\t1\t1\t-1\t0\n", line: 1, field: "job_type", msg: "missing"},
		{name: "unsorted", in: "A\tcmd\tdir\t-n\t1\t10\t1\t1\t-1\t5\n" + row10, line: 2, msg: "--sort"},
	})
}

const tideHead = "id,submit,tenant,priority,gpus,min_gpus,max_gpus,gpu_type,model,batch_size,work,unit,deadline,duration\n"

func TestTideCSV(t *testing.T) {
	got := mustRead(t, TideCSV, tideHead+
		"a,0,team-a,2,4,2,8,v100,cifar10,512,100,epochs,7200,3600\n"+
		"b,5,,-1,1,,,,,,,,,90\n"+
		`"c,1",6,,,2,,,,"res,net",,1e6,samples,,`+"\n", Options{})
	wantJobs(t, got,
		job.Job{ID: "a", Submit: 0, Tenant: "team-a", Priority: 2, GPUs: 4, MinGPUs: 2, MaxGPUs: 8, GPUType: "v100", Model: "cifar10",
			BatchSize: 512, Work: 100, Unit: job.Epochs, Deadline: 7200, Duration: 3600},
		job.Job{ID: "b", Submit: 5, Priority: -1, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 90, Unit: job.Seconds, Duration: 90},
		job.Job{ID: "c,1", Submit: 6, GPUs: 2, MinGPUs: 2, MaxGPUs: 2, Model: "res,net", Work: 1e6, Unit: job.Samples},
	)
	// Column order is free and optional columns may be left out.
	got = mustRead(t, TideCSV, "unit,work,gpus,submit,id,min_gpus\niterations,10,3,0,x,0\n", Options{})
	wantJobs(t, got, job.Job{ID: "x", GPUs: 3, MinGPUs: 3, MaxGPUs: 3, Work: 10, Unit: job.Iterations})

	const h = "id,submit,gpus,min_gpus,max_gpus,work,unit,deadline,duration,priority\n"
	runErrCases(t, TideCSV, []errCase{
		{name: "unknown column", in: "id,submit,gpus,color\n", line: 1, field: "color", msg: `unknown column "color"`},
		{name: "missing gpus", in: "id,submit,work,unit\n", line: 1, field: "gpus", msg: `missing column "gpus"; the header is "id,submit,work,unit"`},
		{name: "missing gpus value", in: h + "a,0,,,,1,seconds,,,\n", line: 2, field: "gpus", msg: "missing value"},
		{name: "work without unit", in: h + "a,0,1,,,10,,,,\n", line: 2, field: "unit", msg: "work needs a unit"},
		{name: "unit without work", in: h + "a,0,1,,,,epochs,,5,\n", line: 2, field: "work", msg: `unit "epochs" given without work`},
		{name: "no work", in: h + "a,0,1,,,,,,,\n", line: 2, field: "work", msg: "want work and unit, or a duration"},
		{name: "bad unit", in: h + "a,0,1,,,10,steps,,,\n", line: 2, field: "unit", msg: `unknown unit "steps"`},
		{name: "zero work", in: h + "a,0,1,,,0,epochs,,,\n", line: 2, field: "work", msg: "> 0"},
		{name: "min > max", in: h + "a,0,4,8,2,10,epochs,,,\n", line: 2, field: "min_gpus", msg: "min_gpus 8 > max_gpus 2"},
		{name: "gpus > max", in: h + "a,0,4,,2,10,epochs,,,\n", line: 2, field: "gpus", msg: "gpus 4 > max_gpus 2"},
		{name: "gpus < min", in: h + "a,0,4,6,,10,epochs,,,\n", line: 2, field: "gpus", msg: "gpus 4 < min_gpus 6"},
		{name: "deadline", in: h + "a,10,1,,,10,epochs,10,,\n", line: 2, field: "deadline", msg: "not after the submit time"},
		{name: "negative duration", in: h + "a,10,1,,,10,epochs,,-1,\n", line: 2, field: "duration", msg: "negative"},
		{name: "priority", in: h + "a,10,1,,,10,epochs,,,high\n", line: 2, field: "priority", msg: `bad integer "high"`},
		{name: "duplicate", in: h + "a,10,1,,,10,epochs,,,\na,10,1,,,10,epochs,,,\n", line: 3, field: "id", msg: "duplicate id"},
		{name: "unsorted", in: h + "a,10,1,,,10,epochs,,,\nb,9,1,,,10,epochs,,,\n", line: 3, msg: "--sort"},
	})
}

func TestTideJSONL(t *testing.T) {
	got := mustRead(t, TideJSONL,
		`{"id":"a","submit":0,"tenant":"team-a","priority":2,"gpus":4,"min_gpus":2,"max_gpus":8,"gpu_type":"v100","model":"cifar10","batch_size":512,"work":100,"unit":"epochs","deadline":7200,"duration":3600}`+"\n"+
			"\n"+
			`{"id":"b","submit":5,"gpus":1,"duration":90}`+"\r\n", Options{})
	wantJobs(t, got,
		job.Job{ID: "a", Submit: 0, Tenant: "team-a", Priority: 2, GPUs: 4, MinGPUs: 2, MaxGPUs: 8, GPUType: "v100", Model: "cifar10",
			BatchSize: 512, Work: 100, Unit: job.Epochs, Deadline: 7200, Duration: 3600},
		job.Job{ID: "b", Submit: 5, GPUs: 1, MinGPUs: 1, MaxGPUs: 1, Work: 90, Unit: job.Seconds, Duration: 90},
	)
	const ok = `{"id":"a","submit":0,"gpus":1,"duration":9}` + "\n"
	runErrCases(t, TideJSONL, []errCase{
		{name: "empty", in: "", line: 1, msg: "empty file"},
		{name: "unknown key", in: ok + `{"id":"b","submit":0,"gpus":1,"duration":9,"colour":"red"}`, line: 2, field: "colour", msg: `unknown key "colour"`},
		{name: "type", in: `{"id":"b","submit":0,"gpus":1.5,"duration":9}`, line: 1, field: "gpus", msg: "want an integer, got JSON number 1.5"},
		{name: "id type", in: `{"id":7,"submit":0,"gpus":1,"duration":9}`, line: 1, field: "id", msg: "want a string"},
		{name: "not an object", in: `[1,2]`, line: 1, msg: "want a JSON object, got array"},
		{name: "syntax", in: ok + `{"id":"b",`, line: 2, msg: "bad JSON"},
		{name: "two objects", in: `{"id":"b","submit":0,"gpus":1,"duration":9} {}`, line: 1, msg: "one JSON object per line"},
		{name: "missing id", in: `{"submit":0,"gpus":1,"duration":9}`, line: 1, field: "id", msg: "missing"},
		{name: "missing submit", in: `{"id":"a","gpus":1,"duration":9}`, line: 1, field: "submit", msg: "missing"},
		{name: "missing gpus", in: `{"id":"a","submit":0,"duration":9}`, line: 1, field: "gpus", msg: "missing"},
		{name: "zero gpus", in: `{"id":"a","submit":0,"gpus":0,"duration":9}`, line: 1, field: "gpus", msg: "want an integer >= 1"},
		{name: "negative submit", in: `{"id":"a","submit":-1,"gpus":1,"duration":9}`, line: 1, field: "submit", msg: "negative"},
		{name: "work without unit", in: `{"id":"a","submit":0,"gpus":1,"work":9}`, line: 1, field: "unit", msg: "work needs a unit"},
		{name: "no work", in: `{"id":"a","submit":0,"gpus":1}`, line: 1, field: "work", msg: "want work and unit, or a duration"},
		{name: "duplicate", in: ok + "\n" + ok, line: 3, field: "id", msg: `duplicate id "a" (first on line 1)`},
		{name: "unsorted", in: `{"id":"a","submit":5,"gpus":1,"duration":9}` + "\n" + `{"id":"b","submit":1,"gpus":1,"duration":9}`, line: 2, msg: "--sort"},
	})
}

func TestDetect(t *testing.T) {
	for _, c := range []struct{ name, head, want string }{
		{"w.csv", polluxHead + "a,1,bert,1,1\n", Pollux},
		{"p.csv", phillyHead, Philly},
		{"t.csv", "\ufeffjob_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n", Tiresias},
		{"tf_job.csv", "job_id,num_gpu,submit_time,start_time,duration,model_size,aggr_interval,model_name,model_scale\n", Tiresias},
		{"e.csv", efHead, ElasticFlow},
		{"i.csv", "job_id,submission_time,duration,num_gpu\n", ITP},
		{"c.csv", chronusHead, Chronus},
		{"g.txt", "A\tb\tc\td\te\tf\tg\n", Gavel},
		{"g.trace", "", Gavel},
		{"x.csv", "\n" + tideHead, TideCSV},
		{"x.jsonl", "", TideJSONL},
		{"x.txt", `  {"id":"a"}`, TideJSONL},
	} {
		got, err := Detect(c.name, []byte(c.head))
		if err != nil || got != c.want {
			t.Errorf("Detect(%q, %q) = %q, %v; want %q", c.name, c.head, got, err, c.want)
		}
	}
	for _, head := range []string{"", "num_switch,num_node_p_switch,num_gpu_p_node\n"} {
		_, err := Detect("x.csv", []byte(head))
		var pe *ParseError
		if !errors.As(err, &pe) || pe.Line != 1 || !strings.Contains(pe.Msg, strings.Join(Formats, ", ")) {
			t.Errorf("Detect(%q): %v; want a ParseError on line 1 listing the formats", head, err)
		}
	}
}

func TestReadDetects(t *testing.T) {
	tr, err := Read(strings.NewReader(polluxHead+"a,1,bert,1,1\n"), "w.csv", "", Options{})
	if err != nil || tr.Format != Pollux || len(tr.Jobs) != 1 {
		t.Fatalf("got %+v, %v", tr, err)
	}
	if _, err := Read(strings.NewReader(""), "w.csv", "", Options{}); err == nil {
		t.Error("empty input: want an error")
	}
	_, err = Read(strings.NewReader(polluxHead), "w.csv", "nope", Options{})
	if err == nil || !strings.Contains(err.Error(), strings.Join(Formats, ", ")) {
		t.Errorf("unknown format: %v, want an error listing the formats", err)
	}
}

func TestReadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "w.csv")
	if err := os.WriteFile(path, []byte(polluxHead+"a,1,bert,1,1\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tr, err := ReadFile(path, "", Options{})
	if err != nil || tr.Name != path || tr.Format != Pollux || len(tr.Jobs) != 1 {
		t.Fatalf("got %+v, %v", tr, err)
	}
	if _, err := ReadFile(path+".missing", "", Options{}); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v, want ErrNotExist", err)
	}
}

func TestSlabReuse(t *testing.T) {
	// Many rows, some skipped: jobs must stay distinct and intact across
	// slab chunks.
	var b strings.Builder
	b.WriteString(polluxHead)
	n := 0
	for i := range 20000 {
		if i%7 == 3 {
			b.WriteString("bad,x,bert,1,1\n")
			continue
		}
		b.WriteString("j" + itoa(i) + "," + itoa(i) + ",ncf," + itoa(1+i%5) + ",1\n")
		n++
	}
	got := mustRead(t, Pollux, b.String(), Options{SkipBad: true})
	if len(got) != n {
		t.Fatalf("%d jobs, want %d", len(got), n)
	}
	for _, j := range got {
		if j.ID != "j"+itoa(int(j.Submit)) || j.GPUs != 1+int(j.Submit)%5 {
			t.Fatalf("corrupted job %+v", *j)
		}
	}
}

func itoa(i int) string { return strconv.Itoa(i) }

// TestDocExamples reads the tide-csv and tide-jsonl examples of
// docs/trace-formats.md: the documented format must be the implemented one.
func TestDocExamples(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "docs", "trace-formats.md"))
	if err != nil {
		t.Skipf("docs not found: %v", err)
	}
	blocks := map[string]string{}
	for _, part := range strings.Split(string(b), "```")[1:] {
		lang, body, _ := strings.Cut(part, "\n")
		if (lang == "csv" || lang == "json") && blocks[lang] == "" {
			blocks[lang] = body // the first of each: the same jobs twice
		}
	}
	var jobs [2][]*job.Job
	for i, f := range []struct{ lang, format string }{{"csv", TideCSV}, {"json", TideJSONL}} {
		if blocks[f.lang] == "" {
			t.Fatalf("no %s example in the docs", f.lang)
		}
		jobs[i] = mustRead(t, f.format, blocks[f.lang], Options{})
	}
	wantJobs(t, jobs[1], func() []job.Job {
		var js []job.Job
		for _, j := range jobs[0] {
			js = append(js, *j)
		}
		return js
	}()...)
	if len(jobs[0]) != 3 || jobs[0][2].Unit != job.Epochs || jobs[0][0].Deadline != 7200 || jobs[0][1].GPUType != "t4" {
		t.Errorf("unexpected example jobs %+v", jobs[0])
	}
}

// TestUnknownColumnListsEachOnce guards the error a user reads when a header
// has a typo: the list of known columns names each column once.
func TestUnknownColumnListsEachOnce(t *testing.T) {
	_, err := Read(strings.NewReader("id,submit,gpus,colour\n"), "t.csv", TideCSV, Options{})
	if err == nil {
		t.Fatal("no error for an unknown column")
	}
	_, list, ok := strings.Cut(err.Error(), "known columns: ")
	if !ok {
		t.Fatalf("error %q lists no known columns", err)
	}
	seen := map[string]bool{}
	for _, c := range strings.Split(list, ",") {
		if seen[c] {
			t.Errorf("column %q listed twice in %q", c, err)
		}
		seen[c] = true
	}
	for _, c := range tideColumns {
		if !seen[c] {
			t.Errorf("column %q missing from %q", c, err)
		}
	}
}
