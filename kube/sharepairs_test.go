package kube

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// pairsTable measures three one-GPU job types on V100s (iterations/s)
// alone and in pairs. Packed over alone: A+B 0.6+0.6, A+C 0.6+0.625,
// B+C 0.6+0.625: every pair helps (Gandiva's paper rule keeps a pair
// whose sum is above 1).
const pairsTable = `{"v100": {
 "('A', 1)": {"null": 10.0, "('B', 1)": [6.0, 6.0], "('C', 1)": [6.0, 5.0]},
 "('B', 1)": {"null": 10.0, "('C', 1)": [6.0, 5.0]},
 "('C', 1)": {"null": 8.0}
}}`

// writePairs writes pairsTable to a file and returns its path.
func writePairs(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pairs.json")
	if err := os.WriteFile(path, []byte(pairsTable), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// tideJobs gives the harness's scheduler TideJobs (an indexer the test
// fills) and makes the worker pods it creates appear in the pod cache,
// named as the API server names them.
func (h *harness) tideJobs() cache.Indexer {
	idx := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	h.s.tjs = cache.NewGenericLister(idx, TideJobResource.GroupResource())
	h.cs.PrependReactor("create", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		c := a.(k8stesting.CreateAction)
		if c.GetSubresource() != "" {
			return false, nil, nil
		}
		h.mu.Lock()
		h.uid++
		n := h.uid
		h.mu.Unlock()
		p := c.GetObject().(*corev1.Pod).DeepCopy()
		p.Name = p.GenerateName + fmt.Sprint(n)
		p.UID = types.UID(fmt.Sprint(n))
		p.CreationTimestamp = metav1.NewTime(time.Unix(int64(1000+n), 0))
		if err := h.pods.Add(p); err != nil {
			return true, nil, err
		}
		return true, p.DeepCopy(), nil
	})
	return idx
}

// tideJob adds a TideJob of one worker of one GPU, of job type typ ("":
// none), created at Unix second at.
func (h *harness) tideJob(idx cache.Indexer, name, typ string, at int64) {
	h.t.Helper()
	tj := &TideJob{TypeMeta: metav1.TypeMeta{APIVersion: Group + "/" + Version, Kind: "TideJob"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("tj-" + name), CreationTimestamp: metav1.NewTime(time.Unix(at, 0))},
		Spec: TideJobSpec{JobType: typ, Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{SchedulerName: "tide",
			Containers: []corev1.Container{{Name: "train", Env: []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: "all"}}}}}}}}
	obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(tj)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := idx.Add(&unstructured.Unstructured{Object: obj}); err != nil {
		h.t.Fatal(err)
	}
}

// workersOf returns the live worker pods of TideJob name.
func (h *harness) workersOf(name string) []*corev1.Pod {
	var out []*corev1.Pod
	for _, o := range h.pods.List() {
		p := o.(*corev1.Pod)
		if p.Labels[LabelTideJob] == name && !podTerminal(p) {
			out = append(out, p)
		}
	}
	return out
}

// envOf is a pod's first container's environment.
func envOf(p *corev1.Pod) map[string]string {
	env := map[string]string{}
	for _, e := range p.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	return env
}

// onGPU describes where TideJob name's one worker is: "node#index",
// "node" for a whole-GPU worker, "" when it has none bound.
func (h *harness) onGPU(name string) string {
	h.t.Helper()
	ws := h.workersOf(name)
	if len(ws) > 1 {
		h.t.Fatalf("TideJob %s has %d workers, want at most 1", name, len(ws))
	}
	if len(ws) == 0 || ws[0].Spec.NodeName == "" {
		return ""
	}
	p := ws[0]
	if i, ok := p.Annotations[AnnotGPUIndex]; ok {
		return p.Spec.NodeName + "#" + i
	}
	return p.Spec.NodeName
}

// TestPackedPairsKube: under gandiva:pack=true with a pair table, two
// packable TideJobs on a node of one GPU are bound to that GPU's index
// together, each selecting it by environment with half its threads, and
// asking the device plugin for no GPU; a third packable job and a job
// without a type wait. A new scheduler over the same pods (a restart)
// adopts the pair where it runs and moves nothing. When a member ends the
// third joins its partner on the same index (made packed: half the
// threads); the untyped job never shares and runs alone, on a whole GPU,
// once the GPU is free.
func TestPackedPairsKube(t *testing.T) {
	pairs := writePairs(t)
	cfg := Config{Policy: "gandiva:pack=true:quantum=3600", PairThroughputs: pairs}
	h := newHarnessWith(t, cfg)
	tjs := h.tideJobs()
	h.node("n0", 1, func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = "V100" })
	h.tideJob(tjs, "a", "A", 1001)
	h.tideJob(tjs, "b", "B", 1002)
	h.round()
	h.round()
	if a, b := h.onGPU("a"), h.onGPU("b"); a != "n0#0" || b != "n0#0" {
		t.Fatalf("a on %q, b on %q; want both on n0#0 (a packed pair)", a, b)
	}
	for _, name := range []string{"a", "b"} {
		p := h.workersOf(name)[0]
		env := envOf(p)
		if env["NVIDIA_VISIBLE_DEVICES"] != "0" || env["CUDA_VISIBLE_DEVICES"] != "0" || env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != "50" || env["TIDE_GPU_SHARE"] != "0.5" {
			t.Errorf("worker of %s has env %v; want GPU 0 selected and half its threads", name, env)
		}
		if _, ok := p.Spec.Containers[0].Resources.Limits[GPUResource]; ok {
			t.Errorf("worker of %s asks the device plugin for a GPU; a packable worker asks for none", name)
		}
	}
	h.tideJob(tjs, "c", "C", 1003)
	h.tideJob(tjs, "d", "", 1004)
	for i := 0; i < 3; i++ {
		if ev := h.round(); len(ev) > 0 {
			t.Fatalf("round %d evicted %v; want the pair left running", i, ev)
		}
	}
	if c, d := h.onGPU("c"), h.onGPU("d"); c != "" || d != "" {
		t.Fatalf("c on %q, d on %q; want both waiting (the GPU holds a pair)", c, d)
	}

	h2 := h.restart(cfg)

	// a ends: c joins b on its GPU; d still waits.
	end := func(name string) {
		for _, p := range h2.workersOf(name) {
			p = p.DeepCopy()
			p.Status.Phase = corev1.PodSucceeded
			_ = h2.pods.Update(p)
		}
	}
	end("a")
	for i := 0; i < 20 && h2.onGPU("c") == ""; i++ {
		h2.round()
	}
	if b, c, d := h2.onGPU("b"), h2.onGPU("c"), h2.onGPU("d"); b != "n0#0" || c != "n0#0" || d != "" {
		t.Fatalf("after a ended: b on %q, c on %q, d on %q; want b and c on n0#0, d waiting", b, c, d)
	}
	if env := envOf(h2.workersOf("c")[0]); env["CUDA_MPS_ACTIVE_THREAD_PERCENTAGE"] != "50" || env["NVIDIA_VISIBLE_DEVICES"] != "0" {
		t.Errorf("c, made to join b, has env %v; want GPU 0 and half its threads", env)
	}
	end("b")
	end("c")
	for i := 0; i < 5 && h2.onGPU("d") == ""; i++ {
		h2.round()
	}
	p := h2.workersOf("d")
	if len(p) != 1 || p[0].Spec.NodeName != "n0" || podGPUs(p[0]) != 1 || p[0].Annotations[AnnotGPUIndex] != "" {
		t.Fatalf("d's workers %v; want one on n0 asking the device plugin for 1 GPU, with no index", p)
	}
	if env := envOf(p[0]); env["NVIDIA_VISIBLE_DEVICES"] != "all" {
		t.Errorf("d (not packable) has env %v; want its template's, untouched", env)
	}
}

// restart makes a new scheduler with cfg over h's caches (a restarted
// tide kube), runs three rounds, and fails the test when they evict or
// bind anything, or the engine does not hold tidejob a packed with b.
func (h *harness) restart(cfg Config) *harness {
	h.t.Helper()
	h2 := newHarnessWith(h.t, cfg)
	h2.nodes, h2.pods, h2.uid = h.nodes, h.pods, h.uid
	h2.s.nodes, h2.s.pods = h.s.nodes, h.s.pods
	h2.tideJobs() // its pod-creating reactor
	h2.s.tjs = h.s.tjs
	for i := 0; i < 3; i++ {
		ev := h2.round()
		if len(ev) > 0 || len(h2.binds) > 0 {
			h.t.Fatalf("after the restart round %d evicted %v and bound %v; want nothing moved", i, ev, h2.binds)
		}
	}
	if st := h2.s.eng.Job("tidejob/ns/a"); st == nil || st.PackedWith != "tidejob/ns/b" {
		h.t.Fatalf("after the restart the engine holds a as %+v; want it packed with b", st)
	}
	return h2
}

// TestPackableJobType reads spec.jobType against the pair table: a type
// it knows makes the job packable (a job type for the engine, workers
// without a GPU limit), one it does not know, several GPUs per worker
// or part of a GPU are refused naming the field; without a table no job
// is packable.
func TestPackableJobType(t *testing.T) {
	p, err := loadPairs(writePairs(t))
	if err != nil {
		t.Fatal(err)
	}
	withTable := grouping{gpuTypeLabel: "nvidia.com/gpu.product", pairs: &pairTable{file: "pairs.json", model: p.Table}}
	for _, c := range []struct {
		spec  TideJobSpec
		g     grouping
		pack  bool
		model string
		err   string
	}{
		{TideJobSpec{JobType: "A"}, withTable, true, "A", ""},
		{TideJobSpec{JobType: "A", MinWorkers: 2}, withTable, false, "", "spec.jobType: job tidejob/ns/j: job type \"A\": no throughput at scale factor (GPUs) 2"},
		{TideJobSpec{JobType: "Z"}, withTable, false, "", "spec.jobType: job tidejob/ns/j: job type \"Z\": unknown model"},
		{TideJobSpec{JobType: "A", GPUsPerWorker: 2}, withTable, false, "", "spec.gpusPerWorker: a packable job (spec.jobType \"A\") is bound by GPU index, one GPU per worker; got 2"},
		{TideJobSpec{JobType: "A", GPUFraction: "0.5"}, withTable, false, "", "spec.jobType: a job whose workers hold part of a GPU"},
		{TideJobSpec{JobType: "A", GPUType: "k80"}, withTable, false, "", "spec.jobType:"},
		{TideJobSpec{JobType: "Z"}, grouping{}, false, "", ""},
		{TideJobSpec{}, withTable, false, "", ""},
	} {
		c.spec.Template.Spec.Containers = []corev1.Container{{Name: "c"}}
		w, err := c.g.fromTideJob(&TideJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "j"}, Spec: c.spec})
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%+v: error %v, want one containing %q", c.spec, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("%+v: %v", c.spec, err)
			continue
		}
		j := w.job("j")
		if w.pack != c.pack || j.Model != c.model {
			t.Errorf("%+v: packable %v, engine model %q; want %v, %q", c.spec, w.pack, j.Model, c.pack, c.model)
		}
		_, limited := workerPod(w, "tide").Spec.Containers[0].Resources.Limits[GPUResource]
		if limited == c.pack {
			t.Errorf("%+v: worker asks for a GPU: %v; want %v (a packable worker is bound by index)", c.spec, limited, !c.pack)
		}
	}
}

// TestPackEnv: a packable worker on GPU 3 selects it; made packed it gets
// half of the GPU's threads, made alone all of them.
func TestPackEnv(t *testing.T) {
	got := func(packed bool) string {
		var s []string
		for _, e := range packEnv(3, packed) {
			s = append(s, e.Name+"="+e.Value)
		}
		return strings.Join(s, " ")
	}
	if g, w := got(false), "NVIDIA_VISIBLE_DEVICES=3 CUDA_VISIBLE_DEVICES=0 TIDE_GPU_INDEX=3"; g != w {
		t.Errorf("alone: %s, want %s", g, w)
	}
	if g, w := got(true), "NVIDIA_VISIBLE_DEVICES=3 CUDA_VISIBLE_DEVICES=0 TIDE_GPU_INDEX=3 CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50 TIDE_GPU_SHARE=0.5"; g != w {
		t.Errorf("packed: %s, want %s", g, w)
	}
}

// TestPairRoom: a packable job's GPU index may hold its partner's pod and
// no other job's (not a third, not a part, not a terminating pod of a job
// it is not packed with); a part's index no packable job's pod.
func TestPairRoom(t *testing.T) {
	v := &view{work: map[string]*workload{"a": {key: "a", pack: true}, "b": {key: "b", pack: true},
		"c": {key: "c", pack: true}, "p": {key: "p", part: part{share: 0.5}}}}
	v.noteIndexJob("n", 0, "a")
	v.noteIndexJob("n", 1, "p")
	slot0, slot1, slot2 := []string{partSlot("n", 0)}, []string{partSlot("n", 1)}, []string{partSlot("n", 2)}
	for _, c := range []struct {
		w       string
		slots   []string
		partner string
		want    bool
	}{
		{"b", slot0, "a", true},  // a's partner joins it
		{"c", slot0, "", false},  // not packed with a
		{"c", slot0, "b", false}, // packed with another
		{"b", slot1, "", false},  // a part's GPU
		{"p", slot0, "", false},  // a part onto a packable job's GPU
		{"c", slot2, "", true},   // a free GPU
		{"a", slot0, "", true},   // its own GPU
	} {
		if got := v.pairRoom(v.work[c.w], c.slots, c.partner); got != c.want {
			t.Errorf("%s to %v (partner %q): %v, want %v", c.w, c.slots, c.partner, got, c.want)
		}
	}
	v.claimIndices(v.work["b"], slot0)
	if v.pairRoom(v.work["c"], slot0, "a") {
		t.Errorf("c may join a GPU holding a and b; want no third job")
	}
}

// TestPlaceTrialPairs: the trial placement sees a pair as one worker (a
// one-GPU node takes a new pair, and a running pair, whose two jobs hold
// the same GPU, is placed once), as the engine places it.
func TestPlaceTrialPairs(t *testing.T) {
	c, err := cluster.New([]cluster.Node{{Name: "n", GPUType: "v100", GPUs: 1}})
	if err != nil {
		t.Fatal(err)
	}
	pl := workerPlacer{per: func(string) int { return 1 }}
	run := []engine.Assignment{{Job: "a", GPUs: 1, PackWith: "b"}, {Job: "b", GPUs: 1, PackWith: "a"}}
	snap := &engine.Snapshot{Cluster: c, Sharing: true}
	got := placeTrial(snap, pl, map[string][]cluster.GPUID{}, run)
	if len(got["a"]) != 1 || len(got["b"]) != 1 || got["a"][0] != got["b"][0] {
		t.Errorf("a new pair placed %v; want both on the one GPU", got)
	}
	held := map[string][]cluster.GPUID{"a": {0}, "b": {0}}
	got = placeTrial(snap, pl, held, run)
	if len(got["a"]) != 1 || len(got["b"]) != 1 || len(held) != 2 {
		t.Errorf("a running pair placed %v (held now %v); want both kept on GPU 0, held untouched", got, held)
	}
	plan := engine.Plan{Run: []engine.Assignment{{Job: "a", GPUs: 1}, {Job: "b", GPUs: 1, PackWith: "a"}}}
	mutualPairs(&plan)
	if plan.Run[1].PackWith != "" {
		t.Errorf("b packed with a, which is not packed with it, stays %q; want unpacked", plan.Run[1].PackWith)
	}
}

// TestPackedPairsKubeGavel: Gavel's LAS with space sharing (its LP solved
// by GLPK) packs two packable TideJobs on a node of one GPU as Gandiva
// does; a job without a type is never packed with them; a restart moves
// nothing.
func TestPackedPairsKubeGavel(t *testing.T) {
	cfg := Config{Policy: "gavel-las:space_sharing=true", PairThroughputs: writePairs(t)}
	h := newHarnessWith(t, cfg)
	tjs := h.tideJobs()
	h.node("n0", 1, func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = "V100" })
	h.tideJob(tjs, "a", "A", 1001)
	h.tideJob(tjs, "b", "B", 1002)
	h.tideJob(tjs, "d", "", 1003)
	h.round()
	h.round()
	if a, b, d := h.onGPU("a"), h.onGPU("b"), h.onGPU("d"); a != "n0#0" || b != "n0#0" || d != "" {
		t.Fatalf("a on %q, b on %q, d on %q; want a and b packed on n0#0, d waiting", a, b, d)
	}
	if st := h.s.eng.Job("tidejob/ns/a"); st == nil || st.PackedWith != "tidejob/ns/b" {
		t.Fatalf("the engine holds a as %+v; want it packed with b", st)
	}
	h.restart(cfg)
}

// TestStaleIndexedWorker: a packable TideJob's worker left unbound (its
// bind failed) carries the GPU index it was made for in its environment,
// which the next plan may not give it: tide deletes it rather than bind
// it, and makes a worker anew.
func TestStaleIndexedWorker(t *testing.T) {
	h := newHarnessWith(t, Config{Policy: "fifo", PairThroughputs: writePairs(t)})
	tjs := h.tideJobs()
	h.node("n0", 2, func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = "V100" })
	h.tideJob(tjs, "a", "A", 1001)
	var deleted []string
	h.cs.PrependReactor("delete", "pods", func(a k8stesting.Action) (bool, runtime.Object, error) {
		name := a.(k8stesting.DeleteAction).GetName()
		deleted = append(deleted, name)
		o, ok, _ := h.pods.GetByKey("ns/" + name)
		if ok {
			_ = h.pods.Delete(o)
		}
		return true, nil, nil
	})
	h.pod("a-stale", 0, func(p *corev1.Pod) {
		p.Labels = map[string]string{LabelTideJob: "a"}
		p.Annotations = map[string]string{AnnotGPUIndex: "1"}
		p.Spec.Containers[0].Resources.Limits = nil
		p.Spec.Containers[0].Env = packEnv(1, false)
	})
	h.round()
	if len(deleted) != 1 || deleted[0] != "a-stale" || len(h.binds) != 0 {
		t.Fatalf("first round deleted %v and bound %v; want the unbound worker deleted, nothing bound", deleted, h.binds)
	}
	h.round()
	ws := h.workersOf("a")
	if len(ws) != 1 || ws[0].Spec.NodeName != "n0" {
		t.Fatalf("after the stale worker went, a's workers are %v; want one made anew and bound to n0", ws)
	}
	if idx, env := ws[0].Annotations[AnnotGPUIndex], envOf(ws[0]); env["NVIDIA_VISIBLE_DEVICES"] != idx {
		t.Errorf("the new worker is at GPU index %q with env %v; want them to agree", idx, env)
	}
}

// TestPartWaitsForPackableWorker: a part is not bound to a GPU index
// where a packable job's worker still runs, terminating after its
// TideJob was deleted: the packable worker holds the whole GPU (or half,
// packed) until it is gone. With its TideJob gone tide no longer knew the
// worker for a packable one and bound the part beside it, over-committing
// the GPU for the grace period (random operations search, seed 636 under
// gandiva:pack=true).
func TestPartWaitsForPackableWorker(t *testing.T) {
	cfg := Config{Policy: "gandiva:pack=true:quantum=3600", PairThroughputs: writePairs(t)}
	h := newHarnessWith(t, cfg)
	tjs := h.tideJobs()
	h.node("n0", 1, func(n *corev1.Node) { n.Labels["nvidia.com/gpu.product"] = "V100" })
	h.tideJob(tjs, "a", "A", 1001)
	h.round()
	h.round()
	if a := h.onGPU("a"); a != "n0#0" {
		t.Fatalf("a on %q, want n0#0", a)
	}
	w := h.workersOf("a")[0]
	o, _, _ := tjs.GetByKey("ns/a")
	if err := tjs.Delete(o); err != nil { // the garbage collector then deletes its worker
		t.Fatal(err)
	}
	now := metav1.Now()
	w.DeletionTimestamp = &now
	if err := h.pods.Update(w); err != nil {
		t.Fatal(err)
	}
	h.partPod("half", AnnotGPUFraction, "0.5")
	for i := 0; i < 3; i++ {
		h.round()
		if n := h.get("half").Spec.NodeName; n != "" {
			t.Fatalf("round %d: half bound to %s#%s beside a's terminating worker", i, n, h.get("half").Annotations[AnnotGPUIndex])
		}
	}
	if err := h.pods.Delete(w); err != nil {
		t.Fatal(err)
	}
	h.round()
	if n := h.get("half").Spec.NodeName; n != "n0" {
		t.Errorf("half on %q once a's worker is gone, want n0", n)
	}
}
