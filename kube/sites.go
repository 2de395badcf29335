package kube

import (
	"flag"
	"fmt"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
)

// Sites. Node labels put each GPU node in a site of a kind, as a
// scenario's cluster does in the simulator (docs/kubernetes.md, "Sites"):
//
//	tide-sched.io/site: edge-lab        # the site's name (SiteLabels.Site)
//	tide-sched.io/site-kind: edge       # cloud, edge or inference (SiteLabels.Kind)
//
// A node without the site label is in the site "default"; without the
// kind label its site is a cloud site. The engine's cluster then has the
// simulator's sites, and the same placement rules hold: a job's workers
// never span sites, and a job on an edge site runs on one server (as many
// of its GPUs as the job takes). A node whose kind label is not one of the
// three, or whose site another node gave another kind, is left out with a
// warning: tide cannot tell which rules it would break.

// Default site label keys.
const (
	DefaultSiteLabel     = Group + "/site"
	DefaultSiteKindLabel = Group + "/site-kind"
)

// SiteLabels names the node labels that give a node its site and site
// kind. Empty fields take the defaults above.
type SiteLabels struct {
	Site, Kind string
	// TakenBack is the label or taint key by which an edge owner takes a
	// server back (tidal.go; default DefaultTakenBackKey).
	TakenBack string
}

// Register adds --site-label and --site-kind-label to fs.
func (l *SiteLabels) Register(fs *flag.FlagSet) {
	fs.StringVar(&l.Site, "site-label", DefaultSiteLabel, "node `LABEL` naming the node's site (nodes without it are in the site \"default\")")
	fs.StringVar(&l.Kind, "site-kind-label", DefaultSiteKindLabel, "node `LABEL` giving its site's kind: cloud (the default), edge or inference")
	fs.StringVar(&l.TakenBack, "taken-back-key", DefaultTakenBackKey, "node label or taint `KEY` by which an owner takes a server back from training (its workers move off with their grace period)")
}

func (l *SiteLabels) fill() {
	if l.Site == "" {
		l.Site = DefaultSiteLabel
	}
	if l.Kind == "" {
		l.Kind = DefaultSiteKindLabel
	}
	if l.TakenBack == "" {
		l.TakenBack = DefaultTakenBackKey
	}
}

// siteOf reads a node's site and kind from its labels. ok is false, with
// why, when the kind is none tide knows.
func (l SiteLabels) siteOf(n *corev1.Node) (site, kind string, why string) {
	site, kind = n.Labels[l.Site], n.Labels[l.Kind]
	if site == "" {
		site = "default"
	}
	switch kind {
	case "":
		kind = cluster.SiteCloud
	case cluster.SiteCloud, cluster.SiteEdge, cluster.SiteInference:
	default:
		return "", "", fmt.Sprintf("label %s=%q: want %s, %s or %s; the node is left out", l.Kind, kind,
			cluster.SiteCloud, cluster.SiteEdge, cluster.SiteInference)
	}
	return site, kind, ""
}

// nodeSites gives each node of names (sorted) its site and kind, leaving
// out (with a warning) nodes whose kind is unknown or disagrees with the
// kind of an earlier node of the same site.
func (s *Scheduler) nodeSites(v *view, names []string) map[string][2]string {
	out := make(map[string][2]string, len(names))
	kindOf := map[string]string{}
	for _, name := range names {
		site, kind, why := s.cfg.Sites.siteOf(v.nodes[name])
		if why == "" {
			if k, ok := kindOf[site]; ok && k != kind {
				why = fmt.Sprintf("site %q is %s on other nodes, %s here; the node is left out", site, k, kind)
			}
		}
		if why != "" {
			s.warnOnce("site/"+name, "node "+name, why)
			continue
		}
		delete(s.said, "site/"+name)
		kindOf[site] = kind
		out[name] = [2]string{site, kind}
	}
	return out
}

// gpuType is the GPU type of n's whole GPUs in the engine's cluster: its
// GPUTypeLabel, lower-cased, or "gpu" when it has none.
func (s *Scheduler) gpuType(n *corev1.Node) string {
	if typ := strings.ToLower(n.Labels[s.cfg.GPUTypeLabel]); typ != "" {
		return typ
	}
	return "gpu"
}

// jobGroup names the nodes whose GPUs one job's workers may share with
// n's: those of its GPU type on its site, or on an edge site n alone (the
// engine never places a job across types, sites or edge servers). "" for
// a node whose site labels tide refuses.
func (s *Scheduler) jobGroup(n *nodeState) string { return s.groupOf(n, s.gpuType(n.node)) }

// migGroup is jobGroup for a job of MIG slices of profile: the slices of
// a profile are one GPU type to the engine whatever GPUs they are cut from
// (mig.go).
func (s *Scheduler) migGroup(profile string) func(*nodeState) string {
	return func(n *nodeState) string { return s.groupOf(n, migType(profile)) }
}

// groupOf is jobGroup with the GPU type typ.
func (s *Scheduler) groupOf(n *nodeState, typ string) string {
	site, kind, why := s.cfg.Sites.siteOf(n.node)
	if why != "" {
		return ""
	}
	g := typ + "\x00" + site
	if kind == cluster.SiteEdge {
		g += "\x00" + n.node.Name
	}
	return g
}

// siteNodes lists the node filters a job's new workers may use, in the
// order to try them: the site of the workers it has (on an edge site,
// their server), else its planned site, else each site in the cluster's
// order; on an edge site, each server that has room for all of them,
// best fit first. nil means any node (a cluster of one site).
func siteNodes(c *cluster.Cluster, free []int, a engine.Assignment, have []cluster.GPUID, need int) []func(int) bool {
	sites := c.Sites()
	if len(sites) <= 1 && (len(sites) == 0 || sites[0].Kind != cluster.SiteEdge) {
		return []func(int) bool{nil}
	}
	if len(have) > 0 {
		first := c.NodeOf(have[0])
		if first.SiteKind == cluster.SiteEdge {
			id := first.ID
			return []func(int) bool{func(i int) bool { return i == id }}
		}
		site := first.Site
		return []func(int) bool{func(i int) bool { return c.Nodes[i].Site == site }}
	}
	var out []func(int) bool
	for _, st := range sites {
		if a.Site != "" && st.Name != a.Site {
			continue
		}
		if st.Kind != cluster.SiteEdge {
			name := st.Name
			out = append(out, func(i int) bool { return c.Nodes[i].Site == name })
			continue
		}
		servers := append([]int(nil), st.Nodes...)
		sort.SliceStable(servers, func(x, y int) bool { return free[servers[x]] < free[servers[y]] })
		for _, id := range servers {
			if free[id] >= need {
				out = append(out, func(i int) bool { return i == id })
			}
		}
	}
	return out
}

// sameSite: node i may hold more workers of a job that holds GPU g: it is
// in g's site and, on an edge site, is g's server.
func sameSite(c *cluster.Cluster, g cluster.GPUID, i int) bool {
	n := c.NodeOf(g)
	if n.SiteKind == cluster.SiteEdge {
		return n.ID == i
	}
	return c.Nodes[i].Site == n.Site
}
