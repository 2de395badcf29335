package place_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/place"
)

// model is the free GPUs of each node while a plan is placed, kept by the
// test independently of the placer.
type model struct {
	c    *cluster.Cluster
	free []map[cluster.GPUID]bool // node -> free GPUs
}

// newModel marks every GPU free but those in busy.
func newModel(c *cluster.Cluster, busy map[cluster.GPUID]bool) *model {
	m := &model{c: c, free: make([]map[cluster.GPUID]bool, len(c.Nodes))}
	for _, n := range c.Nodes {
		m.free[n.ID] = map[cluster.GPUID]bool{}
		for k := 0; k < n.GPUs; k++ {
			if g := n.First + cluster.GPUID(k); !busy[g] {
				m.free[n.ID][g] = true
			}
		}
	}
	return m
}

func (m *model) freeOfType(t string) int {
	n := 0
	for _, nd := range m.c.Nodes {
		if nd.GPUType == t {
			n += len(m.free[nd.ID])
		}
	}
	return n
}

// nodesOfType lists the nodes of type t with free GPUs in rack r (any rack
// when r < 0), most free first, ties by node index.
func (m *model) nodesOfType(t string, r int) []int {
	var out []int
	for _, nd := range m.c.Nodes {
		if nd.GPUType == t && len(m.free[nd.ID]) > 0 && (r < 0 || nd.RackIdx == r) {
			out = append(out, nd.ID)
		}
	}
	slices.SortStableFunc(out, func(a, b int) int { return len(m.free[b]) - len(m.free[a]) })
	return out
}

// fewestNodes is the least number of nodes whose free GPUs add up to k,
// taking the nodes in the order given (most free first makes it the
// least), or -1 when they do not have k.
func (m *model) fewestNodes(nodes []int, k int) int {
	got := 0
	for i, id := range nodes {
		got += len(m.free[id])
		if got >= k {
			return i + 1
		}
	}
	return -1
}

// runs splits an allocation into runs of GPUs on the same node, in order.
type run struct{ node, n int }

func runs(c *cluster.Cluster, gpus []cluster.GPUID) []run {
	var out []run
	for _, g := range gpus {
		id := c.NodeOf(g).ID
		if len(out) > 0 && out[len(out)-1].node == id {
			out[len(out)-1].n++
			continue
		}
		out = append(out, run{id, 1})
	}
	return out
}

// checkPack checks the documented choice of Pack for k GPUs of type t:
// one node when one fits, the best fit (fewest free GPUs that fit, ties to
// the lowest index); else one rack, the one needing the fewest nodes (ties
// to the lowest rack index); else anywhere, as few nodes as possible. Past
// step 1, the nodes are used most free first, so every node but the last
// one used gives all its free GPUs.
func checkPack(m *model, t string, k int, got []cluster.GPUID) (string, error) {
	rs := runs(m.c, got)
	best := -1
	for _, nd := range m.c.Nodes {
		if fr := len(m.free[nd.ID]); nd.GPUType == t && fr >= k && (best < 0 || fr < len(m.free[best])) {
			best = nd.ID
		}
	}
	if best >= 0 {
		if len(rs) != 1 || rs[0].node != best {
			return "node", fmt.Errorf("want all on node %d (best fit, %d free), got runs %v", best, len(m.free[best]), rs)
		}
		return "node", nil
	}
	for i, r := range rs {
		if i < len(rs)-1 && r.n != len(m.free[r.node]) {
			return "", fmt.Errorf("node %d gave %d of its %d free GPUs but is not the last one used: runs %v", r.node, r.n, len(m.free[r.node]), rs)
		}
		for _, r2 := range rs[:i] {
			if r2.node == r.node {
				return "", fmt.Errorf("node %d used twice: runs %v", r.node, rs)
			}
		}
	}
	bestRack, bestNodes := -1, 0
	for r := range m.c.Racks() {
		if n := m.fewestNodes(m.nodesOfType(t, r), k); n > 0 && (bestRack < 0 || n < bestNodes) {
			bestRack, bestNodes = r, n
		}
	}
	if bestRack >= 0 {
		for _, r := range rs {
			if m.c.Nodes[r.node].RackIdx != bestRack {
				return "rack", fmt.Errorf("want all in rack %d (%d nodes), got node %d of rack %d: runs %v",
					bestRack, bestNodes, r.node, m.c.Nodes[r.node].RackIdx, rs)
			}
		}
		if len(rs) != bestNodes {
			return "rack", fmt.Errorf("want %d nodes of rack %d, got runs %v", bestNodes, bestRack, rs)
		}
		return "rack", nil
	}
	if want := m.fewestNodes(m.nodesOfType(t, -1), k); len(rs) != want {
		return "anywhere", fmt.Errorf("want %d nodes (most free first), got runs %v", want, rs)
	}
	return "anywhere", nil
}

// checkMostFree checks MostFree's documented choice: GPUs from the node with
// the most free GPUs (ties to the lowest index), then the next, until k.
func checkMostFree(m *model, t string, k int, got []cluster.GPUID) (string, error) {
	left := make([]int, len(m.c.Nodes))
	for i := range left {
		left[i] = len(m.free[i])
	}
	need := k
	rs := runs(m.c, got)
	branch := "one node"
	if len(rs) > 1 {
		branch = "several nodes"
	}
	for _, r := range rs {
		best := -1
		for _, nd := range m.c.Nodes {
			if nd.GPUType == t && left[nd.ID] > 0 && (best < 0 || left[nd.ID] > left[best]) {
				best = nd.ID
			}
		}
		if r.node != best {
			return branch, fmt.Errorf("took %d GPUs from node %d (%d free), want node %d (%d free): %v", r.n, r.node, left[r.node], best, left[best], got)
		}
		if want := min(left[best], need); r.n != want {
			return branch, fmt.Errorf("took %d GPUs from node %d, want %d: %v", r.n, r.node, want, got)
		}
		left[best] -= r.n
		need -= r.n
	}
	return branch, nil
}

// checkPlace checks one Place call against the Placer contract and the
// placer's documented rule, walking the plan in order as the placers do:
//   - a job whose held GPUs match its assignment (count, and type unless
//     any) keeps exactly them;
//   - any other job is placed if and only if enough GPUs of its type (for
//     an any-type job: of the type with the most free GPUs) are free at its
//     turn, with exactly the GPUs asked, all free, all of that type;
//   - which GPUs follows the placer's rule (rule).
//
// Together these give: no GPU given twice, no GPU that does not exist,
// and per type never more than the cluster has.
func checkPlace(c *cluster.Cluster, held map[string][]cluster.GPUID, plan []engine.Assignment, got map[string][]cluster.GPUID,
	rule ruleFunc) error {
	inPlan := map[string]bool{}
	for _, a := range plan {
		inPlan[a.Job] = true
	}
	for id := range got {
		if !inPlan[id] {
			return fmt.Errorf("placed %s, which is not in the plan", id)
		}
	}
	kept := map[string]bool{}
	busy := map[cluster.GPUID]bool{}
	for _, a := range plan {
		h := held[a.Job]
		if len(h) > 0 && len(h) == a.GPUs && (a.GPUType == "" || c.NodeOf(h[0]).GPUType == a.GPUType) {
			if !slices.Equal(got[a.Job], h) {
				return fmt.Errorf("job %s held %v for the same assignment, got %v", a.Job, h, got[a.Job])
			}
			kept[a.Job] = true
			for _, g := range h {
				busy[g] = true
			}
		}
	}
	m := newModel(c, busy)
	for _, a := range plan {
		if kept[a.Job] {
			continue
		}
		// The types the job may get: its own, or those with the most free.
		types, most := []string{a.GPUType}, m.freeOfType(a.GPUType)
		if a.GPUType == "" {
			types, most = nil, -1
			for _, t := range c.GPUTypes() {
				switch n := m.freeOfType(t); {
				case n > most:
					types, most = []string{t}, n
				case n == most:
					types = append(types, t)
				}
			}
		}
		gpus, placed := got[a.Job]
		if !placed {
			if most >= a.GPUs {
				return fmt.Errorf("job %s (%d %q) not placed with %d free of %q", a.Job, a.GPUs, a.GPUType, most, types)
			}
			continue
		}
		if most < a.GPUs {
			return fmt.Errorf("job %s (%d %q) placed on %v with only %d free of %q", a.Job, a.GPUs, a.GPUType, gpus, most, types)
		}
		if len(gpus) != a.GPUs {
			return fmt.Errorf("job %s asked %d GPUs, got %v", a.Job, a.GPUs, gpus)
		}
		for _, g := range gpus {
			if g < 0 || int(g) >= c.TotalGPUs() {
				return fmt.Errorf("job %s got GPU %d of %d", a.Job, g, c.TotalGPUs())
			}
		}
		t := c.NodeOf(gpus[0]).GPUType
		if !slices.Contains(types, t) {
			return fmt.Errorf("job %s (%q) got %v of type %s, want one of %q", a.Job, a.GPUType, gpus, t, types)
		}
		for _, g := range gpus {
			n := c.NodeOf(g)
			if n.GPUType != t {
				return fmt.Errorf("job %s got %v, mixing types %s and %s", a.Job, gpus, t, n.GPUType)
			}
			if !m.free[n.ID][g] {
				return fmt.Errorf("job %s got GPU %d, which is not free (held by a kept job or given earlier)", a.Job, g)
			}
		}
		if _, err := rule(m, t, a.GPUs, gpus); err != nil {
			return fmt.Errorf("job %s (%d %q): %w", a.Job, a.GPUs, a.GPUType, err)
		}
		for _, g := range gpus {
			if !m.free[c.NodeOf(g).ID][g] {
				return fmt.Errorf("job %s got GPU %d twice: %v", a.Job, g, gpus)
			}
			delete(m.free[c.NodeOf(g).ID], g)
		}
	}
	// Redundant with the walk above, but stated directly: no GPU twice, and
	// per type no more than the cluster has.
	owner := map[cluster.GPUID]string{}
	perType := map[string]int{}
	for id, gpus := range got {
		for _, g := range gpus {
			if o, ok := owner[g]; ok {
				return fmt.Errorf("GPU %d given to %s and %s", g, o, id)
			}
			owner[g] = id
			perType[c.NodeOf(g).GPUType]++
		}
	}
	for t, n := range perType {
		if n > c.GPUsOfType(t) {
			return fmt.Errorf("%d %s GPUs placed, the cluster has %d", n, t, c.GPUsOfType(t))
		}
	}
	return nil
}

// randomShorthand makes a cluster of 1-3 racks, each of 1-4 nodes of 1, 2,
// 3, 4 or 8 GPUs of one of three types.
func randomShorthand(r *rand.Rand) string {
	var groups []string
	for range 1 + r.IntN(3) {
		groups = append(groups, fmt.Sprintf("%dx%d:%s", 1+r.IntN(4),
			[]int{1, 2, 3, 4, 8}[r.IntN(5)], []string{"t4", "v100", "a100"}[r.IntN(3)]))
	}
	return strings.Join(groups, ",")
}

// ruleFunc checks the GPUs a placer chose for k GPUs of type t, given the
// free GPUs before; it names the branch of the rule that applied.
type ruleFunc func(m *model, t string, k int, got []cluster.GPUID) (string, error)

// stats counts what the random runs exercised.
type stats struct {
	placed, refused, kept int
	branch                map[string]int
	// added counts the rounds compared with engine.Adder's PlaceAdded.
	added int
}

// simulate drives placer p through random clusters and random sequences of
// submissions, completions (frees), resizes and reorderings, feeding each
// round's placement back as what jobs hold, as the engine does, and checks
// every Place call with checkPlace and rule. It returns the first failure.
func simulate(p engine.Placer, rule ruleFunc, seed uint64, clusters, rounds int) (stats, error) {
	r := rand.New(rand.NewPCG(seed, 2))
	st := stats{branch: map[string]int{}}
	countRule := func(m *model, t string, k int, got []cluster.GPUID) (string, error) {
		b, err := rule(m, t, k, got)
		st.branch[b]++
		return b, err
	}
	for ci := range clusters {
		sh := randomShorthand(r)
		c := enginetest.Cluster(sh)
		types := c.GPUTypes()
		var plan []engine.Assignment
		held := map[string][]cluster.GPUID{}
		next := 0
		newAsk := func(id string) engine.Assignment {
			a := engine.Assignment{Job: id, GPUs: 1 + r.IntN(min(c.TotalGPUs()+2, 12))}
			switch p := r.IntN(10); {
			case p < 5: // any type
			case p < 9:
				a.GPUType = types[r.IntN(len(types))]
			default:
				a.GPUType = "h100" // in no cluster here
			}
			return a
		}
		for round := range rounds {
			switch op := r.IntN(20); {
			case op < 7 || len(plan) == 0: // submit
				plan = append(plan, newAsk("j"+strconv.Itoa(next)))
				next++
			case op < 14: // finish: the job's GPUs are freed
				i := r.IntN(len(plan))
				delete(held, plan[i].Job)
				plan = slices.Delete(plan, i, i+1)
			case op < 17: // resize, or change type
				i := r.IntN(len(plan))
				plan[i] = newAsk(plan[i].Job)
			default: // a policy reorders the plan
				r.Shuffle(len(plan), func(i, j int) { plan[i], plan[j] = plan[j], plan[i] })
			}
			heldCopy := maps.Clone(held)
			for id, g := range held {
				heldCopy[id] = slices.Clone(g)
			}
			planCopy := slices.Clone(plan)
			got := p.Place(c, held, plan)
			if !maps.EqualFunc(held, heldCopy, slices.Equal) || !reflect.DeepEqual(plan, planCopy) {
				return st, fmt.Errorf("cluster %d %q round %d: Place changed its inputs", ci, sh, round)
			}
			if err := checkPlace(c, held, plan, got, countRule); err != nil {
				return st, fmt.Errorf("cluster %d %q round %d\nheld %v\nplan %v\ngot %v\n%w", ci, sh, round, held, plan, got, err)
			}
			if ad, ok := p.(engine.Adder); ok {
				n, err := checkAdded(c, ad, held, plan, got)
				if err != nil {
					return st, fmt.Errorf("cluster %d %q round %d\nheld %v\nplan %v\ngot %v\n%w", ci, sh, round, held, plan, got, err)
				}
				st.added += n
			}
			for _, a := range plan {
				if g, ok := got[a.Job]; !ok {
					st.refused++
				} else if slices.Equal(g, held[a.Job]) {
					st.kept++
				} else {
					st.placed++
				}
			}
			held = got
		}
	}
	return st, nil
}

// checkAdded compares, in a round where Place kept every job that held
// GPUs where it was, the GPUs Place gave the other jobs with what
// PlaceAdded gives them around the held GPUs; it returns 1 when it
// compared, 0 when the round was not one PlaceAdded is for.
func checkAdded(c *cluster.Cluster, ad engine.Adder, held map[string][]cluster.GPUID, plan []engine.Assignment, got map[string][]cluster.GPUID) (int, error) {
	busy := make([]bool, c.TotalGPUs())
	var add []engine.Assignment
	want := map[string][]cluster.GPUID{}
	for _, a := range plan {
		h, holds := held[a.Job]
		if !holds {
			add = append(add, a)
			if g, ok := got[a.Job]; ok {
				want[a.Job] = g
			}
			continue
		}
		if !slices.Equal(got[a.Job], h) {
			return 0, nil // moved: not a round that only adds
		}
		for _, g := range h {
			busy[g] = true
		}
	}
	if len(held) != len(plan)-len(add) {
		return 0, nil // a job that held GPUs left the plan: its GPUs are freed
	}
	busyCopy := slices.Clone(busy)
	out := placeAdded(ad, c, busy, add)
	if !slices.Equal(busy, busyCopy) {
		return 1, fmt.Errorf("PlaceAdded changed busy")
	}
	if !maps.EqualFunc(out, want, slices.Equal) {
		return 1, fmt.Errorf("PlaceAdded gave %v, Place gave the same jobs %v", out, want)
	}
	return 1, nil
}

// TestPlacerProperties runs simulate for each placer with a fixed seed and
// checks that the random runs reached every branch of the placer's rule
// and of the contract (placed, refused, kept).
func TestPlacerProperties(t *testing.T) {
	for _, tc := range []struct {
		placer   engine.Placer
		rule     ruleFunc
		branches []string
	}{
		{place.Pack{}, checkPack, []string{"node", "rack", "anywhere"}},
		{place.MostFree{}, checkMostFree, []string{"one node", "several nodes"}},
	} {
		t.Run(tc.placer.Name(), func(t *testing.T) {
			st, err := simulate(tc.placer, tc.rule, 1, 300, 40)
			if err != nil {
				t.Fatal(err)
			}
			t.Logf("%+v", st)
			if st.placed == 0 || st.refused == 0 || st.kept == 0 {
				t.Errorf("placed %d, refused %d, kept %d: the generator misses a case", st.placed, st.refused, st.kept)
			}
			if _, ok := tc.placer.(engine.Adder); ok && st.added == 0 {
				t.Errorf("no round compared Place with PlaceAdded: the generator misses a case")
			}
			for _, b := range tc.branches {
				if st.branch[b] == 0 {
					t.Errorf("branch %q never taken: %v", b, st.branch)
				}
			}
		})
	}
}

// TestPropertiesCanFail: the checks are not vacuous. Each placer's
// placements break the other's rule on these random runs, and a placer
// that hands out a GPU twice or the wrong count is caught.
func TestPropertiesCanFail(t *testing.T) {
	cases := []struct {
		name   string
		placer engine.Placer
		rule   ruleFunc
		want   string
	}{
		{"most-free is not pack", place.MostFree{}, checkPack, ""},
		{"pack is not most-free", place.Pack{}, checkMostFree, ""},
		{"gpu twice", dupPlacer{}, checkPack, "not free"},
		{"one gpu short", shortPlacer{}, checkPack, "asked"},
		{"keeps nothing", freshPlacer{}, checkPack, "for the same assignment"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := simulate(tc.placer, tc.rule, 1, 300, 40)
			if err == nil {
				t.Fatal("no failure found")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("failure %v, want one about %q", err, tc.want)
			}
			t.Log(err)
		})
	}
}

// dupPlacer is Pack, but a job placed next to another gets that job's
// first GPU in place of its own first.
type dupPlacer struct{}

func (dupPlacer) Name() string { return "dup" }
func (dupPlacer) Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	out := place.Pack{}.Place(c, held, run)
	var prev []cluster.GPUID
	for _, a := range run {
		g, ok := out[a.Job]
		if !ok || slices.Equal(g, held[a.Job]) {
			continue
		}
		if prev != nil && c.NodeOf(prev[0]).GPUType == c.NodeOf(g[0]).GPUType {
			g = slices.Clone(g)
			g[0] = prev[0]
			out[a.Job] = g
			return out
		}
		prev = g
	}
	return out
}

// shortPlacer is Pack, but newly placed jobs of 2 or more GPUs get one
// less.
type shortPlacer struct{}

func (shortPlacer) Name() string { return "short" }
func (shortPlacer) Place(c *cluster.Cluster, held map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	out := place.Pack{}.Place(c, held, run)
	for id, g := range out {
		if len(g) > 1 && !slices.Equal(g, held[id]) {
			out[id] = g[:len(g)-1]
		}
	}
	return out
}

// freshPlacer is Pack ignoring what jobs hold.
type freshPlacer struct{}

func (freshPlacer) Name() string { return "fresh" }
func (freshPlacer) Place(c *cluster.Cluster, _ map[string][]cluster.GPUID, run []engine.Assignment) map[string][]cluster.GPUID {
	return place.Pack{}.Place(c, nil, run)
}

// placeAdded is ad's placement of add around busy, in a map of its own.
func placeAdded(ad engine.Adder, c *cluster.Cluster, busy []bool, add []engine.Assignment) map[string][]cluster.GPUID {
	out := map[string][]cluster.GPUID{}
	ad.PlaceAdded(c, busy, add, out)
	return out
}
