// Package cluster describes the machines tide schedules onto: sites, racks,
// nodes and the GPUs inside them.
//
// A Cluster is immutable once built. GPUs are numbered densely from 0 in
// node order, so a GPU id is an index into per-GPU tables kept by the engine
// and the placers; node ids are likewise dense indexes into Nodes.
package cluster

import (
	"fmt"
	"sort"
	"strings"
)

// GPUID is a dense index of one GPU in a Cluster (0 .. TotalGPUs-1).
type GPUID int

// Site kinds. Only cloud sites exist until the multi-site issue lands, but the
// field is part of the spec from the start so specs stay valid.
const (
	SiteCloud     = "cloud"
	SiteEdge      = "edge"
	SiteInference = "inference"
)

// Node is one machine.
type Node struct {
	ID   int    // dense index into Cluster.Nodes
	Name string // unique, e.g. "cloud/rack-0/node-3"
	Site string // site name
	// SiteKind is the kind of the node's site: SiteCloud (also for ""),
	// SiteEdge or SiteInference.
	SiteKind string
	Rack     string  // rack name, unique within the cluster
	GPUType  string  // lower-case GPU model, e.g. "t4"
	GPUs     int     // GPUs on this node (>= 0)
	GPUMem   float64 // memory per GPU, GiB
	CPUs     int     // CPU cores, 0 when unknown
	MemGiB   float64 // host memory, GiB, 0 when unknown
	First    GPUID   // id of this node's first GPU; its GPUs are First .. First+GPUs-1
	RackIdx  int     // dense rack index, for topology-aware placement
}

// Cluster is an immutable set of nodes.
type Cluster struct {
	Nodes []Node
	gpu   []int // GPU id -> node id
	racks []string
	types []string
	count map[string]int // GPU type -> GPUs
	sites []Site
	// maxJob is, by GPU type, the most GPUs of it one job can hold, and
	// maxJobAny the most of any one type (MaxJobGPUs), fixed by New: the
	// simulator asks once per job, and a tiled trace has millions.
	maxJob    map[string]int
	maxJobAny int
}

// Site is one site of a cluster: a cloud GPU cluster, a set of edge servers
// or an inference pool.
type Site struct {
	Name  string
	Kind  string // SiteCloud, SiteEdge or SiteInference
	Nodes []int  // node ids, ascending
	GPUs  int
}

// Sites lists the cluster's sites in the order their first node appears.
func (c *Cluster) Sites() []Site { return c.sites }

// SiteOf returns the site called name, or nil.
func (c *Cluster) SiteOf(name string) *Site {
	if i := c.siteIdx(name); i >= 0 {
		return &c.sites[i]
	}
	return nil
}

func (c *Cluster) siteIdx(name string) int {
	for i := range c.sites {
		if c.sites[i].Name == name {
			return i
		}
	}
	return -1
}

// New builds a cluster from nodes, assigning ids, GPU ranges and rack indexes.
// Node IDs and First fields in the input are ignored.
func New(nodes []Node) (*Cluster, error) {
	c := &Cluster{Nodes: make([]Node, len(nodes)), count: map[string]int{}}
	rackIdx := map[string]int{}
	names := map[string]bool{}
	typeSet := map[string]bool{}
	siteKind := map[string]string{}
	next := GPUID(0)
	for i, n := range nodes {
		if n.GPUs < 0 {
			return nil, fmt.Errorf("node %q: gpus must be >= 0, got %d", n.Name, n.GPUs)
		}
		if n.Name == "" {
			n.Name = fmt.Sprintf("node-%d", i)
		}
		if names[n.Name] {
			return nil, fmt.Errorf("node %q: duplicate node name", n.Name)
		}
		names[n.Name] = true
		n.GPUType = strings.ToLower(n.GPUType)
		if n.GPUs > 0 && n.GPUType == "" {
			return nil, fmt.Errorf("node %q: gpu type missing", n.Name)
		}
		if n.Site == "" {
			n.Site = "default"
		}
		if n.SiteKind == "" {
			n.SiteKind = SiteCloud
		}
		if k, ok := siteKind[n.Site]; ok && k != n.SiteKind {
			return nil, fmt.Errorf("node %q: site %q is both %s and %s", n.Name, n.Site, k, n.SiteKind)
		} else if !ok {
			siteKind[n.Site] = n.SiteKind
			c.sites = append(c.sites, Site{Name: n.Site, Kind: n.SiteKind})
		}
		c.sites[c.siteIdx(n.Site)].Nodes = append(c.sites[c.siteIdx(n.Site)].Nodes, i)
		c.sites[c.siteIdx(n.Site)].GPUs += n.GPUs
		if n.Rack == "" {
			n.Rack = n.Site + "/rack-0"
		}
		r, ok := rackIdx[n.Rack]
		if !ok {
			r = len(c.racks)
			rackIdx[n.Rack] = r
			c.racks = append(c.racks, n.Rack)
		}
		n.ID, n.First, n.RackIdx = i, next, r
		for g := 0; g < n.GPUs; g++ {
			c.gpu = append(c.gpu, i)
		}
		next += GPUID(n.GPUs)
		if n.GPUs > 0 {
			typeSet[n.GPUType] = true
			c.count[n.GPUType] += n.GPUs
		}
		c.Nodes[i] = n
	}
	for t := range typeSet {
		c.types = append(c.types, t)
	}
	sort.Strings(c.types)
	c.maxJobGPUs()
	return c, nil
}

// maxJobGPUs fills c.maxJob and c.maxJobAny: per site, a type's GPUs (one
// server's on an edge site), the most over sites.
func (c *Cluster) maxJobGPUs() {
	c.maxJob = map[string]int{}
	per := map[string]int{}
	for _, s := range c.sites {
		clear(per)
		for _, id := range s.Nodes {
			n := &c.Nodes[id]
			if s.Kind == SiteEdge {
				per[n.GPUType] = max(per[n.GPUType], n.GPUs)
			} else {
				per[n.GPUType] += n.GPUs
			}
		}
		for t, v := range per {
			c.maxJob[t] = max(c.maxJob[t], v)
			c.maxJobAny = max(c.maxJobAny, v)
		}
	}
}

// TotalGPUs is the number of GPUs in the cluster.
func (c *Cluster) TotalGPUs() int { return len(c.gpu) }

// NodeOf returns the node holding GPU g.
func (c *Cluster) NodeOf(g GPUID) *Node { return &c.Nodes[c.gpu[g]] }

// Racks returns the rack names, indexed by Node.RackIdx.
func (c *Cluster) Racks() []string { return c.racks }

// GPUTypes returns the GPU types present, sorted.
func (c *Cluster) GPUTypes() []string { return c.types }

// GPUsOfType counts the GPUs of type t ("" counts all).
func (c *Cluster) GPUsOfType(t string) int {
	if t == "" {
		return len(c.gpu)
	}
	return c.count[t]
}

// MaxJobGPUs is the most GPUs of type t ("": of any one type) a single
// job can ever hold on c: a job runs on one GPU type, never spans sites,
// and on an edge site uses one server (engine.Assignment). A job that
// needs more can never run, however long it waits.
func (c *Cluster) MaxJobGPUs(t string) int {
	if t == "" {
		return c.maxJobAny
	}
	return c.maxJob[t]
}

// MaxJobGPUsWhere is MaxJobGPUs counting only the GPUs of the nodes ok
// accepts: for a job asking for part of each GPU, those whose memory holds
// its part. Unlike MaxJobGPUs it is not kept, but counted at each call.
func (c *Cluster) MaxJobGPUsWhere(t string, ok func(*Node) bool) int {
	most := 0
	per := map[string]int{}
	for _, s := range c.sites {
		clear(per)
		for _, id := range s.Nodes {
			n := &c.Nodes[id]
			if n.GPUs == 0 || (t != "" && n.GPUType != t) || !ok(n) {
				continue
			}
			if s.Kind == SiteEdge {
				per[n.GPUType] = max(per[n.GPUType], n.GPUs)
			} else {
				per[n.GPUType] += n.GPUs
			}
		}
		for _, v := range per {
			most = max(most, v)
		}
	}
	return most
}

// GPUMemGiB is the memory of each of n's GPUs, GiB: n.GPUMem, or when
// unset the default for its type (DefaultGPUMemGiB); 0 when unknown.
func (n *Node) GPUMemGiB() float64 {
	if n.GPUMem > 0 {
		return n.GPUMem
	}
	return DefaultGPUMemGiB[n.GPUType]
}

// String summarises the cluster, e.g. "64 GPUs (16 nodes): 64 t4".
func (c *Cluster) String() string {
	counts := map[string]int{}
	for _, n := range c.Nodes {
		counts[n.GPUType] += n.GPUs
	}
	var parts []string
	for _, t := range c.types {
		parts = append(parts, fmt.Sprintf("%d %s", counts[t], t))
	}
	return fmt.Sprintf("%d GPUs (%d nodes): %s", len(c.gpu), len(c.Nodes), strings.Join(parts, ", "))
}

// DefaultGPUMemGiB is the memory per GPU assumed when a spec does not give it.
var DefaultGPUMemGiB = map[string]float64{
	"k80": 12, "p100": 16, "v100": 32, "v100m32": 32, "t4": 16, "a100": 40,
	"a100-80": 80, "h100": 80, "h200": 141, "l4": 24, "a10": 24, "rtx3090": 24,
}
