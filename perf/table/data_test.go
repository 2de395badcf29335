package table

// Tests against the real files under shared/data (see its README): they are
// skipped, with a message, where that folder is absent.

import (
	"bufio"
	"encoding/csv"
	"encoding/json"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
)

// sharedData finds shared/data/<sub> by walking up from the package
// directory (in this checkout, ../../../shared/data), or skips the test.
func sharedData(t *testing.T, sub string) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Skipf("shared data: %v", err)
	}
	for {
		p := filepath.Join(dir, "shared", "data", sub)
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Skipf("shared/data/%s not found in any parent of the package directory: skipping the tests on the published tables", sub)
		}
		dir = parent
	}
}

var efGPUTypes = []string{"A100", "T4"}

// loadEF loads both ElasticFlow GPU types into one Table.
func loadEF(t *testing.T) (*Table, string) {
	t.Helper()
	root := sharedData(t, "elasticflow")
	tb := NewTable()
	for _, g := range efGPUTypes {
		one, err := LoadElasticFlowDir(filepath.Join(root, "throughputs_"+g), g)
		if err != nil {
			t.Fatalf("load %s: %v", g, err)
		}
		if err := tb.Add(one); err != nil {
			t.Fatal(err)
		}
	}
	return tb, root
}

// TestElasticFlowFiles reads every table a second time, independently, with
// encoding/csv, and checks that every model loads, that a job on each
// measured GPU count gets exactly the file's value, that every measured value
// is positive, and that unmeasured cells (empty, nan, 0) never give a rate
// above the row's largest measured value.
func TestElasticFlowFiles(t *testing.T) {
	tb, root := loadEF(t)
	for _, g := range efGPUTypes {
		files, err := filepath.Glob(filepath.Join(root, "throughputs_"+g, "*.csv"))
		if err != nil || len(files) == 0 {
			t.Fatalf("no %s files: %v", g, err)
		}
		for _, f := range files {
			model := strings.TrimSuffix(filepath.Base(f), ".csv")
			fh, err := os.Open(f)
			if err != nil {
				t.Fatal(err)
			}
			recs, err := csv.NewReader(fh).ReadAll()
			fh.Close()
			if err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			if got := tb.BatchSizes(model, g); len(got) != len(recs)-1 {
				t.Errorf("%s %s: %d batch sizes loaded, file has %d rows", g, model, len(got), len(recs)-1)
			}
			header := recs[0]
			for _, rec := range recs[1:] {
				bs, _ := strconv.Atoi(rec[0])
				best := 0.0
				var unmeasured []int
				for i := 1; i < len(rec); i++ {
					n, _ := strconv.Atoi(header[i])
					v, err := strconv.ParseFloat(rec[i], 64)
					if err != nil || !(v > 0) {
						unmeasured = append(unmeasured, n)
						continue
					}
					best = max(best, v)
					j := &job.Job{ID: "x", Model: model, BatchSize: bs, GPUs: n, Work: 1, Unit: job.Iterations, GPUType: g}
					if err := tb.Check(j); err != nil {
						t.Errorf("Check: %v", err)
					}
					// Packed on 8-GPU nodes, as the paper's n16g8 cluster.
					r, _ := tb.Rate(j, perf.Packed(g, n, 8), 0)
					if r != v {
						t.Errorf("%s %s bs %d on %d GPUs: rate %v, file says %v", g, model, bs, n, r, v)
					}
				}
				if best == 0 {
					t.Errorf("%s %s bs %d: nothing measured", g, model, bs)
				}
				for _, n := range unmeasured {
					r := tb.Throughput(model, g, bs, n)
					if !(r > 0) || r > best {
						t.Errorf("%s %s bs %d on unmeasured %d GPUs: rate %v, want in (0, %v]", g, model, bs, n, r, best)
					}
				}
				// Every count from 1 to 128 runs at a positive rate no
				// higher than the row's best (all rows are measured on 1 GPU).
				for n := 1; n <= 128; n++ {
					if r := tb.Throughput(model, g, bs, n); !(r > 0) || r > best {
						t.Errorf("%s %s bs %d on %d GPUs: rate %v, want in (0, %v]", g, model, bs, n, r, best)
					}
				}
			}
		}
	}
}

// TestElasticFlowMaxGPUs compares PeakGPUs with the largest GPU count that
// ElasticFlow's simulator lets an A100 job use: the hand-written table of
// get_max_gpu (pkusys/ElasticFlow, ElasticFlow/scheduler/models.py), which
// equals the measured peak for every A100 model but resnet50_cifar10 (whose
// table stops at 8 GPUs while get_max_gpu allows min(batch size, 64)).
func TestElasticFlowMaxGPUs(t *testing.T) {
	tb, _ := loadEF(t)
	efMax := map[string]map[int]int{
		"bert":        {64: 8, 128: 16},
		"deepspeech2": {32: 32, 64: 64},
		"gpt2":        {128: 16, 256: 32},
		"inception3":  {64: 16, 128: 32},
		"resnet50":    {64: 32, 128: 64, 256: 64},
		"vgg16":       {64: 32, 128: 64, 256: 64},
	}
	for model, byBatch := range efMax {
		for bs, want := range byBatch {
			if got := tb.PeakGPUs(model, "A100", bs); got != want {
				t.Errorf("A100 %s bs %d: peak at %d GPUs, ElasticFlow's max_gpu %d", model, bs, got, want)
			}
		}
	}
}

// TestElasticFlowTraces checks that every job of ElasticFlow's traces names a
// model and batch size of the tables, on a GPU count that is measured.
func TestElasticFlowTraces(t *testing.T) {
	tb, root := loadEF(t)
	traces := map[string]string{
		"philly_103959.csv":      "A100",
		"resnet_cifar_trace.csv": "A100",
		"elasticVpollux_e.csv":   "T4",
	}
	for name, g := range traces {
		f, err := os.Open(filepath.Join(root, "traces_for_ElasticFlow", name))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		col := map[string]int{}
		for i, h := range recs[0] {
			col[h] = i
		}
		for _, rec := range recs[1:] {
			bs, _ := strconv.Atoi(rec[col["batch_size"]])
			n, _ := strconv.Atoi(rec[col["num_gpu"]])
			j := &job.Job{ID: name + "/" + rec[col["job_id"]], Model: rec[col["model_name"]], BatchSize: bs, GPUs: n, GPUType: g, Work: 1, Unit: job.Iterations}
			if err := tb.Check(j); err != nil {
				t.Errorf("%v", err)
				continue
			}
			gpus, _ := tb.Measured(j.Model, g, bs)
			if i := sort.SearchInts(gpus, n); i == len(gpus) || gpus[i] != n {
				t.Errorf("%s: %d GPUs not measured (%v)", j.ID, n, gpus)
			}
		}
	}
}

var gavelFiles = []string{"simulation_throughputs.json", "physical_cluster_throughputs.json"}

// TestGavelFiles reads each file a second time with a generic JSON decoder
// and checks every isolated and co-located throughput against the model.
func TestGavelFiles(t *testing.T) {
	root := sharedData(t, "gavel")
	for _, name := range gavelFiles {
		path := filepath.Join(root, name)
		g, err := LoadGavel(path)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		var raw map[string]map[string]map[string]any
		if err := json.Unmarshal(b, &raw); err != nil {
			t.Fatal(err)
		}
		if len(g.GPUTypes()) != len(raw) {
			t.Errorf("%s: %d GPU types loaded, file has %d", name, len(g.GPUTypes()), len(raw))
		}
		// Gavel's own key pattern, parse_job_type_tuple in scheduler/utils.py.
		keyRE := func(k string) (string, int) {
			k = strings.TrimPrefix(strings.TrimSuffix(k, ")"), "('")
			i := strings.LastIndex(k, "', ")
			sf, _ := strconv.Atoi(k[i+3:])
			return k[:i], sf
		}
		counts := 0
		for gpu, entries := range raw {
			for key, entry := range entries {
				jt, sf := keyRE(key)
				want := entry["null"].(float64)
				got, ok := g.Isolated(jt, sf, gpu)
				if !ok || got != want {
					t.Errorf("%s %s %s: isolated %v %v, file %v", name, gpu, key, got, ok, want)
				}
				if want < 0 {
					t.Errorf("%s %s %s: negative throughput", name, gpu, key)
				}
				j := &job.Job{ID: "x", Model: jt, GPUs: sf, Work: 1, Unit: job.Iterations}
				if base, spread := strings.CutSuffix(gpu, UnconsolidatedSuffix); spread {
					// sf GPUs on sf nodes: the unconsolidated value.
					a := perf.Alloc{GPUType: base, PerNode: make([]int, sf)}
					for i := range a.PerNode {
						a.PerNode[i] = 1
					}
					if sf > 1 {
						if r, _ := g.Rate(j, a, 0); r != want {
							t.Errorf("%s %s spread over %d nodes: rate %v, file %v", name, key, sf, r, want)
						}
					}
				} else if r, _ := g.Rate(j, perf.Packed(gpu, sf, 8), 0); r != want {
					t.Errorf("%s %s %s on one node: rate %v, file %v", name, gpu, key, r, want)
				}
				for other, v := range entry {
					if other == "null" {
						continue
					}
					ot, osf := keyRE(other)
					pair := v.([]any)
					r1, r2, ok := g.PairRate(jt, sf, ot, osf, gpu)
					if !ok || r1 != pair[0].(float64) || r2 != pair[1].(float64) {
						t.Errorf("%s %s %s with %s: %v %v %v, file %v", name, gpu, key, other, r1, r2, ok, pair)
					}
					// The files are symmetric: the reverse lookup swaps.
					s1, s2, ok := g.PairRate(ot, osf, jt, sf, gpu)
					if !ok || s1 != r2 || s2 != r1 {
						t.Errorf("%s %s %s with %s: reverse %v %v %v", name, gpu, key, other, s1, s2, ok)
					}
					counts++
				}
			}
		}
		if counts == 0 {
			t.Errorf("%s: no co-located throughputs", name)
		}
		// 26 job types, scale factors 1, 2, 4, 8 (README).
		names := map[string]bool{}
		for _, jt := range g.JobTypes() {
			names[jt.Name] = true
			if jt.ScaleFactor != 1 && jt.ScaleFactor != 2 && jt.ScaleFactor != 4 && jt.ScaleFactor != 8 {
				t.Errorf("%s: scale factor %d", name, jt.ScaleFactor)
			}
		}
		if len(names) != 26 {
			t.Errorf("%s: %d job types, README says 26", name, len(names))
		}
	}
}

// TestGavelTraces checks that every job of Gavel's generated and physical
// cluster traces passes Check: its (job type, scale factor) has a positive
// throughput on some GPU type. (The older msr_seed0 traces use scale factors
// up to 32 that the throughput files do not have; they are not tested.)
func TestGavelTraces(t *testing.T) {
	root := sharedData(t, "gavel")
	g, err := LoadGavel(filepath.Join(root, "simulation_throughputs.json"))
	if err != nil {
		t.Fatal(err)
	}
	files, _ := filepath.Glob(filepath.Join(root, "generated_seed*.trace"))
	more, _ := filepath.Glob(filepath.Join(root, "physical_cluster_traces", "*.trace"))
	files = append(files, more...)
	if len(files) == 0 {
		t.Fatal("no traces")
	}
	n := 0
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(fh)
		for line := 1; sc.Scan(); line++ {
			c := strings.Split(sc.Text(), "\t")
			if len(c) != 10 {
				t.Errorf("%s line %d: %d columns", f, line, len(c))
				continue
			}
			sf, _ := strconv.Atoi(c[6])
			steps, _ := strconv.ParseFloat(c[5], 64)
			j := &job.Job{ID: filepath.Base(f) + ":" + strconv.Itoa(line), Model: c[0], GPUs: sf, Work: steps, Unit: job.Iterations}
			if err := g.Check(j); err != nil {
				t.Error(err)
			}
			n++
		}
		fh.Close()
	}
	if n == 0 {
		t.Error("no trace jobs read")
	}
}
