package kubetest

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/kube"
)

// TestKubeTidalHolds: tidal under tide kube holds a deadline job that
// EdgeFlow's admission would decline, as in the simulator
// (policy/flow TestTidalHoldsInsteadOfDeclining), and says so on the
// TideJob.
//
// The cloud is one node of 4 GPUs. a (40 min of work on 4 GPUs, due in
// 45 min) holds all of it. b (20 min on 4 GPUs, due in 50 min) would end
// at 60 min after a, too late: EdgeFlow declines it, but the whole cloud
// from now would end it at 20 min, so tidal holds it. c (20 min on 4
// GPUs, due in 20 min 20 s) is held too, until the whole cloud could no
// longer end it in time: then it is declined, with tidal's reason. A
// restart of tide while b is held keeps it held (nothing of the hold is
// kept but the TideJobs and their pods). When a ends early, b is admitted,
// starts and meets its deadline.
// swap=off: under the default swap=mh, b would take a's place instead
// (tide serve's TestTidalSwapsLive shows that).
func TestKubeTidalHolds(t *testing.T) {
	e := startEnv(t)
	const ns = "tidal-hold"
	s := e.scenario(t, "tide-tidal-hold", ns)
	s.node("th-0", 4, "A100")
	s.kubeletLoop(ns, 0)
	_, stop := s.start(kube.Config{Policy: "tidal:swap=off"})
	deadlines := map[string]time.Time{}
	due := func(name string, d time.Duration, run string) func(*kube.TideJob) {
		return func(tj *kube.TideJob) {
			at := metav1.NewTime(time.Now().Add(d).Truncate(time.Second))
			tj.Spec.Deadline, tj.Spec.Duration = &at, run
			deadlines[name] = at.Time
		}
	}
	s.tidejob(ns, "a", 4, 4, 1, due("a", 45*time.Minute, "40m"))
	eventually(t, 30*time.Second, func() (bool, string) {
		return s.workers(ns, "a") == 4, fmt.Sprintf("a: %v", s.where(ns))
	})
	s.tidejob(ns, "b", 4, 4, 1, due("b", 50*time.Minute, "20m"))
	s.tidejob(ns, "c", 4, 4, 1, due("c", 20*time.Minute+20*time.Second, "20m"))

	// held: phase Pending, no workers, Admitted and Running False with
	// reason Held and tidal's reason, its times as UTC times.
	held := func(name string) (bool, string) {
		tj := s.getTideJob(ns, name)
		run, ad := cond(tj.Status.Conditions, kube.CondRunning), cond(tj.Status.Conditions, kube.CondAdmitted)
		ok := tj.Status.Phase == kube.PhasePending && strings.HasPrefix(tj.Status.Message, "held, not declined") &&
			run != nil && run.Status == metav1.ConditionFalse && run.Reason == "Held" && run.Message == tj.Status.Message &&
			ad != nil && ad.Status == metav1.ConditionFalse && ad.Reason == "Held" && ad.Message == tj.Status.Message &&
			s.workers(ns, name) == 0
		return ok, fmt.Sprintf("%s: phase %q, message %q, Admitted %+v, Running %+v, %d workers; want Pending, Admitted and Running False/Held with tidal's reason, no worker",
			name, tj.Status.Phase, tj.Status.Message, ad, run, s.workers(ns, name))
	}
	for _, name := range []string{"b", "c"} {
		eventually(t, 30*time.Second, func() (bool, string) { return held(name) })
	}
	// b's message names the latest admission that still ends it by its
	// deadline (its deadline less its 20 min of work) and its deadline,
	// as UTC times.
	tb := s.getTideJob(ns, "b")
	t.Logf("b held: %s", tb.Status.Message)
	t.Logf("c held: %s", s.getTideJob(ns, "c").Status.Message)
	if want := "deadline " + deadlines["b"].UTC().Format(time.RFC3339); !strings.Contains(tb.Status.Message, want) {
		t.Errorf("b's message %q does not name its deadline (%q)", tb.Status.Message, want)
	}
	if m := regexp.MustCompile(`admitted by (\S+);`).FindStringSubmatch(tb.Status.Message); m == nil {
		t.Errorf("b's message %q does not say by when it must be admitted", tb.Status.Message)
	} else if at, err := time.Parse(time.RFC3339, m[1]); err != nil {
		t.Errorf("b's message: the latest admission %q is not an RFC 3339 time: %v", m[1], err)
	} else if want := deadlines["b"].UTC().Add(-20 * time.Minute); at.After(want.Add(time.Second)) || at.Before(want.Add(-time.Minute)) {
		t.Errorf("b's message: latest admission %v, want its deadline less 20 min of work, %v (up to a minute earlier for start-up)", at, want)
	}
	// c is declined once the whole cloud would end it too late; b stays
	// held meanwhile.
	eventually(t, 2*time.Minute, func() (bool, string) {
		if ok, why := held("b"); !ok {
			t.Fatalf("while c waits to be declined: %s", why)
		}
		tj := s.getTideJob(ns, "c")
		return tj.Status.Phase == kube.PhaseDeclined, fmt.Sprintf("c: phase %q, message %q; want Declined", tj.Status.Phase, tj.Status.Message)
	})
	c := s.getTideJob(ns, "c")
	t.Logf("c declined: %s", c.Status.Message)
	if !strings.Contains(c.Status.Message, "the whole cloud from now would not end it in time") || strings.HasPrefix(c.Status.Message, "declined: declined") {
		t.Errorf("c's message %q does not give tidal's reason (the whole cloud would end it too late) once", c.Status.Message)
	}
	if ad := cond(c.Status.Conditions, kube.CondAdmitted); ad == nil || ad.Status != metav1.ConditionFalse || ad.Reason != "Declined" || ad.Message != c.Status.Message {
		t.Errorf("c: Admitted %+v, want False/Declined with its message", ad)
	}

	// A restart while b is held: still held, a undisturbed, c still declined.
	stop()
	s.start(kube.Config{Policy: "tidal:swap=off"})
	for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if ok, why := held("b"); !ok {
			t.Fatalf("after the restart: %s", why)
		}
		if n := s.workers(ns, "a"); n != 4 {
			t.Fatalf("after the restart a has %d workers, want 4", n)
		}
		if tj := s.getTideJob(ns, "c"); tj.Status.Phase != kube.PhaseDeclined {
			t.Fatalf("after the restart c is %q (%s), want still Declined", tj.Status.Phase, tj.Status.Message)
		}
	}

	// a ends early: b is admitted, starts and meets its deadline.
	s.succeed(ns, "a")
	eventually(t, 30*time.Second, func() (bool, string) {
		tj := s.getTideJob(ns, "b")
		return tj.Status.Phase == kube.PhaseRunning && s.workers(ns, "b") == 4,
			fmt.Sprintf("b: phase %q, message %q, %d workers; want Running on 4", tj.Status.Phase, tj.Status.Message, s.workers(ns, "b"))
	})
	s.succeed(ns, "b")
	for _, name := range []string{"a", "b"} {
		eventually(t, 30*time.Second, func() (bool, string) {
			tj := s.getTideJob(ns, name)
			return tj.Status.Phase == kube.PhaseSucceeded && tj.Status.DeadlineOutcome == kube.DeadlineMet,
				fmt.Sprintf("%s: phase %q, outcome %q; want Succeeded, Met", name, tj.Status.Phase, tj.Status.DeadlineOutcome)
		})
	}

	// What kubectl describe tidejob shows as events: b was held once (not
	// again after the restart), then admitted; c held, then declined once.
	want := map[string][]string{"b": {"Held", "Admitted", "WorkersBound", "Succeeded"}, "c": {"Held", "Declined"}}
	eventually(t, 30*time.Second, func() (bool, string) {
		l, err := s.cs.EventsV1().Events(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		sort.SliceStable(l.Items, func(i, j int) bool { return l.Items[i].EventTime.Before(&l.Items[j].EventTime) })
		got := map[string][]string{}
		var all []string
		ok := true
		for _, ev := range l.Items {
			name := ev.Regarding.Name
			if ev.Regarding.Kind != "TideJob" || want[name] == nil {
				continue
			}
			all = append(all, ev.Type+" "+ev.Reason+" "+name+": "+ev.Note)
			got[name] = append(got[name], ev.Reason)
			switch ev.Reason {
			case "Held":
				ok = ok && ev.Type == corev1.EventTypeNormal && strings.HasPrefix(ev.Note, "held, not declined: the whole cloud would still end it by its deadline if admitted by ")
			case "Declined":
				ok = ok && ev.Type == corev1.EventTypeWarning && strings.Contains(ev.Note, "the whole cloud from now would not end it in time")
			}
		}
		ok = ok && fmt.Sprint(got["b"]) == fmt.Sprint(want["b"]) && fmt.Sprint(got["c"]) == fmt.Sprint(want["c"])
		return ok, fmt.Sprintf("events %q; want in order %v, Held and Declined with tidal's reasons", all, want)
	})
}

// succeed ends a TideJob's workers as Succeeded once the kubelet loop has
// marked them all Running (it writes their status too).
func (s *scenario) succeed(ns, name string) {
	s.t.Helper()
	eventually(s.t, 30*time.Second, func() (bool, string) {
		var phases []corev1.PodPhase
		ok := true
		for _, p := range s.workerPods(ns, name) {
			phases = append(phases, p.Status.Phase)
			ok = ok && p.Status.Phase == corev1.PodRunning
		}
		return ok && len(phases) > 0, fmt.Sprintf("%s's workers %v, want all Running", name, phases)
	})
	for _, p := range s.workerPods(ns, name) {
		s.end(ns, corev1.PodSucceeded, p.Name)
	}
}
