package sim

// Fractional GPUs (docs/sharing.md): a job holding part of each GPU
// (engine.Status.Share > 0) runs at the model's rate for its GPUs, as it
// would alone: its share is what it asked to need, so the simulator adds
// no interference between parts (docs/sharing.md says where that fails).
// It is charged its part of each GPU: JobRecord.GPUSeconds counts the
// part, JobRecord.SharedGPUSeconds the rest, which the GPUs' other holders
// may use. A GPU counts once in the utilisation however many parts share
// it.

// charged is the GPUs r is charged per second: all it holds, half of a
// packed pair's (share.go), or its part of each.
func charged(r *running) float64 {
	gpus := float64(r.gpus)
	switch {
	case r.part > 0:
		gpus *= r.part
	case r.partner != "":
		gpus /= 2
	}
	return gpus
}

// occupancyParts is occupancy while fractional jobs run: the GPUs held,
// and of those the GPUs some holder uses past its start delay, each GPU
// once.
func (s *simulator) occupancyParts() (alloc, useful int) {
	n := s.cfg.Cluster.TotalGPUs()
	if cap(s.gpuMarks) < n {
		s.gpuMarks = make([]uint8, n)
	}
	marks := s.gpuMarks[:n]
	clear(marks)
	for _, r := range s.live {
		for _, g := range r.st.GPUs {
			m := uint8(1)
			if r.delay <= 0 {
				m = 2
			}
			marks[g] = max(marks[g], m)
		}
	}
	for _, m := range marks {
		if m > 0 {
			alloc++
		}
		if m == 2 {
			useful++
		}
	}
	return alloc, useful
}
