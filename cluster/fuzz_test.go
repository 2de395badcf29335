package cluster_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
)

// Specs larger than this are not built by the fuzz targets: Build would
// only spend the fuzzer's time allocating. (Nothing in cluster bounds the
// size of a spec; see specSize.)
const maxFuzzNodes, maxFuzzGPUs = 1 << 12, 1 << 16

// specSize counts the nodes and GPUs a spec describes, with count 0 as 1,
// directly from the spec and independently of Build. big is set when
// either passes the limits above.
func specSize(s *cluster.Spec) (nodes, gpus int, big bool) {
	groups := slices.Clone(s.Nodes)
	for _, site := range s.Sites {
		groups = append(groups, site.Nodes...)
		for _, r := range site.Racks {
			groups = append(groups, r.Nodes...)
		}
	}
	for _, g := range groups {
		if g.Count > maxFuzzNodes || g.GPUs > maxFuzzGPUs {
			return 0, 0, true
		}
		n := max(g.Count, 1)
		nodes += n
		gpus += n * max(g.GPUs, 0)
		if nodes > maxFuzzNodes || gpus > maxFuzzGPUs {
			return 0, 0, true
		}
	}
	return nodes, gpus, false
}

// FuzzShorthand: ParseShorthand never panics; an error quotes the input; an
// accepted shorthand has one rack per comma-separated group, always builds,
// and the cluster has the nodes and GPUs the groups add up to, each GPU on
// exactly one node.
func FuzzShorthand(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		spec, err := cluster.ParseShorthand(s)
		if err != nil {
			if want := fmt.Sprintf("cluster %q: group ", s); !strings.Contains(err.Error(), want) {
				t.Fatalf("error %q does not contain %q", err, want)
			}
			return
		}
		groups := strings.Split(s, ",")
		if len(spec.Sites) != 1 || len(spec.Nodes) != 0 || len(spec.Sites[0].Racks) != len(groups) {
			t.Fatalf("%d groups gave %+v", len(groups), spec)
		}
		for i, r := range spec.Sites[0].Racks {
			if len(r.Nodes) != 1 || r.Nodes[0].Count < 1 || r.Nodes[0].GPUs < 1 || strings.TrimSpace(r.Nodes[0].GPU) == "" {
				t.Fatalf("group %d %q gave rack %+v", i+1, groups[i], r)
			}
		}
		nodes, gpus, big := specSize(spec)
		if big {
			return
		}
		c, err := spec.Build()
		if err != nil {
			t.Fatalf("accepted shorthand does not build: %v", err)
		}
		checkInvariants(t, c)
		if len(c.Nodes) != nodes || c.TotalGPUs() != gpus {
			t.Fatalf("%d nodes %d GPUs, the groups add up to %d and %d", len(c.Nodes), c.TotalGPUs(), nodes, gpus)
		}
		if len(c.Racks()) != len(groups) {
			t.Fatalf("%d racks for %d groups", len(c.Racks()), len(groups))
		}
		// Group i is rack i: its nodes come after those of group i-1.
		for _, n := range c.Nodes {
			r := spec.Sites[0].Racks[n.RackIdx].Nodes[0]
			if n.GPUs != r.GPUs || n.Site != "default" {
				t.Fatalf("node %s in rack %d has %d GPUs, site %s; the group has %d", n.Name, n.RackIdx, n.GPUs, n.Site, r.GPUs)
			}
			if n.ID > 0 && c.Nodes[n.ID-1].RackIdx > n.RackIdx {
				t.Fatalf("node %s of rack %d after a node of rack %d", n.Name, n.RackIdx, c.Nodes[n.ID-1].RackIdx)
			}
		}
	})
}

// FuzzSpec: DecodeSpec and Build never panic on YAML or JSON bytes; a build
// error says it is about the cluster spec; a built cluster has the nodes
// and GPUs the spec adds up to, each GPU on exactly one node, each rack in
// one site.
func FuzzSpec(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte, asJSON bool) {
		spec, err := cluster.DecodeSpec(data, asJSON)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("empty error")
			}
			return
		}
		nodes, gpus, big := specSize(spec)
		if big {
			return
		}
		c, err := spec.Build()
		if err != nil {
			if !strings.HasPrefix(err.Error(), "cluster spec: ") {
				t.Fatalf("error %q does not say what it is about", err)
			}
			return
		}
		checkInvariants(t, c)
		if len(c.Nodes) != nodes || c.TotalGPUs() != gpus {
			t.Fatalf("%d nodes %d GPUs, the spec adds up to %d and %d", len(c.Nodes), c.TotalGPUs(), nodes, gpus)
		}
		for _, n := range c.Nodes {
			if !(n.GPUMem >= 0) || n.CPUs < 0 || !(n.MemGiB >= 0) {
				t.Fatalf("node %s: memory %v, cpus %d, host memory %v", n.Name, n.GPUMem, n.CPUs, n.MemGiB)
			}
			if !strings.HasPrefix(n.Name, n.Rack+"/node-") || !strings.HasPrefix(n.Rack, n.Site+"/") {
				t.Fatalf("node %q in rack %q of site %q", n.Name, n.Rack, n.Site)
			}
		}
	})
}
