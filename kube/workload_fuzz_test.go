package kube

import (
	"math"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// FuzzPodAnnotations checks that any values of tide's pod annotations
// (job, gang size, queue, duration, deadline, GPU fraction and memory)
// either make a workload tide can schedule or a problem that names an
// annotation or the GPU limit; never a panic.
func FuzzPodAnnotations(f *testing.F) {
	f.Add(int64(2), "a", "3", "team", "90m", "2026-01-02T15:04:05Z", "", "")
	f.Add(int64(1), "", "", "", "", "", "0.25", "")
	f.Add(int64(1), "j", "0", "", "", "", "", "")
	f.Add(int64(0), "b", "zero", "", "-1h", "tomorrow", "1.5", "10Gi")
	f.Fuzz(func(t *testing.T, gpus int64, jobName, gang, queue, duration, deadline, fraction, mem string) {
		var annot []string
		for _, kv := range [][2]string{{AnnotJob, jobName}, {AnnotGangSize, gang}, {AnnotQueue, queue},
			{AnnotDuration, duration}, {AnnotDeadline, deadline}, {AnnotGPUFraction, fraction}, {AnnotGPUMemory, mem}} {
			if kv[1] != "" {
				annot = append(annot, kv[0], kv[1])
			}
		}
		p := pod("p", max(min(gpus, 1<<20), -1), annot...)
		ws, probs := grouping{}.group([]*corev1.Pod{p}, nil)
		if len(ws)+len(probs) != 1 {
			t.Fatalf("%d workloads and %d problems for one pod, want one of either", len(ws), len(probs))
		}
		for _, pr := range probs {
			if pr.msg == "" || pr.name != "p" {
				t.Fatalf("problem %+v: want the pod named and a message", pr)
			}
		}
		for _, w := range ws {
			j := w.job("x")
			if !schedulable(w) || math.IsNaN(w.deadline) || j.GPUs < 1 {
				t.Fatalf("workload %+v from annotations %q, GPUs %d: not one tide can schedule", w, annot, gpus)
			}
		}
	})
}

// FuzzTideJobSpec checks that any TideJob spec either makes a workload
// tide can schedule or is refused with a message that names a spec field;
// never a panic.
func FuzzTideJobSpec(f *testing.F) {
	f.Add(2, 4, 2, "", "", "", "A100", 0, "team", "90m")
	f.Add(1, 1, 1, "0.5", "10Gi", "", "", 0, "", "")
	f.Add(0, 0, 0, "", "", "", "", 0, "", "")
	f.Add(3, 2, 2000, "1.5", "x", "Z", "", -5, "", "3 hours")
	f.Add(1, 4, 1, "0.25", "", "", "", 0, "", "")
	f.Fuzz(func(t *testing.T, minW, maxW, per int, fraction, mem, jobType, gpuType string, priority int, queue, duration string) {
		tj := &TideJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "tj", UID: "u"},
			Spec: TideJobSpec{MinWorkers: minW, MaxWorkers: maxW, GPUsPerWorker: per, GPUFraction: fraction, GPUMemory: mem,
				JobType: jobType, GPUType: gpuType, Priority: priority, Queue: queue, Duration: duration,
				Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "x"}}}}}}
		w, err := grouping{}.fromTideJob(tj)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "spec.") {
				t.Fatalf("spec %+v: error %q names no spec field", tj.Spec, err)
			}
			return
		}
		j := w.job("x")
		if !schedulable(w) || j.GPUs < 1 || j.MaxGPUs < j.GPUs {
			t.Fatalf("spec %+v gave workload %+v: not one tide can schedule", tj.Spec, w)
		}
	})
}

// schedulable reports whether w's gang and duration are ones the engine
// can plan: at least one worker of at least one GPU, no more minimum
// workers than maximum, a finite positive duration.
func schedulable(w *workload) bool {
	return w.minW >= 1 && w.maxW >= w.minW && w.per >= 1 && w.duration > 0 && !math.IsInf(w.duration, 0)
}
