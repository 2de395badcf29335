package trace

import (
	"bytes"
	"errors"
	"testing"
)

// Seed inputs per format. The corpus under testdata/fuzz/<FuzzName>/ holds
// more, in Go's corpus file format.
var fuzzSeeds = map[string][]string{
	Pollux: {
		polluxHead + "cifar10-0,107,cifar10,6,2048\nbert-1,110,bert,1,12\n",
		polluxHead + "a,5,bert,1,1\nb,2,bert,0,1\na,7,nope,1,1\n",
	},
	Philly: {
		phillyHead + "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n2017-10-09 06:13:03,2951.0,2,5902.0,6214e9\n",
		phillyHead + "2017-10-09 07:01:55,0,0,0,x\n",
	},
	Tiresias: {
		"job_id,num_gpu,submit_time,iterations,model_name,duration,interval\r\n0,1,0,606,vgg19,164,30\r\n1,8,30,133,vgg11,147,23\r\n",
	},
	ElasticFlow: {
		efHead + "0,3715485,2011,cifar10,3719996,4096,1,5644\n1,3715486,20,ncf,3715486,4096,1,5644\n",
		"job_id,submit_time,iteration,model_name,ddl,batch_size,num_gpu,duration,best_effort\n0,0,77215,r,4426,256,1,3930,0\n1,0,1,r,0,1,1,1,1\n",
	},
	ITP: {
		"job_id,submission_time,num_iteration,model_name,deadline,batch_size,num_gpu,duration\nbdd6,3715485,3249,deepspeech2,3716178,32,1,1075",
		"job_id,submission_time,duration,num_gpu\nx1,1932025,2429,64\nx2,2000581,1532,1\n",
	},
	Chronus: {
		chronusHead + "0,vc_a,1,5601,5530,m,96,5,159-189-229-289,10-8-5-2,0,soft\n1,vc_b,4,7505,760,a,106,6,235,10,0,strict\n2,vc_a,0,14341,3621,a,30,17,14341,10,1,best\n",
	},
	Gavel: {
		"ResNet-18 (batch size 64)\tpython3 main.py\tdir\t--num_steps\t1\t100387\t1\t1\t-1.000000\t0\nLM\tcmd\tdir\t--steps\t1\t490093\t2\t0.5\t1.2\t7.5\n",
		"Transformer (batch size 128)\tcd %s && python3 train.py\t-step\t1\t95121\t0.000000\t4\n",
		"A\tcmd\t-n\t1\t10\t2\t1\t-1\t3\n",
	},
	TideCSV: {
		tideHead + "a,0,team-a,2,4,2,8,v100,cifar10,512,100,epochs,7200,3600\nb,5,,-1,1,,,,,,,,,90\n",
		"unit,work,gpus,submit,id\niterations,10,1,0,x\n\"y,1\",1,1,1,\"y\"\n",
		"id,submit,gpus,duration,gpu_share,gpu_mem_gib,mig\nq,0,1,60,25%,,\nm,0,2,60,,8,\ng,0,1,60,,,1g.10gb\nx,0,1,9,0.5,,3g.40gb\n",
	},
	TideJSONL: {
		`{"id":"a","submit":0,"tenant":"t","priority":2,"gpus":4,"min_gpus":2,"max_gpus":8,"gpu_type":"v100","model":"m","batch_size":512,"work":100,"unit":"epochs","deadline":7200,"duration":3600}` + "\n" +
			`{"id":"b","submit":5,"gpus":1,"duration":90}`,
		`{"id":"b","submit":0,"gpus":1.5}` + "\n[1]\n{}\nnull\n",
		`{"id":"q","submit":0,"gpus":1,"duration":60,"gpu_share":0.25}` + "\n" + `{"id":"g","submit":1,"gpus":2,"duration":60,"mig":"7g.80gb","max_gpus":3}`,
	},
}

// fuzzRead reads data as format and checks the property every reader must
// have: no panic, and either a *ParseError about this file or jobs that are
// valid, unique and in submit order.
func fuzzRead(t *testing.T, format string, data []byte, sort, skip bool) {
	warns := 0
	opt := Options{Sort: sort, SkipBad: skip, Warn: func(string) { warns++ }}
	tr, err := Read(bytes.NewReader(data), "fuzz", format, opt)
	if err != nil {
		var pe *ParseError
		if !errors.As(err, &pe) {
			t.Fatalf("error %T %v, want *ParseError", err, err)
		}
		if pe.File != "fuzz" || pe.Line < 1 || pe.Msg == "" {
			t.Fatalf("incomplete error %+v", *pe)
		}
		_ = pe.Error()
		return
	}
	if tr.Format != format || len(tr.Jobs) == 0 {
		t.Fatalf("format %q with %d jobs, want %q and some jobs", tr.Format, len(tr.Jobs), format)
	}
	if !skip && warns > 0 && format != Gavel {
		t.Fatalf("%d warnings without SkipBad", warns)
	}
	seen := map[string]bool{}
	for i, j := range tr.Jobs {
		if err := j.Validate(); err != nil {
			t.Fatalf("job %d: %v", i, err)
		}
		if seen[j.ID] {
			t.Fatalf("job %d: duplicate id %q", i, j.ID)
		}
		seen[j.ID] = true
		if i > 0 && j.Submit < tr.Jobs[i-1].Submit {
			t.Fatalf("job %d: submit %v before %v", i, j.Submit, tr.Jobs[i-1].Submit)
		}
		if j.Deadline != 0 && j.Deadline <= j.Submit {
			t.Fatalf("job %d: deadline %v not after submit %v", i, j.Deadline, j.Submit)
		}
	}
}

func fuzzFormat(f *testing.F, format string) {
	for _, s := range fuzzSeeds[format] {
		f.Add([]byte(s), false, false)
		f.Add([]byte(s), true, true)
	}
	f.Fuzz(func(t *testing.T, data []byte, sort, skip bool) {
		fuzzRead(t, format, data, sort, skip)
	})
}

func FuzzPollux(f *testing.F)      { fuzzFormat(f, Pollux) }
func FuzzPhilly(f *testing.F)      { fuzzFormat(f, Philly) }
func FuzzTiresias(f *testing.F)    { fuzzFormat(f, Tiresias) }
func FuzzElasticFlow(f *testing.F) { fuzzFormat(f, ElasticFlow) }
func FuzzITP(f *testing.F)         { fuzzFormat(f, ITP) }
func FuzzChronus(f *testing.F)     { fuzzFormat(f, Chronus) }
func FuzzGavel(f *testing.F)       { fuzzFormat(f, Gavel) }
func FuzzTideCSV(f *testing.F)     { fuzzFormat(f, TideCSV) }
func FuzzTideJSONL(f *testing.F)   { fuzzFormat(f, TideJSONL) }

// FuzzDetect reads with format detection: Detect must not panic, and what it
// picks must read safely.
func FuzzDetect(f *testing.F) {
	for _, seeds := range fuzzSeeds {
		for _, s := range seeds {
			f.Add("trace.csv", []byte(s))
		}
	}
	f.Add("x.trace", []byte("a\tb\n"))
	f.Add("x.jsonl", []byte("{}\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		format, err := Detect(name, data)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Detect error %T %v, want *ParseError", err, err)
			}
			return
		}
		fuzzRead(t, format, data, true, true)
	})
}
