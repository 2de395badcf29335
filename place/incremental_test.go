package place

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/engine"
)

// randomCluster builds a cluster of 1-3 sites (cloud or edge), each of 1-3
// racks of 1-3 node groups of 1, 2, 3, 4 or 8 GPUs of one of three types;
// with big, a group may hold up to 150 nodes, so the node sets span
// several words.
func randomCluster(t *testing.T, r *rand.Rand, big bool) *cluster.Cluster {
	t.Helper()
	var spec cluster.Spec
	for s := range 1 + r.IntN(3) {
		site := cluster.SiteSpec{Name: fmt.Sprintf("s%d", s)}
		if s > 0 && r.IntN(3) == 0 {
			site.Kind = "edge"
		}
		for k := range 1 + r.IntN(3) {
			rack := cluster.RackSpec{Name: fmt.Sprintf("r%d", k)}
			for range 1 + r.IntN(3) {
				n := 1 + r.IntN(4)
				if big && r.IntN(2) == 0 {
					n = 1 + r.IntN(150)
				}
				rack.Nodes = append(rack.Nodes, cluster.NodeSpec{Count: n,
					GPUs: []int{1, 2, 3, 4, 8}[r.IntN(5)], GPU: []string{"t4", "v100", "a100"}[r.IntN(3)]})
			}
			site.Racks = append(site.Racks, rack)
		}
		spec.Sites = append(spec.Sites, site)
	}
	c, err := spec.Build()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// randomAsk is an assignment for job id: a size from 1 GPU to twice the
// largest node, a type or none, sometimes a site, sometimes an exact shape (on distinct nodes).
func randomAsk(r *rand.Rand, c *cluster.Cluster, id string) engine.Assignment {
	most := 1
	for _, n := range c.Nodes {
		most = max(most, n.GPUs)
	}
	a := engine.Assignment{Job: id, GPUs: 1 + r.IntN(2*most)}
	if r.IntN(4) > 0 {
		a.GPUType = c.GPUTypes()[r.IntN(len(c.GPUTypes()))]
	}
	if len(c.Sites()) > 1 && r.IntN(3) == 0 {
		a.Site = c.Sites()[r.IntN(len(c.Sites()))].Name
	}
	if r.IntN(8) == 0 {
		a.Nodes, a.GPUs = nil, 0
		for _, n := range r.Perm(len(c.Nodes))[:min(len(c.Nodes), 1+r.IntN(2))] {
			k := 1 + r.IntN(c.Nodes[n].GPUs)
			a.Nodes = append(a.Nodes, engine.NodeGPUs{Node: n, GPUs: k})
			a.GPUs += k
		}
	}
	return a
}

// TestIncrementalMatchesScan drives the placers, whose free lists are now
// kept from one placement to the next, and the old ones that scanned every
// GPU and node per placement (scan_ref_test.go) through the same random
// rounds on random clusters: jobs start (PlaceAdded), finish, and whole
// plans are placed (Place) with jobs kept, resized, reordered and new.
// Every placement must be the same. Some placements are not applied (as
// when another simulation on the same cluster takes the pooled state in
// between), and two clusters alternate, so the kept state meets a busy
// mask other than the one it left.
func TestIncrementalMatchesScan(t *testing.T) {
	type placer struct {
		p    engine.Adder
		pick func(f *refMap, t string, k int) []cluster.GPUID
	}
	placers := []placer{{Pack{}, (*refMap).pack}, {MostFree{}, (*refMap).mostFree}}
	r := rand.New(rand.NewPCG(19, 2))
	compared, placedJobs, spread := 0, 0, 0
	for ci := range 60 {
		cs := []*cluster.Cluster{randomCluster(t, r, ci%2 == 0), randomCluster(t, r, ci%3 == 0)}
		pl := placers[ci%2]
		holds := make([]map[string][]cluster.GPUID, len(cs))
		for i := range holds {
			holds[i] = map[string][]cluster.GPUID{}
		}
		next := 0
		for round := range 150 {
			i := r.IntN(len(cs))
			if round < 20 {
				i = 0 // the first rounds fill one cluster without interleaving
			}
			c, held := cs[i], holds[i]
			// Some jobs finish.
			for _, id := range slices.Sorted(maps.Keys(held)) {
				if r.IntN(6) == 0 {
					delete(held, id)
				}
			}
			busy := make([]bool, c.TotalGPUs())
			for _, gs := range held {
				for _, g := range gs {
					busy[g] = true
				}
			}
			var got, want map[string][]cluster.GPUID
			whole := r.IntN(3) == 0 // Place rather than PlaceAdded
			if !whole {
				var add []engine.Assignment
				for range r.IntN(6) {
					add = append(add, randomAsk(r, c, fmt.Sprint("j", next)))
					next++
				}
				want = refAddEach(c, slices.Clone(busy), add, pl.pick)
				got = placeAdded(pl.p, c, busy, add)
			} else {
				var plan []engine.Assignment
				for _, id := range slices.Sorted(maps.Keys(held)) {
					switch gs := held[id]; r.IntN(5) {
					case 0: // preempted: left out of the plan
					case 1: // resized
						plan = append(plan, engine.Assignment{Job: id, GPUs: 1 + r.IntN(len(gs)+2)})
					default: // kept
						plan = append(plan, engine.Assignment{Job: id, GPUs: len(gs)})
					}
				}
				for range r.IntN(4) {
					plan = append(plan, randomAsk(r, c, fmt.Sprint("j", next)))
					next++
				}
				r.Shuffle(len(plan), func(a, b int) { plan[a], plan[b] = plan[b], plan[a] })
				want = refPlaceEach(c, held, plan, pl.pick)
				got = pl.p.Place(c, held, plan)
			}
			compared++
			placedJobs += len(want)
			for _, gs := range want {
				if c.NodeOf(gs[0]) != c.NodeOf(gs[len(gs)-1]) {
					spread++
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("cluster %d (%s), round %d, %s: placed %v, the scan placed %v", ci, c, round, pl.p.Name(), got, want)
			}
			if r.IntN(5) == 0 {
				continue // not applied
			}
			if whole {
				clear(held) // a whole plan's placement lists every job that runs
			}
			for id, gs := range got {
				held[id] = gs
			}
		}
	}
	if placedJobs < 10000 || spread < 1000 {
		t.Errorf("only %d jobs placed, %d of them on several nodes", placedJobs, spread)
	}
	t.Logf("%d placements, %d jobs placed (%d on several nodes), all as the scan placed them", compared, placedJobs, spread)
}

// BenchmarkPackAdded times one round that starts a job on a Helios-sized
// cluster (2,500 nodes of 8 GPUs, up to 60% held): a job ends and another
// starts (1 to 32 GPUs), placed by Pack's PlaceAdded ("kept", the free
// lists kept between rounds) and by the old scan of every GPU and node
// ("scan", scan_ref_test.go), on the same sequence of rounds. cpu-ns/op is
// the process's CPU time per round (the figure to read on a loaded
// machine; it includes the garbage collector's).
func BenchmarkPackAdded(b *testing.B) {
	c, err := cluster.Parse("2500x8:v100")
	if err != nil {
		b.Fatal(err)
	}
	out := map[string][]cluster.GPUID{}
	for _, way := range []struct {
		name  string
		place func(busy []bool, add []engine.Assignment) map[string][]cluster.GPUID
	}{
		{"kept", func(busy []bool, add []engine.Assignment) map[string][]cluster.GPUID {
			clear(out) // the engine's way: one map, emptied between rounds
			Pack{}.PlaceAdded(c, busy, add, out)
			return out
		}},
		{"scan", func(busy []bool, add []engine.Assignment) map[string][]cluster.GPUID {
			return refAddEach(c, busy, add, (*refMap).pack)
		}},
	} {
		b.Run(way.name, func(b *testing.B) {
			r := rand.New(rand.NewPCG(1, 2))
			busy := make([]bool, c.TotalGPUs())
			var jobs [][]cluster.GPUID
			held := 0
			sizes := []int{1, 1, 1, 1, 1, 1, 2, 2, 4, 8, 16, 32}
			add := make([]engine.Assignment, 1)
			step := func() {
				if len(jobs) > 0 && (r.IntN(2) == 0 || held > 12000) {
					k := r.IntN(len(jobs))
					held -= len(jobs[k])
					for _, g := range jobs[k] {
						busy[g] = false
					}
					jobs[k] = jobs[len(jobs)-1]
					jobs = jobs[:len(jobs)-1]
				}
				add[0] = engine.Assignment{Job: "j", GPUs: sizes[r.IntN(len(sizes))]}
				if gs := way.place(busy, add)["j"]; gs != nil {
					for _, g := range gs {
						busy[g] = true
					}
					jobs = append(jobs, gs)
					held += len(gs)
				}
			}
			for range 20000 {
				step()
			}
			b.ResetTimer()
			cpu := cputime.Process()
			for b.Loop() {
				step()
			}
			b.ReportMetric((cputime.Process()-cpu)*1e9/float64(b.N), "cpu-ns/op")
		})
	}
}

// placeAdded is ad's placement of add around busy, in a map of its own.
func placeAdded(ad engine.Adder, c *cluster.Cluster, busy []bool, add []engine.Assignment) map[string][]cluster.GPUID {
	out := map[string][]cluster.GPUID{}
	ad.PlaceAdded(c, busy, add, out)
	return out
}
