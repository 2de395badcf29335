package alloc

import "github.com/tide-sched/tide/engine"

// Reset makes p the pool NewPool(s) returns, in the memory p kept from an
// earlier round: a policy that keeps its Pool from round to round
// allocates nothing for it once it has seen the cluster's types (issue
// 19: steady rounds allocate nothing). The zero Pool may be Reset.
func (p *Pool) Reset(s *engine.Snapshot) { p.init(s, p.counts) }
