package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/engine/enginetest"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf/table"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy/internal/policytest"
	"github.com/tide-sched/tide/sim"
	"github.com/tide-sched/tide/solver/solvertest"
)

// TestPackingStateHandover is sim's TestStateHandover for the packing
// policies, which pack only where the model measured pairs (policytest.PairTable
// here): Gandiva's pairs, bad pairs and random source, and Gavel's pairs'
// shares must survive a handover to a fresh instance every 3 rounds.
func TestPackingStateHandover(t *testing.T) {
	solvertest.Require(t)
	g, err := table.ParseGavel("pairs.json", []byte(policytest.PairTable))
	if err != nil {
		t.Fatal(err)
	}
	var jobs = make([]*job.Job, 0, 12)
	for i := range 12 {
		j := policytest.PairJob(fmt.Sprintf("j%02d", i), string("ABC"[i%3]), float64(300+97*i))
		j.Submit = float64(40 * i)
		jobs = append(jobs, j)
	}
	for _, spec := range []string{"gandiva:pack=true", "gandiva:preset=gavel:pack=true", "gavel-las:space_sharing=true"} {
		t.Run(spec, func(t *testing.T) {
			packed, saves := false, 0
			build := func() (engine.Policy, error) {
				p, err := Parse(spec, Context{})
				return &packSeen{Policy: p, seen: &packed}, err
			}
			// Every save is checked to be the same bytes again and from a
			// fresh instance that loaded it.
			fresh := func() (engine.Policy, error) {
				p, err := build()
				return &enginetest.StableState{Policy: p, T: t, Fresh: build, Saves: &saves}, err
			}
			once := func(every int) []byte {
				p, err := fresh()
				if err != nil {
					t.Fatal(err)
				}
				r, err := sim.Run(sim.Config{Cluster: enginetest.Cluster("2x1:v100"), Model: g, Policy: p, Placer: place.Pack{},
					Round: 60, OnEvents: true, Handover: every, Fresh: fresh}, jobs)
				if err != nil {
					t.Fatal(err)
				}
				if !packed {
					t.Fatal("no job ran packed: the test checks nothing")
				}
				var buf bytes.Buffer
				if err := json.NewEncoder(&buf).Encode(r); err != nil {
					t.Fatal(err)
				}
				return buf.Bytes()
			}
			straight := once(0)
			for _, every := range []int{3, 7} {
				if !bytes.Equal(once(every), straight) {
					t.Errorf("handed over every %d rounds: the run differs from one without", every)
				}
			}
			if saves == 0 {
				t.Error("no handover saved any state: the bytes were not checked")
			}
		})
	}
}

// packSeen notes whether a plan ever packed two jobs.
type packSeen struct {
	engine.Policy
	seen *bool
}

func (p *packSeen) Unwrap() engine.Policy { return p.Policy }

func (p *packSeen) Schedule(s *engine.Snapshot) engine.Plan {
	plan := p.Policy.Schedule(s)
	for _, a := range plan.Run {
		*p.seen = *p.seen || a.PackWith != ""
	}
	return plan
}
