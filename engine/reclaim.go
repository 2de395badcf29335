package engine

// ReclaimCosts prices taking GPUs back from each job that holds some, when
// a site's capacity drops (inference demand, an edge server's owner): the
// policy's ReclaimCost when p or a policy it wraps is a ReclaimCoster,
// else fallback(st) (the simulator and tide kube pass the GPU-seconds the
// job's checkpoint takes). Executors take GPUs from the jobs of lowest
// cost first, and idle GPUs before any job's, so that the simulator and a
// live cluster reclaim in the same order.
func (e *Engine) ReclaimCosts(p Policy, fallback func(st *Status) float64) map[*Status]float64 {
	active := e.list()
	out := make(map[*Status]float64, len(active))
	rc, ok := As[ReclaimCoster](p)
	var byID map[string]*Status
	var snap *Snapshot
	if ok {
		snap = e.Snapshot()
		byID = make(map[string]*Status, len(snap.Jobs))
		for _, c := range snap.Jobs {
			byID[c.Job.ID] = c
		}
	}
	for _, st := range active {
		if len(st.GPUs) == 0 {
			continue
		}
		if ok {
			out[st] = rc.ReclaimCost(snap, byID[st.Job.ID])
			continue
		}
		out[st] = fallback(st)
	}
	return out
}
