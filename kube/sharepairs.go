package kube

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/perf/table"
)

// Packing whole-GPU pairs (docs/sharing.md, "tide kube").
//
// Given a pair-throughput table (Config.PairThroughputs, Gavel's
// simulation_throughputs.json format, as tide serve's --pair-throughputs),
// the engine may pack two whole-GPU jobs on the same GPUs
// (engine.Assignment.PackWith) when the policy packs (gandiva:pack=true,
// gavel-*:space_sharing=true), as in the simulator. A whole-GPU pod gets
// its GPU from the device plugin, which picks the device, so tide could
// never put a partner on the same one. So a packable job, a TideJob whose
// spec.jobType the table knows, has workers made without an
// nvidia.com/gpu limit and bound by GPU index, as parts are
// (gpuindex.go), whether it runs alone or packed: a partner can then
// join a GPU one already runs on. Each worker gets NVIDIA_VISIBLE_DEVICES
// of its index and, when its job is packed as the worker is made, half of
// the GPU's threads (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE=50, as tide serve
// gives a packed pair). The index is counted as a GPU that holds parts
// is: taken from the whole GPUs the device plugin may give. A restarted
// tide kube adopts both members on the index they hold (engine.Adopt
// re-pairs two jobs found on the same GPUs when the table rates them) and
// evicts a third. Plain pods asking for nvidia.com/gpu are never packed:
// their spec is immutable and their GPU the device plugin's choice.

// packedShare is the part of a GPU's threads each member of a packed pair
// gets: the pair splits the GPU evenly (as tide serve splits it).
const packedShare = 0.5

// loadPairs is the pair model of the throughput file path, nil for "".
func loadPairs(path string) (*perf.Pairs, error) {
	if path == "" {
		return nil, nil
	}
	g, err := table.LoadGavel(path)
	if err != nil {
		return nil, err
	}
	return &perf.Pairs{Base: perf.Duration{}, Table: g}, nil
}

// pairTable is what grouping checks job types against: the table and the
// file it came from (nil: tide kube packs nothing, and spec.jobType is a
// name alone).
type pairTable struct {
	file  string
	model perf.Model // the table (a *table.Gavel)
}

// checkJobType reads a TideJob's spec.jobType into w (already read
// otherwise): w is packable when a table is given and knows the type at
// the job's GPU count; a type the table does not know, or a packable job
// whose workers hold several GPUs or part of one, is refused naming the
// field.
func (t *pairTable) checkJobType(w *workload, s *TideJobSpec) error {
	w.jobType = s.JobType
	if s.JobType == "" || t == nil {
		return nil
	}
	if w.part.fractional() {
		return fmt.Errorf("spec.jobType: a job whose workers hold part of a GPU (spec.gpuFraction, spec.gpuMemory) shares its GPU by its part, never in a packed pair; give one or the other")
	}
	if w.per != 1 {
		return fmt.Errorf("spec.gpusPerWorker: a packable job (spec.jobType %q) is bound by GPU index, one GPU per worker; got %d", s.JobType, w.per)
	}
	probe := &job.Job{ID: w.key, Model: s.JobType, GPUs: w.minW, Unit: job.Iterations, GPUType: w.gpuType}
	if err := t.model.Check(probe); err != nil {
		return fmt.Errorf("spec.jobType: %w, in %s (--pair-throughputs): it could never be packed", err, t.file)
	}
	w.pack = true
	return nil
}

// indexed: w's workers are bound to a GPU index (parts, packable jobs).
func (w *workload) indexed() bool { return w.part.fractional() || w.pack }

// packEnv is the environment of a packable worker on GPU idx of its node:
// NVIDIA_VISIBLE_DEVICES selects the GPU (device 0 in the container),
// TIDE_GPU_INDEX names it, and a worker made while its job is packed gets
// half of the GPU's threads (localexec.ShareEnv: CUDA MPS's active thread
// percentage, TIDE_GPU_SHARE). A worker made alone keeps all the threads
// when a partner joins later (its environment cannot change); the
// partner runs with half.
func packEnv(idx int, packed bool) []corev1.EnvVar {
	i := strconv.Itoa(idx)
	env := []corev1.EnvVar{{Name: "NVIDIA_VISIBLE_DEVICES", Value: i}, {Name: "CUDA_VISIBLE_DEVICES", Value: "0"},
		{Name: "TIDE_GPU_INDEX", Value: i}}
	if packed {
		env = append(env, shareEnv(packedShare, 0)...)
	}
	return env
}

// shareEnv is localexec.ShareEnv (one device, no MPS pipe directory) as
// a pod's environment.
func shareEnv(share, memGiB float64) []corev1.EnvVar {
	var env []corev1.EnvVar
	for _, kv := range localexec.ShareEnv(share, memGiB, 1, "") {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, corev1.EnvVar{Name: k, Value: v})
	}
	return env
}

// noteIndexJob records, in v, that a live pod of workload key is bound to
// GPU idx of node (terminating pods too: they hold the GPU until gone).
func (v *view) noteIndexJob(node string, idx int, key string) {
	if v.onIndex == nil {
		v.onIndex = map[string][]string{}
	}
	slot := partSlot(node, idx)
	if !slices.Contains(v.onIndex[slot], key) {
		v.onIndex[slot] = append(v.onIndex[slot], key)
	}
}

// pairRoom says whether the workers of w (engine job id) may be bound to
// slots now, as to who else is on their GPU indices: a packable job's
// index holds no pod of another job but its partner's (so no GPU ever
// holds more than two jobs, nor a job beside one it is not packed with,
// even while an evicted pod terminates); a part's index holds no pod of
// a packable job. partner is the workload key of the job w is packed
// with now ("" when alone).
func (v *view) pairRoom(w *workload, slots []string, partner string) bool {
	for _, sl := range slots {
		if _, idx := slotNode(sl); idx < 0 {
			continue
		}
		for _, k := range v.onIndex[sl] {
			switch {
			case k == w.key:
			case w.pack && k != partner:
				return false
			case !w.pack && v.work[k] != nil && v.work[k].pack:
				return false
			}
		}
	}
	return true
}

// claimIndices records that w's workers are being bound to slots.
func (v *view) claimIndices(w *workload, slots []string) {
	for _, sl := range slots {
		if node, idx := slotNode(sl); idx >= 0 {
			v.noteIndexJob(node, idx, w.key)
		}
	}
}

// partnerKey is the workload key of the job engine job id is packed with
// now, "" when it runs alone.
func (s *Scheduler) partnerKey(id string) string {
	st := s.eng.Job(id)
	if st == nil || st.PackedWith == "" {
		return ""
	}
	if w := s.work[st.PackedWith]; w != nil {
		return w.key
	}
	return ""
}

// placeTrial places run on pl as the engine would place it: packed pairs
// as one (engine.PlacePairs) when the snapshot packs or runs pairs;
// held is left as it was.
func placeTrial(s *engine.Snapshot, pl engine.Placer, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	paired := false
	if s.Sharing {
		for _, a := range run {
			paired = paired || a.PackWith != ""
		}
		for _, st := range s.Jobs {
			paired = paired || st.PackedWith != ""
		}
	}
	if !paired {
		return pl.Place(s.Cluster, held, run)
	}
	return engine.PlacePairs(maps.Clone(held), run, func(h map[string][]cluster.GPUID, r []engine.Assignment) map[string][]cluster.GPUID {
		return pl.Place(s.Cluster, h, r)
	})
}

// mutualPairs unpacks the assignments of plan whose partner no longer
// names them (keep rewrote one member of a pair): pairs must be mutual.
func mutualPairs(plan *engine.Plan) {
	with := make(map[string]string, len(plan.Run))
	for _, a := range plan.Run {
		with[a.Job] = a.PackWith
	}
	for i, a := range plan.Run {
		if a.PackWith != "" && with[a.PackWith] != a.Job {
			plan.Run[i].PackWith = ""
		}
	}
}

// removeStale deletes unbound workers tide will not bind (made for a GPU
// index a failed bind did not give them); the next rounds make new ones.
func (s *Scheduler) removeStale(calls *calls, pods []*corev1.Pod) {
	for _, p := range pods {
		if s.evicted[p.UID] {
			continue
		}
		s.evicted[p.UID] = true
		calls.do(func(ctx context.Context) {
			if err := s.remove(ctx, p); err != nil {
				calls.then(func() {
					delete(s.evicted, p.UID)
					s.log.Warn("deleting an unbound worker failed", "pod", p.Namespace+"/"+p.Name, "err", err)
				})
			}
		})
	}
}
