package server

import (
	"github.com/tide-sched/tide/cluster"
)

// GPU sharing (docs/sharing.md): jobs that hold part of a GPU (fractional
// jobs, job.Job.Fractional) run on it together. The engine decides who
// shares which GPU; here the server lets their processes run at once,
// gives each its limits (localexec.Launch.Share, GPUMemGiB) and, where
// the machine has CUDA MPS, holds the GPU's MPS daemon for them
// (localexec.MPS).

// fractional reports whether a's job asks for part of each GPU.
func (a *attempt) fractional() bool { return a.lj.j != nil && a.lj.j.Fractional() }

// claim records attempt a on GPU g and adds what it must wait for to
// a.waitFor. A whole-GPU attempt waits for every earlier process on g: the
// last whole-GPU attempt and every fractional one. A fractional attempt
// waits for the last whole-GPU attempt and for fractional attempts being
// stopped (their part is given to others), not for those that keep
// running beside it. Under mu.
func (s *Server) claim(a *attempt, g cluster.GPUID) {
	wait := func(p *attempt) {
		if p != nil && p != a && !contains(a.waitFor, p) {
			a.waitFor = append(a.waitFor, p)
		}
	}
	wait(s.busy[g])
	frac := a.fractional()
	for _, p := range s.sharing[g] {
		if !frac || p.stop != "" {
			wait(p)
		}
	}
	if frac {
		if s.sharing == nil {
			s.sharing = make(map[cluster.GPUID][]*attempt)
		}
		s.sharing[g] = append(s.sharing[g], a)
		return
	}
	s.busy[g] = a
}

// unclaim forgets attempt a on GPU g once its process is gone. Under mu.
func (s *Server) unclaim(a *attempt, g cluster.GPUID) {
	if s.busy[g] == a {
		s.busy[g] = nil
	}
	sh := s.sharing[g]
	for i, p := range sh {
		if p == a {
			sh = append(sh[:i], sh[i+1:]...)
			break
		}
	}
	if len(sh) == 0 {
		delete(s.sharing, g)
	} else {
		s.sharing[g] = sh
	}
}

// shareLimits are the part of each GPU attempt a's job holds and its GPU
// memory limit on each, GiB; 0, 0 for whole GPUs.
func (s *Server) shareLimits(a *attempt) (share, memGiB float64) {
	if !a.fractional() || len(a.devs) == 0 {
		return 0, 0
	}
	mem := s.cluster.NodeOf(a.gpus[0]).GPUMem
	return a.lj.j.Demand(mem)
}

// acquireMPS holds the MPS daemon of a fractional attempt's GPU, when MPS
// is available and the attempt has one GPU (a daemon serves one GPU, so a
// gang of parts shares its GPUs by time slicing and its limits), and
// returns the pipe directory its process must use. Outside mu: it may
// start the daemon.
func (s *Server) acquireMPS(a *attempt) (string, error) {
	if !a.fractional() || len(a.devs) != 1 || !s.mps.Available() {
		return "", nil
	}
	dir, err := s.mps.Acquire(a.devs[0])
	if err == nil {
		a.mpsHeld = true
	}
	return dir, err
}

// releaseMPS lets go of the daemon attempt a held, if any, once its
// process is gone (the last one stops the daemon, which takes a moment:
// not under mu).
func (s *Server) releaseMPS(a *attempt) {
	if !a.mpsHeld {
		return
	}
	a.mpsHeld = false
	dev := a.devs[0]
	go func() {
		if err := s.mps.Release(dev); err != nil {
			s.log.Warn("MPS daemon", "gpu", dev, "err", err)
		}
	}()
}
