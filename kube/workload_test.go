package kube

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func pod(name string, gpus int64, annot ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Annotations: map[string]string{},
		CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Spec: corev1.PodSpec{SchedulerName: "tide", Containers: []corev1.Container{{Name: "c"}}}}
	if gpus > 0 {
		p.Spec.Containers[0].Resources.Limits = corev1.ResourceList{GPUResource: *resource.NewQuantity(gpus, resource.DecimalSI)}
	}
	for i := 0; i+1 < len(annot); i += 2 {
		p.Annotations[annot[i]] = annot[i+1]
	}
	return p
}

// TestGroup groups plain pods into gangs and single-pod jobs, and refuses
// bad annotations with errors naming the pod and the field.
func TestGroup(t *testing.T) {
	g := grouping{gpuTypeLabel: "gpu"}
	pods := []*corev1.Pod{
		pod("a-0", 2, AnnotJob, "a", AnnotGangSize, "3"),
		pod("a-1", 2, AnnotJob, "a", AnnotGangSize, "3"),
		pod("solo", 1, AnnotDuration, "90m"),
		pod("bad-gang", 1, AnnotJob, "b", AnnotGangSize, "zero"),
		pod("no-job", 1, AnnotGangSize, "2"),
		pod("no-gpu", 0),
		pod("mismatch", 1, AnnotJob, "a", AnnotGangSize, "3"),
		pod("bad-deadline", 1, AnnotDeadline, "tomorrow"),
		pod("far-deadline", 1, AnnotDeadline, "9999-01-01T00:00:00Z"),
	}
	pods[2].Spec.NodeSelector = map[string]string{"gpu": "A100"}
	done := pod("a-2", 2, AnnotJob, "a", AnnotGangSize, "3")
	done.Status.Phase = corev1.PodSucceeded
	pods = append(pods, done)
	ws, probs := g.group(pods, nil)
	a := ws["pods/ns/a"]
	if a == nil || a.minW != 3 || a.maxW != 3 || a.per != 2 || len(a.pods) != 2 || a.succeeded != 1 {
		t.Fatalf("gang a = %+v, want 3 workers of 2 GPUs, 2 live pods, 1 succeeded", a)
	}
	solo := ws["pods/ns/solo"]
	if solo == nil || solo.minW != 1 || solo.duration != 5400 || solo.gpuType != "a100" || solo.tenant != "ns" {
		t.Fatalf("solo = %+v", solo)
	}
	wantProbs := map[string]string{
		"bad-gang":     "gang-size: want a whole number",
		"no-job":       "needs " + AnnotJob,
		"no-gpu":       "asks for none",
		"mismatch":     "1 GPUs in a gang of 3, but its first pod asks for 2 GPUs",
		"bad-deadline": "RFC 3339",
		"far-deadline": "deadline: want a time from 1970-01-01T00:00:00Z to 2286-11-20T17:46:40Z, got 9999-01-01T00:00:00Z",
	}
	if len(probs) != len(wantProbs) {
		t.Errorf("problems %v, want %d", probs, len(wantProbs))
	}
	for _, p := range probs {
		if want := wantProbs[p.name]; want == "" || !strings.Contains(p.msg, want) {
			t.Errorf("problem for %s: %q, want it to contain %q", p.name, p.msg, want)
		}
	}
}

// TestTideJobWorkload reads a TideJob's spec with defaults and refuses bad
// fields by name; its worker pods carry the label, owner and GPU limit.
func TestTideJobWorkload(t *testing.T) {
	tj := &TideJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "train", UID: "u1"},
		Spec: TideJobSpec{MinWorkers: 2, MaxWorkers: 4, GPUsPerWorker: 2, Queue: "team",
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "w", Image: "x"}}}}}}
	g := grouping{}
	w, err := g.fromTideJob(tj)
	if err != nil {
		t.Fatal(err)
	}
	if w.minW != 2 || w.maxW != 4 || w.per != 2 || w.tenant != "team" || w.duration != 3600 {
		t.Fatalf("workload %+v", w)
	}
	j := w.job("id")
	if err := j.Validate(); err != nil || j.MinGPUs != 4 || j.MaxGPUs != 8 {
		t.Fatalf("job %+v: %v", j, err)
	}
	p := workerPod(w, "tide")
	if p.Labels[LabelTideJob] != "train" || p.Spec.SchedulerName != "tide" || len(p.OwnerReferences) != 1 ||
		p.OwnerReferences[0].UID != "u1" || podGPUs(p) != 2 || p.Spec.RestartPolicy != corev1.RestartPolicyNever {
		t.Errorf("worker pod %+v", p)
	}
	for _, tc := range []struct {
		mod  func(s *TideJobSpec)
		want string
	}{
		{func(s *TideJobSpec) { s.MaxWorkers = 1 }, "spec.maxWorkers"},
		{func(s *TideJobSpec) { s.GPUsPerWorker = -1 }, "spec.gpusPerWorker"},
		{func(s *TideJobSpec) { s.Duration = "soon" }, "spec.duration"},
		{func(s *TideJobSpec) {
			s.Deadline = &metav1.Time{Time: time.Date(9999, 1, 1, 0, 0, 0, 0, time.UTC)}
		}, "spec.deadline: want a time from 1970"},
		{func(s *TideJobSpec) { s.Template.Spec.Containers = nil }, "spec.template.spec.containers"},
	} {
		bad := tj.DeepCopy()
		tc.mod(&bad.Spec)
		if _, err := g.fromTideJob(bad); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("error %v, want it to name %s", err, tc.want)
		}
	}
}
