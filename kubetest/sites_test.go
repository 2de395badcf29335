package kubetest

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/tide-sched/tide/kube"
)

// TestKubeSites runs the seed paper's multi-site cases (docs/kubernetes.md,
// "Sites") against one control plane: sites from node labels and their
// placement rules.
func TestKubeSites(t *testing.T) {
	e := startEnv(t)
	t.Run("Sites", func(t *testing.T) { testSites(t, e) })
}

// siteNode registers a node of gpus A100 GPUs in a site of a kind, by the
// default labels.
func (s *scenario) siteNode(name string, gpus int, site, kind string) {
	s.t.Helper()
	s.node(name, gpus, "A100")
	s.editNode(name, func(n *corev1.Node) {
		n.Labels[kube.DefaultSiteLabel] = site
		n.Labels[kube.DefaultSiteKindLabel] = kind
	})
}

// gangPods creates a gang of k one-GPU pods and returns their names.
func (s *scenario) gangPods(ns, job string, k int) []string {
	var names []string
	for i := 0; i < k; i++ {
		name := fmt.Sprintf("%s-%d", job, i)
		s.pod(ns, name, 1, kube.AnnotJob, job, kube.AnnotGangSize, fmt.Sprint(k))
		names = append(names, name)
	}
	return names
}

// testSites: a job never spans sites, and an edge job runs on one server.
// Two edge servers of 2 GPUs (e0, e1) come first in the cluster's order,
// then a cloud of two 4-GPU nodes (z0, z1).
func testSites(t *testing.T, e *env) {
	s := e.scenario(t, "tide-sites", "sites")
	s.siteNode("sites-e0", 2, "lab", "edge")
	s.siteNode("sites-e1", 2, "lab", "edge")
	s.siteNode("sites-z0", 4, "dc", "cloud")
	s.siteNode("sites-z1", 4, "dc", "cloud")
	kind := map[string]string{"sites-e0": "edge", "sites-e1": "edge", "sites-z0": "cloud", "sites-z1": "cloud"}
	s.start(kube.Config{Policy: "fifo"})

	// Two workers on the edge share one server.
	g2 := s.gangPods("sites", "g2", 2)
	eventually(t, 20*time.Second, func() (bool, string) {
		w := s.where("sites")
		return w[g2[0]] != "" && w[g2[1]] != "", fmt.Sprintf("g2 bound: %v", w)
	})
	w := s.where("sites")
	if kind[w[g2[0]]] != "edge" || w[g2[0]] != w[g2[1]] {
		t.Fatalf("g2 on %s and %s, want both on one edge server", w[g2[0]], w[g2[1]])
	}
	// Six workers fit only in the cloud.
	g6 := s.gangPods("sites", "g6", 6)
	eventually(t, 20*time.Second, func() (bool, string) {
		return len(bound(s.pods("sites"), g6...)) == 6, fmt.Sprintf("g6 bound: %v", s.where("sites"))
	})
	for n, node := range s.where("sites") {
		if len(n) > 2 && n[:2] == "g6" && kind[node] != "cloud" {
			t.Errorf("%s on %s, want the cloud", n, node)
		}
	}
	// Four GPUs are free now (two on one edge server, two in the cloud),
	// but no site has three: a gang of three waits.
	g3 := s.gangPods("sites", "g3", 3)
	for end := time.Now().Add(3 * time.Second); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if b := bound(s.pods("sites"), g3...); len(b) > 0 {
			t.Fatalf("g3's %v bound (%v) while no site has 3 free GPUs", b, s.where("sites"))
		}
	}
	// Once g6 ends it runs in the cloud.
	s.kubelet("sites")
	s.end("sites", corev1.PodSucceeded, g6...)
	eventually(t, 20*time.Second, func() (bool, string) {
		return len(bound(s.pods("sites"), g3...)) == 3, fmt.Sprintf("g3 bound: %v", s.where("sites"))
	})
	for _, n := range g3 {
		if node := s.where("sites")[n]; kind[node] != "cloud" {
			t.Errorf("%s on %s, want the cloud", n, node)
		}
	}
}
