package kube

import (
	"math"
	"testing"

	corev1 "k8s.io/api/core/v1"
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
			if w.minW < 1 || w.maxW < w.minW || w.per < 1 || !(w.duration > 0) || math.IsInf(w.duration, 0) ||
				math.IsNaN(w.deadline) || j.GPUs < 1 {
				t.Fatalf("workload %+v from annotations %q, GPUs %d: not one tide can schedule", w, annot, gpus)
			}
		}
	})
}
