package cluster_test

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
)

// rack builds the RackSpec ParseShorthand makes for one group: group i of
// the shorthand is rack "rack-i" holding n nodes of g GPUs of type typ.
func rack(i, n, g int, typ string) cluster.RackSpec {
	return cluster.RackSpec{
		Name:  "rack-" + strconv.Itoa(i),
		Nodes: []cluster.NodeSpec{{Count: n, GPUs: g, GPU: typ}},
	}
}

// defaultSite wraps racks in the one site ParseShorthand makes.
func defaultSite(racks ...cluster.RackSpec) *cluster.Spec {
	return &cluster.Spec{Sites: []cluster.SiteSpec{{Name: "default", Racks: racks}}}
}

func TestParseShorthand(t *testing.T) {
	cases := []struct {
		in   string
		want *cluster.Spec
	}{
		{"16x4:t4", defaultSite(rack(0, 16, 4, "t4"))},
		{"8x1:v100,8x1:p100,8x1:k80", defaultSite(rack(0, 8, 1, "v100"), rack(1, 8, 1, "p100"), rack(2, 8, 1, "k80"))},
		// Groups are trimmed; the x and the type are case-insensitive
		// (types are stored lower-case).
		{" 2X4:T4 , 1x8:A100 ", defaultSite(rack(0, 2, 4, "t4"), rack(1, 1, 8, "a100"))},
		// Any non-empty type is accepted; only the memory default needs a
		// known one.
		{"1x1:mi300x", defaultSite(rack(0, 1, 1, "mi300x"))},
		// strconv.Atoi accepts a leading plus sign.
		{"+3x+2:l4", defaultSite(rack(0, 3, 2, "l4"))},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			got, err := cluster.ParseShorthand(tc.in)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestParseShorthandErrors(t *testing.T) {
	const form = "want NODESxGPUS:TYPE, e.g. 16x4:t4"
	cases := []struct {
		in   string
		want []string // substrings of the error, besides `cluster "<in>"`
	}{
		{"", []string{`group 1 ""`, form}},
		{"16x4", []string{`group 1 "16x4"`, form}},
		{"16x4:", []string{`group 1 "16x4:"`, form}},
		{"16:t4", []string{`group 1 "16:t4"`, form}},
		{"4x4:t4,,2x1:k80", []string{`group 2 ""`, form}},
		{"4x4:t4,", []string{`group 2 ""`, form}},
		{"0x4:t4", []string{"group 1", `node count "0" is not a positive integer`}},
		{"-1x4:t4", []string{"group 1", `node count "-1" is not a positive integer`}},
		{"ax4:t4", []string{"group 1", `node count "a" is not a positive integer`}},
		{"x4:t4", []string{"group 1", `node count "" is not a positive integer`}},
		{"99999999999999999999x1:t4", []string{`node count "99999999999999999999" is not a positive integer`}},
		{"4x0:t4", []string{"group 1", `GPUs per node "0" is not a positive integer`}},
		{"4x1.5:t4", []string{"group 1", `GPUs per node "1.5" is not a positive integer`}},
		{"4x4:t4,2x:v100", []string{"group 2", `GPUs per node "" is not a positive integer`}},
		{"4x4x4:t4", []string{"group 1", `GPUs per node "4x4" is not a positive integer`}},
		// Space inside a group (not around it) is not trimmed.
		{"4 x4:t4", []string{"group 1", `node count "4 " is not a positive integer`}},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			spec, err := cluster.ParseShorthand(tc.in)
			if err == nil {
				t.Fatalf("got %+v, want an error", spec)
			}
			for _, w := range append([]string{`cluster "` + tc.in + `"`}, tc.want...) {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
		})
	}
}

// twoSites is testdata/two-sites.{yaml,json}, derived by hand from the file:
// nodes are numbered in file order, each node's GPUs follow the previous
// node's (4, 4, 8, 1, 1 GPUs -> First 0, 4, 8, 16, 17), racks are numbered
// in order of first use, and memory defaults come from DefaultGPUMemGiB
// (a100 40, v100 32) unless the spec gives it (t4 15).
var twoSites = []string{
	"0 cloud/rack-0/node-0 site=cloud rack=0:cloud/rack-0 gpus=4:t4 first=0 mem=15 cpus=48 host=192",
	"1 cloud/rack-0/node-1 site=cloud rack=0:cloud/rack-0 gpus=4:t4 first=4 mem=15 cpus=48 host=192",
	"2 cloud/rack-1/node-0 site=cloud rack=1:cloud/rack-1 gpus=8:a100 first=8 mem=40 cpus=0 host=0",
	"3 edge/rack-0/node-0 site=edge rack=2:edge/rack-0 gpus=1:v100 first=16 mem=32 cpus=0 host=0",
	"4 edge/rack-0/node-1 site=edge rack=2:edge/rack-0 gpus=1:v100 first=17 mem=32 cpus=0 host=0",
}

func TestLoadFile(t *testing.T) {
	for _, path := range []string{"testdata/two-sites.yaml", "testdata/two-sites.json"} {
		for name, load := range map[string]func(string) (*cluster.Cluster, error){
			"LoadFile": cluster.LoadFile, "Parse": cluster.Parse,
		} {
			t.Run(name+"/"+path, func(t *testing.T) {
				c, err := load(path)
				if err != nil {
					t.Fatal(err)
				}
				if got := describe(c); !slices.Equal(got, twoSites) {
					t.Fatalf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(twoSites, "\n"))
				}
				checkInvariants(t, c)
				// 8 t4 + 8 a100 + 2 v100, types sorted.
				if want := "18 GPUs (5 nodes): 8 a100, 8 t4, 2 v100"; c.String() != want {
					t.Errorf("String %q, want %q", c.String(), want)
				}
				if want := []string{"cloud/rack-0", "cloud/rack-1", "edge/rack-0"}; !slices.Equal(c.Racks(), want) {
					t.Errorf("Racks %q, want %q", c.Racks(), want)
				}
				for typ, want := range map[string]int{"t4": 8, "a100": 8, "v100": 2, "k80": 0} {
					if got := c.GPUsOfType(typ); got != want {
						t.Errorf("GPUsOfType(%s) = %d, want %d", typ, got, want)
					}
				}
			})
		}
	}
}

// TestBuild decodes inline specs (YAML, or JSON where asJSON) and checks
// every node. Expected lines are derived by hand as for twoSites.
func TestBuild(t *testing.T) {
	cases := []struct {
		name   string
		spec   string
		asJSON bool
		want   []string
	}{{
		// Top-level nodes form site "default" with one rack; {gpus: 0}
		// is a GPU-less node with no type (and no memory default), and it
		// takes no GPU ids.
		name: "top-level nodes",
		spec: "nodes:\n  - {count: 2, gpus: 2, gpu: k80}\n  - {gpus: 0}\n",
		want: []string{
			"0 default/rack-0/node-0 site=default rack=0:default/rack-0 gpus=2:k80 first=0 mem=12 cpus=0 host=0",
			"1 default/rack-0/node-1 site=default rack=0:default/rack-0 gpus=2:k80 first=2 mem=12 cpus=0 host=0",
			"2 default/rack-0/node-2 site=default rack=0:default/rack-0 gpus=0: first=4 mem=0 cpus=0 host=0",
		},
	}, {
		// The "default" site of top-level nodes comes before the listed
		// sites; the type is trimmed and lower-cased before the memory
		// default (p100: 16) is looked up.
		name: "top-level nodes and sites",
		spec: "nodes: [{gpus: 1, gpu: t4}]\nsites:\n  - name: b\n    kind: inference\n    nodes: [{gpus: 2, gpu: ' P100 '}]\n",
		want: []string{
			"0 default/rack-0/node-0 site=default rack=0:default/rack-0 gpus=1:t4 first=0 mem=16 cpus=0 host=0",
			"1 b/rack-0/node-0 site=b rack=1:b/rack-0 gpus=2:p100 first=1 mem=16 cpus=0 host=0",
		},
	}, {
		// Site-level nodes become rack-0, so the unnamed racks[0] is
		// rack-1 (its index among the site's racks after rack-0).
		name: "site nodes and unnamed racks",
		spec: `sites:
  - name: s
    kind: edge
    nodes: [{gpus: 1, gpu: h100}]
    racks:
      - nodes: [{gpus: 2, gpu: h200}]
      - name: top
        nodes: [{gpus: 1, gpu: l4, gpu_memory_gib: 22.5}]
`,
		want: []string{
			"0 s/rack-0/node-0 site=s rack=0:s/rack-0 gpus=1:h100 first=0 mem=80 cpus=0 host=0",
			"1 s/rack-1/node-0 site=s rack=1:s/rack-1 gpus=2:h200 first=1 mem=141 cpus=0 host=0",
			"2 s/top/node-0 site=s rack=2:s/top gpus=1:l4 first=3 mem=22.5 cpus=0 host=0",
		},
	}, {
		// Several node groups in one rack are numbered on within the
		// rack; count 0 means 1; an unknown type has no memory default.
		name: "groups in a rack",
		spec: `{"sites": [{"name": "x", "racks": [{"name": "r", "nodes": [
			{"count": 2, "gpus": 1, "gpu": "t4"},
			{"count": 0, "gpus": 2, "gpu": "mi300x", "cpus": 4}]}]}]}`,
		asJSON: true,
		want: []string{
			"0 x/r/node-0 site=x rack=0:x/r gpus=1:t4 first=0 mem=16 cpus=0 host=0",
			"1 x/r/node-1 site=x rack=0:x/r gpus=1:t4 first=1 mem=16 cpus=0 host=0",
			"2 x/r/node-2 site=x rack=0:x/r gpus=2:mi300x first=2 mem=0 cpus=4 host=0",
		},
	}, {
		// A rack with no nodes adds no rack to the cluster.
		name: "empty rack",
		spec: "sites:\n  - name: a\n    racks:\n      - {name: empty, nodes: []}\n      - {name: full, nodes: [{gpus: 1, gpu: a10}]}\n",
		want: []string{
			"0 a/full/node-0 site=a rack=0:a/full gpus=1:a10 first=0 mem=24 cpus=0 host=0",
		},
	}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			spec, err := cluster.DecodeSpec([]byte(tc.spec), tc.asJSON)
			if err != nil {
				t.Fatal(err)
			}
			c, err := spec.Build()
			if err != nil {
				t.Fatal(err)
			}
			if got := describe(c); !slices.Equal(got, tc.want) {
				t.Fatalf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tc.want, "\n"))
			}
			checkInvariants(t, c)
		})
	}
}

// TestBuildShorthand: each shorthand group is one rack of site "default";
// "2x2:T4,1x1:k80" is nodes 0-1 (GPUs 0-1, 2-3) in rack 0 and node 2 (GPU 4)
// in rack 1.
func TestBuildShorthand(t *testing.T) {
	spec, err := cluster.ParseShorthand("2x2:T4,1x1:k80")
	if err != nil {
		t.Fatal(err)
	}
	c, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"0 default/rack-0/node-0 site=default rack=0:default/rack-0 gpus=2:t4 first=0 mem=16 cpus=0 host=0",
		"1 default/rack-0/node-1 site=default rack=0:default/rack-0 gpus=2:t4 first=2 mem=16 cpus=0 host=0",
		"2 default/rack-1/node-0 site=default rack=1:default/rack-1 gpus=1:k80 first=4 mem=12 cpus=0 host=0",
	}
	if got := describe(c); !slices.Equal(got, want) {
		t.Fatalf("nodes:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	checkInvariants(t, c)
}

// TestLoadFileErrors writes each spec to a file and checks that loading it
// fails with an error naming the file and containing the key facts (the
// field, the offending value).
func TestLoadFileErrors(t *testing.T) {
	const t4 = "{gpus: 1, gpu: t4}"
	cases := []struct {
		name string
		file string // file name; the extension picks JSON or YAML
		spec string
		want []string
	}{
		// Decoding: unknown fields and bad values.
		{"unknown node field", "c.yaml", "nodes: [{gpus: 1, gpu: t4, gpu_mem: 16}]", []string{"line 1: field gpu_mem not found"}},
		{"unknown top field", "c.yml", "site: []", []string{"field site not found"}},
		{"unknown site field", "c.yaml", "sites:\n  - name: a\n    rack: []\n", []string{"line 3", "field rack not found"}},
		{"unknown json field", "c.json", `{"nodes": [{"gpus": 1, "gpu": "t4", "gpu_mem": 16}]}`, []string{`unknown field "gpu_mem"`}},
		{"not a number", "c.yaml", "nodes: [{gpus: four, gpu: t4}]", []string{"line 1: got `four`, want a whole number"}},
		{"json not a number", "c.json", `{"nodes": [{"gpus": "4"}]}`, []string{"line 1: field nodes.gpus: got a string, want a whole number"}},
		{"not a list", "c.yaml", "sites:\n  - name: a\n    racks: {r: 1}\n", []string{"line 3: got a mapping (key: value), want a list"}},
		{"yaml syntax", "c.yaml", "nodes: [", []string{"yaml"}},
		{"json syntax", "c.json", `{"nodes": [}`, []string{"invalid character"}},
		{"yaml as json", "c.json", "nodes: []", []string{"invalid character"}},

		// Building: structure and values.
		{"no sites", "c.yaml", "sites: []", []string{"no sites and no nodes"}},
		{"json no sites", "c.json", "{}", []string{"no sites and no nodes"}},
		{"site name missing", "c.yaml", "sites: [{nodes: [" + t4 + "]}]", []string{"sites[0].name: missing"}},
		{"duplicate site", "c.yaml", "sites: [{name: a, nodes: [" + t4 + "]}, {name: a}]", []string{`sites[1].name: duplicate site "a"`}},
		{"bad kind", "c.yaml", "sites: [{name: a, kind: gpu}]", []string{`sites[0].kind: "gpu" is not one of cloud, edge, inference`}},
		{"negative count", "c.yaml", "sites: [{name: a, racks: [{name: r, nodes: [" + t4 + ", {count: -2, gpus: 1, gpu: t4}]}]}]",
			[]string{`site "a" rack "r" nodes[1].count: must be >= 1, got -2`}},
		{"negative gpus", "c.yaml", "nodes: [{gpus: -1, gpu: t4}]", []string{`site "default" rack "rack-0" nodes[0].gpus: must be >= 0, got -1`}},
		{"type missing", "c.yaml", "nodes: [{gpus: 2}]", []string{`nodes[0].gpu: missing GPU type`}},
		{"type blank", "c.json", `{"nodes": [{"gpus": 2, "gpu": "  "}]}`, []string{`nodes[0].gpu: missing GPU type`}},
		// A type tide knows no memory for must come with gpu_memory_gib.
		{"unknown type", "c.yaml", "sites: [{name: a, racks: [{name: r, nodes: [" + t4 + ", {gpus: 1, gpu: zz99}]}]}]",
			[]string{`site "a" racks[0] nodes[1].gpu: unknown GPU type "zz99"; known types: `, "t4", "v100", "gpu_memory_gib"}},
		{"unknown type top level", "c.json", `{"nodes": [{"gpus": 2, "gpu": "t4 extra"}]}`, []string{`nodes[0].gpu: unknown GPU type "t4 extra"`}},

		// Site indexes name the user's sites list, even when top-level
		// nodes add the implicit site "default" before it.
		{"top-level nodes and site default", "c.yaml", "nodes: [" + t4 + "]\nsites: [{name: default, nodes: [" + t4 + "]}]",
			[]string{`sites[0].name: duplicate site "default"`}},
		{"top-level nodes and unnamed site", "c.yaml", "nodes: [" + t4 + "]\nsites: [{nodes: [" + t4 + "]}]", []string{"sites[0].name: missing"}},
		{"top-level nodes and bad kind", "c.yaml", "nodes: [" + t4 + "]\nsites: [{name: a}, {name: b, kind: x}]", []string{`sites[1].kind: "x"`}},

		// Two rack entries may not silently become one rack.
		{"duplicate rack", "c.yaml", "sites: [{name: a, racks: [{name: r, nodes: [" + t4 + "]}, {name: r, nodes: [" + t4 + "]}]}]",
			[]string{`site "a" rack "r": duplicate rack name "a/r"`}},
		{"unnamed rack takes a used name", "c.yaml", "sites: [{name: a, racks: [{name: rack-1, nodes: [" + t4 + "]}, {nodes: [" + t4 + "]}]}]",
			[]string{`site "a" rack "rack-1": duplicate rack name "a/rack-1"`, "unnamed"}},
		{"rack named like the site-level rack", "c.yaml", "sites: [{name: a, nodes: [" + t4 + "], racks: [{name: rack-0, nodes: [" + t4 + "]}]}]",
			[]string{`site "a" rack "rack-0": duplicate rack name "a/rack-0"`}},
		{"rack across sites", "c.yaml", "sites: [{name: a, racks: [{name: b/c, nodes: [" + t4 + "]}]}, {name: a/b, racks: [{name: c, nodes: [" + t4 + "]}]}]",
			[]string{`site "a/b" rack "c": duplicate rack name "a/b/c"`}},

		// Sizes must be >= 0 and numbers.
		{"negative gpu memory", "c.yaml", "nodes: [{gpus: 1, gpu: t4, gpu_memory_gib: -16}]", []string{`nodes[0].gpu_memory_gib: must be a finite number >= 0, got -16`}},
		{"infinite gpu memory", "c.yaml", "nodes: [{gpus: 1, gpu: t4, gpu_memory_gib: .inf}]", []string{`nodes[0].gpu_memory_gib: must be a finite number >= 0, got +Inf`}},
		{"nan gpu memory", "c.yaml", "nodes: [{gpus: 1, gpu: t4, gpu_memory_gib: .nan}]", []string{`nodes[0].gpu_memory_gib: must be a finite number >= 0, got NaN`}},
		{"negative cpus", "c.json", `{"nodes": [{"gpus": 1, "gpu": "t4", "cpus": -4}]}`, []string{`nodes[0].cpus: must be a finite number >= 0, got -4`}},
		{"negative host memory", "c.yaml", "nodes: [" + t4 + ", {gpus: 1, gpu: t4, memory_gib: -1}]", []string{`nodes[1].memory_gib: must be a finite number >= 0, got -1`}},

		// Whatever follows the spec is an error, not silently dropped.
		{"json trailing value", "c.json", `{"nodes": [{"gpus": 1, "gpu": "t4"}]} {"nodes": [{"gpus": 1, "gpu": "v100"}]}`, []string{"after the spec"}},
		{"json trailing garbage", "c.json", `{"nodes": [{"gpus": 1, "gpu": "t4"}]} x`, []string{"after the spec"}},
		// The second document starts at its "---", on line 2.
		{"second yaml document", "c.yaml", "nodes: [" + t4 + "]\n---\nnodes: [{gpus: 1, gpu: v100}]\n", []string{"line 2: more than one YAML document"}},
		{"empty yaml", "c.yaml", "# only a comment\n", []string{"empty spec"}},
		{"empty json", "c.json", " \n", []string{"empty spec"}},
	}
	dir := t.TempDir()
	for i, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// One sub-directory per case keeps the file names in the table.
			path := filepath.Join(dir, strconv.Itoa(i), tc.file)
			if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(path, []byte(tc.spec), 0o644); err != nil {
				t.Fatal(err)
			}
			for name, load := range map[string]func(string) (*cluster.Cluster, error){
				"LoadFile": cluster.LoadFile, "Parse": cluster.Parse,
			} {
				c, err := load(path)
				if err == nil {
					t.Fatalf("%s: got %v, want an error", name, c)
				}
				for _, w := range append([]string{path}, tc.want...) {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("%s: error %q does not contain %q", name, err, w)
					}
				}
				// The user wrote YAML or JSON, not Go.
				for _, goName := range []string{"cluster.", "[]", " int", "!!", "Go struct"} {
					if strings.Contains(err.Error(), goName) {
						t.Errorf("%s: error %q names Go's %q", name, err, goName)
					}
				}
			}
		})
	}
}

// TestDecodeSpecTrailingSeparator: a YAML file may end with a document
// separator or comments after the spec; that is not a second spec.
func TestDecodeSpecTrailingSeparator(t *testing.T) {
	for _, in := range []string{
		"nodes: [{gpus: 1, gpu: t4}]\n---\n",
		"nodes: [{gpus: 1, gpu: t4}]\n---\n# nothing more\n",
		"---\nnodes: [{gpus: 1, gpu: t4}]\n...\n",
	} {
		spec, err := cluster.DecodeSpec([]byte(in), false)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if len(spec.Nodes) != 1 || spec.Nodes[0].GPU != "t4" {
			t.Errorf("%q: got %+v", in, spec)
		}
	}
}

// TestParse: Parse takes a path when the argument exists as a file, has a
// path separator or a spec extension, and a shorthand otherwise.
func TestParse(t *testing.T) {
	dir := t.TempDir()
	// A spec file whose name looks like a shorthand: it exists, so it is
	// read as a file (1 node of 3 k80 GPUs, not 2x4 t4).
	odd := filepath.Join(dir, "2x4:t4")
	if err := os.WriteFile(odd, []byte("nodes: [{gpus: 3, gpu: k80}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	// A type tide does not know, declared with its memory.
	declared := filepath.Join(dir, "new-type.yaml")
	if err := os.WriteFile(declared, []byte("nodes: [{count: 2, gpus: 4, gpu: zz99, gpu_memory_gib: 48}]"), 0o644); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name, arg string
		chdir     string // run from this directory ("" = the package)
		total     int    // GPUs of the cluster; 0 = want an error
		err       []string
	}{
		{name: "shorthand", arg: "2x4:t4", total: 8},
		{name: "shorthand groups", arg: "1x8:a100,2x1:t4", total: 10},
		{name: "yaml file", arg: "testdata/two-sites.yaml", total: 18},
		{name: "existing file named like a shorthand", arg: "2x4:t4", chdir: dir, total: 3},
		{name: "missing yaml", arg: "nope.yaml", err: []string{"cluster spec", "nope.yaml", "no such file"}},
		{name: "missing json", arg: "nope.json", err: []string{"nope.json", "no such file"}},
		{name: "missing path", arg: "specs/big", err: []string{"specs/big", "no such file"}},
		{name: "bad shorthand", arg: "big", err: []string{`cluster "big"`, "want NODESxGPUS:TYPE"}},
		{name: "bad shorthand count", arg: "0x1:t4", err: []string{`node count "0"`}},
		// Unknown GPU types list the known ones; a spec file may declare one.
		{name: "unknown type", arg: "16x4:zz99", err: []string{`cluster "16x4:zz99": group 1: unknown GPU type "zz99"; known types: `, "k80", "t4", "gpu_memory_gib"}},
		{name: "type with a suffix", arg: "1x1:t4,16x4:t4:extra", err: []string{`group 2: unknown GPU type "t4:extra"`}},
		{name: "upper-case type", arg: "2x4:T4", total: 8},
		{name: "declared type", arg: declared, total: 8},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.chdir != "" {
				t.Chdir(tc.chdir)
			}
			c, err := cluster.Parse(tc.arg)
			if tc.err != nil {
				if err == nil {
					t.Fatalf("got %v, want an error", c)
				}
				for _, w := range tc.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not contain %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.TotalGPUs() != tc.total {
				t.Fatalf("%d GPUs, want %d", c.TotalGPUs(), tc.total)
			}
			checkInvariants(t, c)
		})
	}
}

// TestSizeLimits: a typo that describes an absurd cluster is an error, not an
// attempt to allocate it.
func TestSizeLimits(t *testing.T) {
	for _, in := range []string{"1000000000x1000000000:t4", "2000000x1:t4", "1x5000000:t4", "1048576x4:t4,1x1:t4"} {
		_, err := cluster.Parse(in)
		if err == nil || !strings.Contains(err.Error(), "limits") {
			t.Errorf("Parse(%q): %v, want a limits error", in, err)
		}
	}
	if _, err := cluster.Parse("1024x4:t4"); err != nil {
		t.Errorf("a 4096-GPU cluster was refused: %v", err)
	}
}
