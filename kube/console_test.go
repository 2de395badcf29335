package kube

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/console"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// TestEngineTimeline: the job view's timeline on tide kube, from what the
// engine keeps of a job: its first start, last start or resize, last stop
// and counts.
func TestEngineTimeline(t *testing.T) {
	for _, c := range []struct {
		name    string
		st      engine.Status
		reason  string // the policy's reason
		moments string // kinds, in order
		attempt string // outcome of the last launch; "" none
		ended   bool
	}{
		{"never started", engine.Status{State: job.Pending, FirstStart: -1, LastStart: -1, Finish: -1}, "", "", "", false},
		{"running", engine.Status{State: job.Running, FirstStart: 10, LastStart: 10, LastStop: 0, Starts: 1, Finish: -1}, "", "start", "running", false},
		{"preempted, waiting", engine.Status{State: job.Preempted, FirstStart: 10, LastStart: 10, LastStop: 50, Starts: 1, Preemptions: 1, Finish: -1},
			"preempted; shorter jobs first", "start preempted", "preempted", true},
		{"restarted", engine.Status{State: job.Running, FirstStart: 10, LastStart: 80, LastStop: 50, Starts: 2, Preemptions: 1, Finish: -1}, "", "start preempted restart", "running", false},
		{"resized", engine.Status{State: job.Running, FirstStart: 10, LastStart: 30, LastStop: 0, Starts: 1, Resizes: 1, Finish: -1}, "", "start resized", "running", false},
		{"finished", engine.Status{State: job.Finished, FirstStart: 10, LastStart: 10, Starts: 1, Finish: 90}, "", "start", "finished", true},
	} {
		c.st.SetReason(engine.Reason{Text: c.reason})
		var kinds []string
		for _, e := range engineMoments(&c.st) {
			kinds = append(kinds, e.Kind)
			if e.Kind == "preempted" && c.st.Reason().Text != "" && !strings.Contains(e.Message, c.st.Reason().Text) {
				t.Errorf("%s: the preemption %q lacks the policy's reason", c.name, e.Message)
			}
		}
		if got := strings.Join(kinds, " "); got != c.moments {
			t.Errorf("%s: moments %q, want %q", c.name, got, c.moments)
		}
		as := engineAttempt(&c.st)
		switch {
		case c.attempt == "" && len(as) != 0:
			t.Errorf("%s: launches %+v, want none", c.name, as)
		case c.attempt != "" && (len(as) != 1 || as[0].Outcome != c.attempt || (as[0].Ended != nil) != c.ended):
			t.Errorf("%s: launches %+v, want one %s (ended: %v)", c.name, as, c.attempt, c.ended)
		}
	}
}

// TestOutsideGPUsSite shows a node the engine left out (NotReady, or all
// its GPUs held by other schedulers' pods) in the site its own labels
// name, not in the site of whichever node came first.
func TestOutsideGPUsSite(t *testing.T) {
	s := &Scheduler{cfg: Config{Sites: SiteLabels{}}}
	s.cfg.Sites.fill()
	node := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	s.seen = &view{
		nodes: map[string]*corev1.Node{
			"c0":   node("c0", nil),
			"e0":   node("e0", map[string]string{DefaultSiteLabel: "lab", DefaultSiteKindLabel: cluster.SiteEdge}),
			"srv0": node("srv0", map[string]string{DefaultSiteLabel: "serve", DefaultSiteKindLabel: cluster.SiteInference}),
			"odd":  node("odd", map[string]string{DefaultSiteLabel: "x", DefaultSiteKindLabel: "moon"}),
		},
		alloc:   map[string]int{"c0": 2, "e0": 1, "srv0": 4, "odd": 1},
		foreign: map[string]int{"srv0": 4},
		states:  map[string]*nodeState{},
	}
	in := []console.Node{{Name: "c0", Site: "default", SiteKind: cluster.SiteCloud, GPUs: []console.GPU{{Label: "0"}, {Label: "1"}}}}
	out := s.outsideGPUs(in)
	want := map[string][3]string{ // site, kind, why of its first GPU
		"c0":   {"default", cluster.SiteCloud, ""},
		"e0":   {"lab", cluster.SiteEdge, "node e0 is NotReady"},
		"srv0": {"serve", cluster.SiteInference, "held by pods tide does not schedule"},
		"odd":  {"default", cluster.SiteCloud, "node odd is NotReady"},
	}
	if len(out) != len(want) {
		t.Fatalf("got %d nodes, want %d: %+v", len(out), len(want), out)
	}
	for _, n := range out {
		w, ok := want[n.Name]
		if !ok || len(n.GPUs) == 0 {
			t.Errorf("unexpected node %+v", n)
			continue
		}
		if n.Site != w[0] || n.SiteKind != w[1] || n.GPUs[0].Why != w[2] {
			t.Errorf("node %s: site %q kind %q why %q, want %q %q %q", n.Name, n.Site, n.SiteKind, n.GPUs[0].Why, w[0], w[1], w[2])
		}
	}
}
