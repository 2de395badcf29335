package kube

import (
	"log/slog"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// TestWorkerPlacerSites keeps every job in one site and every edge job on
// one server, as the simulator's placers do.
func TestWorkerPlacerSites(t *testing.T) {
	c, err := cluster.New([]cluster.Node{
		{Name: "c0", Site: "cloud", GPUType: "a100", GPUs: 4},
		{Name: "c1", Site: "cloud", GPUType: "a100", GPUs: 4},
		{Name: "i0", Site: "infer", SiteKind: cluster.SiteInference, GPUType: "a100", GPUs: 4},
		{Name: "e0", Site: "edge", SiteKind: cluster.SiteEdge, GPUType: "a100", GPUs: 2},
		{Name: "e1", Site: "edge", SiteKind: cluster.SiteEdge, GPUType: "a100", GPUs: 2},
	})
	if err != nil {
		t.Fatal(err)
	}
	p := workerPlacer{per: func(string) int { return 1 }}
	node := func(g cluster.GPUID) *cluster.Node { return c.NodeOf(g) }
	oneSite := func(id string, gs []cluster.GPUID) string {
		for _, g := range gs {
			if node(g).Site != node(gs[0]).Site {
				t.Errorf("%s spans sites %s and %s: %v", id, node(gs[0]).Site, node(g).Site, gs)
			}
		}
		return node(gs[0]).Site
	}

	// 10 GPUs exist outside the edge, 8 in the cloud: 10 workers fit no site.
	got := p.Place(c, nil, []engine.Assignment{{Job: "big", GPUs: 10}})
	if gs, ok := got["big"]; ok {
		t.Errorf("big placed on %v, want it left out: no site has 10 GPUs", gs)
	}
	// 6 fit only in the cloud; then 4 go to the inference site, the cloud's
	// 2 left over notwithstanding.
	got = p.Place(c, nil, []engine.Assignment{{Job: "a", GPUs: 6}, {Job: "b", GPUs: 4}})
	if s := oneSite("a", got["a"]); len(got["a"]) != 6 || s != "cloud" {
		t.Errorf("a = %v in %s, want 6 GPUs in the cloud", got["a"], s)
	}
	if s := oneSite("b", got["b"]); len(got["b"]) != 4 || s != "infer" {
		t.Errorf("b = %v in %s, want 4 GPUs in the inference site", got["b"], s)
	}
	// An edge job takes one server: 2 workers share a 2-GPU server, 3 fit
	// on none though the site has 4 GPUs.
	got = p.Place(c, nil, []engine.Assignment{{Job: "e2", GPUs: 2, Site: "edge"}, {Job: "e3", GPUs: 3, Site: "edge"}})
	if gs := got["e2"]; len(gs) != 2 || node(gs[0]).SiteKind != cluster.SiteEdge || node(gs[0]) != node(gs[1]) {
		t.Errorf("e2 = %v, want both workers on one edge server", gs)
	}
	if gs, ok := got["e3"]; ok {
		t.Errorf("e3 placed on %v, want it left out: no edge server has 3 GPUs", gs)
	}
	// A job growing on an edge server grows there or not at all; one
	// growing in the cloud stays in the cloud.
	e0 := c.Nodes[3].First
	got = p.Place(c, map[string][]cluster.GPUID{"g": {e0}}, []engine.Assignment{{Job: "g", GPUs: 2}})
	if gs := got["g"]; len(gs) != 2 || node(gs[1]).Name != "e0" {
		t.Errorf("g grown to %v, want its second worker on e0 too", gs)
	}
	got = p.Place(c, map[string][]cluster.GPUID{"g": {e0}, "x": {e0 + 1}}, []engine.Assignment{{Job: "x", GPUs: 1}, {Job: "g", GPUs: 2}})
	if gs, ok := got["g"]; ok {
		t.Errorf("g grown to %v, want it left out: its server e0 is full", gs)
	}
	got = p.Place(c, map[string][]cluster.GPUID{"h": {0, 1, 2, 3}}, []engine.Assignment{{Job: "h", GPUs: 8}})
	if s := oneSite("h", got["h"]); len(got["h"]) != 8 || s != "cloud" {
		t.Errorf("h grown to %v, want 8 GPUs in the cloud", got["h"])
	}
	// A job the plan moves to another site keeps nothing where it is (it
	// holds 2 GPUs of the inference site, the plan puts its 2 in the cloud).
	i0 := c.Nodes[2].First
	got = p.Place(c, map[string][]cluster.GPUID{"m": {i0, i0 + 1}}, []engine.Assignment{{Job: "m", GPUs: 2, Site: "cloud"}})
	if s := oneSite("m", got["m"]); len(got["m"]) != 2 || s != "cloud" {
		t.Errorf("m moved to %v in %s, want 2 GPUs in the cloud", got["m"], s)
	}
}

// TestNodeSites reads sites from the configured labels and leaves out the
// nodes whose kind tide cannot use.
func TestNodeSites(t *testing.T) {
	s, err := New(Config{Client: nil})
	if err == nil || s != nil {
		t.Fatalf("New without a client = %v, want an error", err)
	}
	s = &Scheduler{cfg: Config{Sites: SiteLabels{Site: "x/site"}}, said: map[string]string{}}
	s.cfg.Sites.fill()
	s.log = slog.New(slog.DiscardHandler)
	mk := func(name string, labels map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	}
	v := &view{nodes: map[string]*corev1.Node{
		"a": mk("a", nil),
		"b": mk("b", map[string]string{"x/site": "lab", DefaultSiteKindLabel: "edge"}),
		"c": mk("c", map[string]string{"x/site": "lab", DefaultSiteKindLabel: "inference"}),
		"d": mk("d", map[string]string{"x/site": "pool", DefaultSiteKindLabel: "gpu-farm"}),
		"e": mk("e", map[string]string{DefaultSiteLabel: "ignored", DefaultSiteKindLabel: "inference"}),
	}}
	got := s.nodeSites(v, []string{"a", "b", "c", "d", "e"})
	want := map[string][2]string{"a": {"default", "cloud"}, "b": {"lab", "edge"}}
	if len(got) != len(want) || got["a"] != want["a"] || got["b"] != want["b"] {
		t.Errorf("sites = %v, want %v (c disagrees with b's kind; d's kind is unknown; e's site label is not the one configured, so it is in the site default as an inference node, where a is cloud)", got, want)
	}
	if !strings.Contains(s.said["site/c"], "edge on other nodes") || !strings.Contains(s.said["site/d"], "gpu-farm") ||
		!strings.Contains(s.said["site/e"], "cloud on other nodes") {
		t.Errorf("warnings = %q, want c's and d's named", s.said)
	}
}
