package cluster_test

import (
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
)

// describe renders each node on one line, so a test can state a whole
// cluster as a list of strings written by hand.
func describe(c *cluster.Cluster) []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, fmt.Sprintf("%d %s site=%s rack=%d:%s gpus=%d:%s first=%d mem=%g cpus=%d host=%g",
			n.ID, n.Name, n.Site, n.RackIdx, n.Rack, n.GPUs, n.GPUType, n.First, n.GPUMem, n.CPUs, n.MemGiB))
	}
	return out
}

// checkInvariants asserts what every built cluster must satisfy, whatever
// its input: dense node and GPU ids, each GPU on exactly one node, racks and
// types consistent with the nodes. It is shared by the table tests and the
// fuzz targets.
func checkInvariants(t *testing.T, c *cluster.Cluster) {
	t.Helper()
	sum := 0
	owner := make([]int, c.TotalGPUs()) // GPU -> 1 + node id, 0 = unowned
	names := map[string]bool{}
	rackSite := map[int]string{}
	types := map[string]bool{}
	for i, n := range c.Nodes {
		if n.ID != i {
			t.Fatalf("node %d has ID %d", i, n.ID)
		}
		if n.GPUs < 0 {
			t.Fatalf("node %s: %d GPUs", n.Name, n.GPUs)
		}
		if int(n.First) != sum {
			t.Fatalf("node %s: First %d, want %d (sum of GPUs before it)", n.Name, n.First, sum)
		}
		sum += n.GPUs
		if names[n.Name] {
			t.Fatalf("duplicate node name %q", n.Name)
		}
		names[n.Name] = true
		if n.RackIdx < 0 || n.RackIdx >= len(c.Racks()) || c.Racks()[n.RackIdx] != n.Rack {
			t.Fatalf("node %s: RackIdx %d does not name rack %q in %q", n.Name, n.RackIdx, n.Rack, c.Racks())
		}
		if s, ok := rackSite[n.RackIdx]; ok && s != n.Site {
			t.Fatalf("rack %q spans sites %q and %q", n.Rack, s, n.Site)
		}
		rackSite[n.RackIdx] = n.Site
		if n.GPUs > 0 {
			types[n.GPUType] = true
		}
		for k := 0; k < n.GPUs; k++ {
			g := n.First + cluster.GPUID(k)
			if int(g) >= len(owner) {
				t.Fatalf("node %s: GPU %d beyond TotalGPUs %d", n.Name, g, c.TotalGPUs())
			}
			if owner[g] != 0 {
				t.Fatalf("GPU %d on nodes %d and %d", g, owner[g]-1, i)
			}
			owner[g] = i + 1
			if got := c.NodeOf(g); got.ID != i {
				t.Fatalf("NodeOf(%d) = node %d, want %d", g, got.ID, i)
			}
		}
	}
	if c.TotalGPUs() != sum {
		t.Fatalf("TotalGPUs %d, sum over nodes %d", c.TotalGPUs(), sum)
	}
	for g, o := range owner {
		if o == 0 {
			t.Fatalf("GPU %d belongs to no node", g)
		}
	}
	if len(rackSite) != len(c.Racks()) {
		t.Fatalf("%d racks listed, %d used by nodes", len(c.Racks()), len(rackSite))
	}
	var wantTypes []string
	for ty := range types {
		wantTypes = append(wantTypes, ty)
	}
	slices.Sort(wantTypes)
	if got := c.GPUTypes(); !slices.Equal(got, wantTypes) {
		t.Fatalf("GPUTypes %q, want %q", got, wantTypes)
	}
	perType := 0
	for _, ty := range c.GPUTypes() {
		perType += c.GPUsOfType(ty)
	}
	if perType != sum || c.GPUsOfType("") != sum {
		t.Fatalf("GPUsOfType: %d over types, %d for \"\", want %d", perType, c.GPUsOfType(""), sum)
	}
	_ = c.String()
}

func TestNew(t *testing.T) {
	cases := []struct {
		name  string
		nodes []cluster.Node
		want  []string // describe(c), written by hand
		total int
		types []string
		str   string
		err   string // substring of the error; "" = must succeed
	}{{
		name:  "empty",
		total: 0,
		str:   "0 GPUs (0 nodes): ",
	}, {
		// Defaults: unnamed node i is node-i, site "default", rack
		// "<site>/rack-0"; the type is lower-cased. Input ID, First and
		// RackIdx are garbage and must be replaced: GPUs are numbered
		// 0..3 on node 0 and 4..5 on node 1.
		name: "defaults and dense ids",
		nodes: []cluster.Node{
			{GPUs: 4, GPUType: "T4", ID: 7, First: 99, RackIdx: 5},
			{Name: "b", Site: "s", GPUs: 2, GPUType: "v100", GPUMem: 32, CPUs: 8, MemGiB: 64},
		},
		want: []string{
			"0 node-0 site=default rack=0:default/rack-0 gpus=4:t4 first=0 mem=0 cpus=0 host=0",
			"1 b site=s rack=1:s/rack-0 gpus=2:v100 first=4 mem=32 cpus=8 host=64",
		},
		total: 6,
		types: []string{"t4", "v100"},
		str:   "6 GPUs (2 nodes): 4 t4, 2 v100",
	}, {
		// Rack indexes follow first appearance: r1 is rack 0 even though a
		// later node is in r0; a GPU-less node has no type and counts for
		// none, and takes no GPU ids (the next node still starts at 3).
		name: "rack order and gpu-less node",
		nodes: []cluster.Node{
			{Name: "a", Rack: "r1", GPUs: 1, GPUType: "k80"},
			{Name: "b", Rack: "r0", GPUs: 2, GPUType: "k80"},
			{Name: "c", Rack: "r1"},
			{Name: "d", Rack: "r1", GPUs: 1, GPUType: "a100"},
		},
		want: []string{
			"0 a site=default rack=0:r1 gpus=1:k80 first=0 mem=0 cpus=0 host=0",
			"1 b site=default rack=1:r0 gpus=2:k80 first=1 mem=0 cpus=0 host=0",
			"2 c site=default rack=0:r1 gpus=0: first=3 mem=0 cpus=0 host=0",
			"3 d site=default rack=0:r1 gpus=1:a100 first=3 mem=0 cpus=0 host=0",
		},
		total: 4,
		types: []string{"a100", "k80"},
		str:   "4 GPUs (4 nodes): 1 a100, 3 k80",
	}, {
		name:  "negative gpus",
		nodes: []cluster.Node{{Name: "x", GPUs: -1, GPUType: "t4"}},
		err:   `node "x": gpus must be >= 0, got -1`,
	}, {
		name:  "duplicate name",
		nodes: []cluster.Node{{Name: "x", GPUs: 1, GPUType: "t4"}, {Name: "x", GPUs: 1, GPUType: "t4"}},
		err:   `node "x": duplicate node name`,
	}, {
		// The default name of node 1 is node-1, which an explicit name
		// already took.
		name:  "default name collides",
		nodes: []cluster.Node{{Name: "node-1"}, {}},
		err:   `node "node-1": duplicate node name`,
	}, {
		name:  "type missing",
		nodes: []cluster.Node{{Name: "x", GPUs: 2}},
		err:   `node "x": gpu type missing`,
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			c, err := cluster.New(tc.nodes)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one containing %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(c); !slices.Equal(got, tc.want) {
				t.Fatalf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			if c.TotalGPUs() != tc.total {
				t.Errorf("TotalGPUs %d, want %d", c.TotalGPUs(), tc.total)
			}
			if !slices.Equal(c.GPUTypes(), tc.types) {
				t.Errorf("GPUTypes %q, want %q", c.GPUTypes(), tc.types)
			}
			if c.String() != tc.str {
				t.Errorf("String %q, want %q", c.String(), tc.str)
			}
			checkInvariants(t, c)
		})
	}
}

// TestNewDoesNotAliasInput: New copies the nodes, so the caller's slice is
// left as it was (ids and defaults are written to the copy only).
func TestNewDoesNotAliasInput(t *testing.T) {
	in := []cluster.Node{{GPUs: 1, GPUType: "T4", First: 9}}
	before := slices.Clone(in)
	c, err := cluster.New(in)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(in, before) {
		t.Fatalf("input changed to %+v", in)
	}
	if c.Nodes[0].GPUType != "t4" || c.Nodes[0].First != 0 {
		t.Fatalf("built node %+v", c.Nodes[0])
	}
}

// TestGPUsOfType: counts per type, by hand: k80 1+2 (New lower-cases "K80"),
// a100 1, an absent type 0, "" all 4. The query is not lower-cased: types
// are stored lower-case, so "K80" matches nothing.
func TestGPUsOfType(t *testing.T) {
	c, err := cluster.New([]cluster.Node{
		{Name: "a", GPUs: 1, GPUType: "k80"},
		{Name: "b", GPUs: 2, GPUType: "K80"},
		{Name: "c"},
		{Name: "d", GPUs: 1, GPUType: "a100"},
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ  string
		want int
	}{{"k80", 3}, {"a100", 1}, {"v100", 0}, {"", 4}, {"K80", 0}} {
		if got := c.GPUsOfType(tc.typ); got != tc.want {
			t.Errorf("GPUsOfType(%q) = %d, want %d", tc.typ, got, tc.want)
		}
	}
}

// TestMaxJobGPUs: the most GPUs one job can hold is one type on one site,
// one server on an edge site.
func TestMaxJobGPUs(t *testing.T) {
	c, err := (&cluster.Spec{Sites: []cluster.SiteSpec{
		{Name: "cloud", Nodes: []cluster.NodeSpec{{Count: 2, GPUs: 4, GPU: "t4"}, {Count: 1, GPUs: 2, GPU: "a100"}}},
		{Name: "infer", Kind: cluster.SiteInference, Nodes: []cluster.NodeSpec{{Count: 1, GPUs: 6, GPU: "a100"}}},
		{Name: "edge", Kind: cluster.SiteEdge, Nodes: []cluster.NodeSpec{{Count: 5, GPUs: 2, GPU: "v100"}}},
	}}).Build()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		typ  string
		want int
	}{{"t4", 8}, {"a100", 6}, {"v100", 2}, {"k80", 0}, {"", 8}} {
		if got := c.MaxJobGPUs(tc.typ); got != tc.want {
			t.Errorf("MaxJobGPUs(%q) = %d, want %d", tc.typ, got, tc.want)
		}
	}
}

// TestDefaultGPUMemGiB: Build looks the default up with the lower-cased,
// trimmed type, so an upper-case or padded key could never be found, and a
// default must be a positive size.
func TestDefaultGPUMemGiB(t *testing.T) {
	for k, v := range cluster.DefaultGPUMemGiB {
		if k != strings.ToLower(strings.TrimSpace(k)) || k == "" {
			t.Errorf("key %q is unreachable: Build looks up lower-case trimmed types", k)
		}
		if !(v > 0) {
			t.Errorf("%s: default %v GiB, want > 0", k, v)
		}
	}
}
