package kube

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/tide-sched/tide/job"
)

// GPU sharing (docs/sharing.md): a pod may ask for part of a GPU. A plain
// pod says so by annotation, as KAI-Scheduler's gpu-fraction and
// gpu-memory annotations do: AnnotGPUFraction ("0.25" or "25%") and/or
// AnnotGPUMemory (a Kubernetes quantity, "8Gi"), instead of an
// nvidia.com/gpu limit; a TideJob by spec.gpuFraction and spec.gpuMemory.
// A pod asking for a MIG slice (nvidia.com/mig-<profile>) asks for that
// profile. tide kube reads and checks all three, naming the field at
// fault. A share or memory makes the workload fractional: the engine packs
// its workers' parts onto GPUs (engine/fraction.go) and tide binds each
// worker to a node and a GPU index there (gpuindex.go). A MIG slice is an
// ordinary extended resource of its node (mig.go).
const (
	// AnnotGPUFraction is the part of one GPU's compute a plain pod needs.
	AnnotGPUFraction = Group + "/gpu-fraction"
	// AnnotGPUMemory is the GPU memory a plain pod needs on its GPU.
	AnnotGPUMemory = Group + "/gpu-memory"
	// migPrefix begins the extended resources of MIG slices.
	migPrefix = "nvidia.com/mig-"
)

// part is what one worker asks of its GPU when it asks for part of one;
// the zero part means whole GPUs.
type part struct {
	share  float64
	memGiB float64
	mig    string
}

// fractional: the worker holds a share or memory of a GPU that other
// parts share (a MIG slice is not fractional: it is a device of its own).
func (p part) fractional() bool { return p.share > 0 || p.memGiB > 0 }

// parsePart reads a part from a share and a memory quantity as written in
// an annotation or a TideJob's spec (empty: not given); fields name them
// in errors.
func parsePart(share, mem, shareField, memField string) (part, error) {
	var p part
	if share != "" {
		v, err := job.ParseShare(share)
		if err != nil {
			return part{}, fmt.Errorf("%s: %w", shareField, err)
		}
		p.share = v
	}
	if mem != "" {
		q, err := resource.ParseQuantity(strings.TrimSpace(mem))
		if err != nil || q.Sign() <= 0 {
			return part{}, fmt.Errorf("%s: want a positive quantity of memory such as 8Gi or 500Mi, got %q", memField, mem)
		}
		p.memGiB = float64(q.Value()) / (1 << 30)
	}
	return p, nil
}

// podMIG returns the MIG profile a pod's containers ask for
// (nvidia.com/mig-<profile>, one slice), "" when none; an error when it
// asks for several profiles or slices, or a profile tide cannot read.
func podMIG(p *corev1.Pod) (string, error) {
	profile := ""
	for _, cs := range [][]corev1.Container{p.Spec.InitContainers, p.Spec.Containers} {
		for i := range cs {
			for _, rl := range []corev1.ResourceList{cs[i].Resources.Limits, cs[i].Resources.Requests} {
				for name, q := range rl {
					prof, ok := strings.CutPrefix(string(name), migPrefix)
					if !ok {
						continue
					}
					field := fmt.Sprintf("containers[%s].resources[%s]", cs[i].Name, name)
					if _, _, err := job.ParseMIG(prof); err != nil {
						return "", fmt.Errorf("%s: %w", field, err)
					}
					if q.Value() != 1 {
						return "", fmt.Errorf("%s: want one MIG slice, got %s", field, q.String())
					}
					if profile != "" && profile != prof {
						return "", fmt.Errorf("%s: the pod asks for MIG profiles %s and %s; want one", field, profile, prof)
					}
					profile = prof
				}
			}
		}
	}
	return profile, nil
}

// podPart reads what a plain pod asks of part of a GPU (annotations, MIG
// resources); the zero part when it asks for whole GPUs. A pod asking for
// part of a GPU asks for no whole one (gpus, from its nvidia.com/gpu
// limits).
func podPart(p *corev1.Pod, gpus int64) (part, error) {
	pt, err := parsePart(p.Annotations[AnnotGPUFraction], p.Annotations[AnnotGPUMemory], "annotation "+AnnotGPUFraction, "annotation "+AnnotGPUMemory)
	if err != nil {
		return part{}, err
	}
	if pt.mig, err = podMIG(p); err != nil {
		return part{}, err
	}
	switch {
	case pt.mig != "" && (pt.share > 0 || pt.memGiB > 0):
		return part{}, fmt.Errorf("annotation %s or %s: the pod asks for MIG slice %s, which fixes its share and memory; give one or the other", AnnotGPUFraction, AnnotGPUMemory, pt.mig)
	case (pt.fractional() || pt.mig != "") && gpus > 0:
		return part{}, fmt.Errorf("resources.limits[%s]: the pod asks for part of a GPU, so it asks for no whole GPU; got %d", GPUResource, gpus)
	}
	return pt, nil
}

// tideJobPart reads what a TideJob's workers ask of part of a GPU.
func tideJobPart(s *TideJobSpec) (part, error) {
	pt, err := parsePart(s.GPUFraction, s.GPUMemory, "spec.gpuFraction", "spec.gpuMemory")
	if err != nil {
		return part{}, err
	}
	if pt.fractional() && s.GPUsPerWorker > 1 {
		return part{}, fmt.Errorf("spec.gpusPerWorker: a worker with part of a GPU holds part of one, got %d", s.GPUsPerWorker)
	}
	if pt.fractional() && s.MaxWorkers > max(1, s.MinWorkers) {
		return part{}, fmt.Errorf("spec.maxWorkers: a TideJob whose workers hold part of a GPU is rigid: want %d (minWorkers), got %d", max(1, s.MinWorkers), s.MaxWorkers)
	}
	return pt, nil
}

// podGPUs is the GPUs each worker of w asks the device plugin for: none
// for a part, a packable job's worker (bound by GPU index, sharepairs.go)
// or a MIG slice (a slice is a resource of its own).
func (w *workload) podGPUs() int {
	if w.indexed() || w.part.mig != "" {
		return 0
	}
	return w.per
}

// engineType is the GPU type the engine places w's workers on: the type
// of the GPUs they ask for, or of the MIG slices (mig.go).
func (w *workload) engineType() string {
	if w.part.mig != "" {
		return migType(w.part.mig)
	}
	return w.gpuType
}
