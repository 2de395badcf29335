package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/tide-sched/tide/decodemsg"
)

// Spec is the YAML/JSON description of a cluster:
//
//	sites:
//	  - name: cloud
//	    kind: cloud            # cloud (default), edge or inference
//	    racks:
//	      - name: rack-0
//	        nodes:
//	          - {count: 8, gpus: 4, gpu: t4, gpu_memory_gib: 16, cpus: 48, memory_gib: 192}
//	  - name: edge
//	    kind: edge
//	    nodes:                 # nodes straight under a site go into one rack
//	      - {count: 4, gpus: 1, gpu: v100}
//
// A top-level "nodes:" list is shorthand for one site called "default".
type Spec struct {
	Sites []SiteSpec `json:"sites,omitempty" yaml:"sites,omitempty"`
	Nodes []NodeSpec `json:"nodes,omitempty" yaml:"nodes,omitempty"`
}

// SiteSpec is one site of a Spec.
type SiteSpec struct {
	Name  string     `json:"name" yaml:"name"`
	Kind  string     `json:"kind,omitempty" yaml:"kind,omitempty"`
	Racks []RackSpec `json:"racks,omitempty" yaml:"racks,omitempty"`
	Nodes []NodeSpec `json:"nodes,omitempty" yaml:"nodes,omitempty"`
}

// RackSpec is one rack of a site.
type RackSpec struct {
	Name  string     `json:"name" yaml:"name"`
	Nodes []NodeSpec `json:"nodes" yaml:"nodes"`
}

// MaxNodes and MaxGPUs bound what a spec or shorthand may describe, so a
// typo such as 1000000000x8 is an error rather than an exhausted memory.
const (
	MaxNodes = 1 << 20
	MaxGPUs  = 1 << 22
)

// NodeSpec describes Count identical nodes.
type NodeSpec struct {
	Count  int     `json:"count,omitempty" yaml:"count,omitempty"` // default 1
	GPUs   int     `json:"gpus" yaml:"gpus"`
	GPU    string  `json:"gpu" yaml:"gpu"` // GPU type, e.g. t4
	GPUMem float64 `json:"gpu_memory_gib,omitempty" yaml:"gpu_memory_gib,omitempty"`
	CPUs   int     `json:"cpus,omitempty" yaml:"cpus,omitempty"`
	MemGiB float64 `json:"memory_gib,omitempty" yaml:"memory_gib,omitempty"`
}

// Build turns a spec into a Cluster, naming nodes site/rack/node-i.
func (s *Spec) Build() (*Cluster, error) {
	sites := s.Sites
	implicit := 0 // sites[si] is the spec's sites[si-implicit]
	if len(s.Nodes) > 0 {
		sites = append([]SiteSpec{{Name: "default", Nodes: s.Nodes}}, sites...)
		implicit = 1
	}
	if len(sites) == 0 {
		return nil, fmt.Errorf("cluster spec: no sites and no nodes")
	}
	var nodes []Node
	seenSite := map[string]bool{}
	seenRack := map[string]bool{}
	inRack := map[string]int{} // nodes so far per rack, to name the next
	totalGPUs := 0
	for i, site := range sites {
		si := i - implicit
		if site.Name == "" {
			return nil, fmt.Errorf("cluster spec: sites[%d].name: missing", si)
		}
		if seenSite[site.Name] {
			return nil, fmt.Errorf("cluster spec: sites[%d].name: duplicate site %q", si, site.Name)
		}
		seenSite[site.Name] = true
		switch site.Kind {
		case "", SiteCloud, SiteEdge, SiteInference:
		default:
			return nil, fmt.Errorf("cluster spec: sites[%d].kind: %q is not one of cloud, edge, inference", si, site.Kind)
		}
		kind := site.Kind
		if kind == "" {
			kind = SiteCloud
		}
		racks := site.Racks
		if len(site.Nodes) > 0 {
			racks = append([]RackSpec{{Name: "rack-0", Nodes: site.Nodes}}, racks...)
		}
		for ri, rack := range racks {
			unnamed := ""
			if rack.Name == "" {
				rack.Name = fmt.Sprintf("rack-%d", ri)
				unnamed = " (an unnamed rack is called rack-<index>)"
			}
			rackName := site.Name + "/" + rack.Name
			if seenRack[rackName] {
				return nil, fmt.Errorf("cluster spec: site %q rack %q: duplicate rack name %q%s", site.Name, rack.Name, rackName, unnamed)
			}
			seenRack[rackName] = true
			for ni, ns := range rack.Nodes {
				where := fmt.Sprintf("cluster spec: site %q rack %q nodes[%d]", site.Name, rack.Name, ni)
				count := ns.Count
				if count == 0 {
					count = 1
				}
				if count < 0 {
					return nil, fmt.Errorf("%s.count: must be >= 1, got %d", where, ns.Count)
				}
				if ns.GPUs < 0 {
					return nil, fmt.Errorf("%s.gpus: must be >= 0, got %d", where, ns.GPUs)
				}
				t := strings.ToLower(strings.TrimSpace(ns.GPU))
				if ns.GPUs > 0 && t == "" {
					return nil, fmt.Errorf("%s.gpu: missing GPU type (e.g. t4, v100, a100)", where)
				}
				for _, f := range []struct {
					name string
					v    float64
				}{{"gpu_memory_gib", ns.GPUMem}, {"cpus", float64(ns.CPUs)}, {"memory_gib", ns.MemGiB}} {
					if !(f.v >= 0) || math.IsInf(f.v, 1) {
						return nil, fmt.Errorf("%s.%s: must be a finite number >= 0, got %v", where, f.name, f.v)
					}
				}
				mem := ns.GPUMem
				if mem == 0 {
					mem = DefaultGPUMemGiB[t]
				}
				if count > MaxNodes-len(nodes) || ns.GPUs > MaxGPUs || count*ns.GPUs > MaxGPUs-totalGPUs {
					return nil, fmt.Errorf("%s: the cluster would exceed tide's limits of %d nodes and %d GPUs", where, MaxNodes, MaxGPUs)
				}
				totalGPUs += count * ns.GPUs
				first := inRack[rackName]
				inRack[rackName] += count
				for k := 0; k < count; k++ {
					nodes = append(nodes, Node{
						Name:     fmt.Sprintf("%s/node-%d", rackName, first+k),
						Site:     site.Name,
						SiteKind: kind,
						Rack:     rackName,
						GPUType:  t,
						GPUs:     ns.GPUs,
						GPUMem:   mem,
						CPUs:     ns.CPUs,
						MemGiB:   ns.MemGiB,
					})
				}
			}
		}
	}
	return New(nodes)
}

// ParseShorthand reads "16x4:t4" (16 nodes of 4 T4 GPUs). Several groups are
// separated by commas: "8x1:v100,8x1:p100,8x1:k80". Each group becomes a rack of
// the site "default".
func ParseShorthand(s string) (*Spec, error) {
	spec := &Spec{Sites: []SiteSpec{{Name: "default"}}}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		nodesGPUs, typ, ok := strings.Cut(part, ":")
		if !ok || typ == "" {
			return nil, fmt.Errorf("cluster %q: group %d %q: want NODESxGPUS:TYPE, e.g. 16x4:t4", s, i+1, part)
		}
		ns, gs, ok := strings.Cut(strings.ToLower(nodesGPUs), "x")
		if !ok {
			return nil, fmt.Errorf("cluster %q: group %d %q: want NODESxGPUS:TYPE, e.g. 16x4:t4", s, i+1, part)
		}
		n, err := strconv.Atoi(ns)
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("cluster %q: group %d: node count %q is not a positive integer", s, i+1, ns)
		}
		g, err := strconv.Atoi(gs)
		if err != nil || g <= 0 {
			return nil, fmt.Errorf("cluster %q: group %d: GPUs per node %q is not a positive integer", s, i+1, gs)
		}
		spec.Sites[0].Racks = append(spec.Sites[0].Racks, RackSpec{
			Name:  fmt.Sprintf("rack-%d", i),
			Nodes: []NodeSpec{{Count: n, GPUs: g, GPU: strings.ToLower(typ)}},
		})
	}
	return spec, nil
}

// KnownGPUTypes lists, sorted, the GPU types tide knows the memory of
// (DefaultGPUMemGiB); a spec may use another type by giving its
// gpu_memory_gib.
func KnownGPUTypes() []string {
	return slices.Sorted(maps.Keys(DefaultGPUMemGiB))
}

// unknownType says that GPU type t is not one tide knows, and what to do.
func unknownType(t string) error {
	return fmt.Errorf("unknown GPU type %q; known types: %s", t, strings.Join(KnownGPUTypes(), ", "))
}

// CheckGPUTypes reports the first node group whose GPU type tide knows no
// memory for (DefaultGPUMemGiB) and that does not give gpu_memory_gib, so
// that a typo ("t44") is an error rather than a cluster of a type no trace
// or model knows. Build itself accepts any type (tests and programs name
// their own); Parse and LoadFile, which read users' input, check.
func (s *Spec) CheckGPUTypes() error {
	check := func(where string, nodes []NodeSpec) error {
		for i, ns := range nodes {
			t := strings.ToLower(strings.TrimSpace(ns.GPU))
			if ns.GPUs > 0 && t != "" && ns.GPUMem == 0 && DefaultGPUMemGiB[t] == 0 {
				return fmt.Errorf("cluster spec: %snodes[%d].gpu: %w (or declare it with its gpu_memory_gib)", where, i, unknownType(ns.GPU))
			}
		}
		return nil
	}
	if err := check("", s.Nodes); err != nil {
		return err
	}
	for _, site := range s.Sites {
		where := fmt.Sprintf("site %q ", site.Name)
		if err := check(where, site.Nodes); err != nil {
			return err
		}
		for ri, rack := range site.Racks {
			if err := check(fmt.Sprintf("%sracks[%d] ", where, ri), rack.Nodes); err != nil {
				return err
			}
		}
	}
	return nil
}

// Parse accepts either a shorthand ("16x4:t4") or the path of a YAML/JSON
// spec. A GPU type tide knows no memory for is an error, unless a spec
// file gives its gpu_memory_gib (CheckGPUTypes).
func Parse(arg string) (*Cluster, error) {
	if _, err := os.Stat(arg); err == nil || strings.ContainsAny(arg, "/\\") ||
		strings.HasSuffix(arg, ".yaml") || strings.HasSuffix(arg, ".yml") || strings.HasSuffix(arg, ".json") {
		return LoadFile(arg)
	}
	spec, err := ParseShorthand(arg)
	if err != nil {
		return nil, err
	}
	for i, rack := range spec.Sites[0].Racks {
		if t := rack.Nodes[0].GPU; DefaultGPUMemGiB[t] == 0 {
			return nil, fmt.Errorf("cluster %q: group %d: %w (another type needs a cluster spec file that gives its gpu_memory_gib; docs/simulator.md)", arg, i+1, unknownType(t))
		}
	}
	return spec.Build()
}

// LoadFile reads a YAML or JSON cluster spec. Unknown fields are errors, and
// so are GPU types without a known memory (CheckGPUTypes).
func LoadFile(path string) (*Cluster, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("cluster spec: %w", err)
	}
	spec, err := DecodeSpec(data, filepath.Ext(path) == ".json")
	if err != nil {
		return nil, fmt.Errorf("cluster spec %s: %w", path, err)
	}
	if err := spec.CheckGPUTypes(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c, err := spec.Build()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// DecodeSpec parses spec bytes, as JSON when asJSON is set and YAML otherwise.
// Input after the spec is an error: a second JSON value, or a second YAML
// document that is not empty.
func DecodeSpec(data []byte, asJSON bool) (*Spec, error) {
	var spec Spec
	if asJSON {
		dec := json.NewDecoder(bytes.NewReader(data))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&spec); err != nil {
			return nil, decodemsg.JSON(emptyEOF(err), data)
		}
		if _, err := dec.Token(); err != io.EOF {
			return nil, fmt.Errorf("unexpected data after the spec")
		}
		return &spec, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil {
		return nil, decodemsg.YAML(emptyEOF(err))
	}
	for {
		var doc yaml.Node
		err := dec.Decode(&doc)
		if err == io.EOF {
			return &spec, nil
		}
		if err != nil {
			return nil, err
		}
		if len(doc.Content) > 0 && doc.Content[0].Tag != "!!null" {
			return nil, fmt.Errorf("line %d: more than one YAML document", doc.Line)
		}
	}
}

// emptyEOF names the error of decoding nothing.
func emptyEOF(err error) error {
	if err == io.EOF {
		return fmt.Errorf("empty spec")
	}
	return err
}
