package server

import (
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/store"
)

// GPU sharing (docs/sharing.md): jobs that hold part of a GPU (fractional
// jobs, job.Job.Fractional) run on it together. The engine decides who
// shares which GPU; here the server lets their processes run at once,
// gives each its limits (localexec.Launch.Share, GPUMemGiB) and, where
// the machine has CUDA MPS, holds the GPU's MPS daemon for them
// (localexec.MPS).

// fractional reports whether a's job asks for part of each GPU.
func (a *attempt) fractional() bool { return a.frac }

// claim records attempt a on GPU g and adds what it must wait for to
// a.waitFor: every earlier process on g except those that may keep running
// beside it. Beside a fractional attempt, the fractional ones not being
// stopped (their parts are not given to others); beside a packed attempt
// (pack.go), its partner's, when not being stopped. A whole-GPU attempt
// alone waits for all of them. Under mu.
func (s *Server) claim(a *attempt, g cluster.GPUID) {
	beside := func(p *attempt) bool {
		switch {
		case p == nil || p == a || p.stop != "":
			return false
		case a.fractional():
			return p.fractional()
		case a.packed():
			return p.lj.rec.ID == a.partner
		}
		return false
	}
	wait := func(p *attempt) {
		if p != nil && p != a && !beside(p) && !contains(a.waitFor, p) {
			a.waitFor = append(a.waitFor, p)
		}
	}
	wait(s.busy[g])
	for _, p := range s.sharing[g] {
		wait(p)
	}
	if a.shares() {
		if s.sharing == nil {
			s.sharing = make(map[cluster.GPUID][]*attempt)
		}
		s.sharing[g] = append(s.sharing[g], a)
		return
	}
	s.busy[g] = a
}

// shares reports whether a's process runs beside others on its GPUs: it
// holds a part of each, or is packed with a partner.
func (a *attempt) shares() bool { return a.fractional() || a.packed() }

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
// memory limit on each, GiB: a packed attempt gets half of each GPU's
// threads and no memory limit (a pair is packed only where it was measured
// to fit); 0, 0 for whole GPUs.
func (s *Server) shareLimits(a *attempt) (share, memGiB float64) {
	if a.packed() && len(a.devs) > 0 {
		return packedShare, 0
	}
	if !a.fractional() || len(a.devs) == 0 {
		return 0, 0
	}
	mem := s.cluster.NodeOf(a.gpus[0]).GPUMem
	return a.lj.j.Demand(mem)
}

// acquireMPS holds the MPS daemon of a fractional or packed attempt's
// GPU, when MPS is available and the attempt has one GPU (a daemon serves
// one GPU, so a gang of parts, or a pair of multi-GPU jobs, shares its
// GPUs by time slicing and its limits), and returns the pipe directory
// its process must use. Outside mu: it may start the daemon.
func (s *Server) acquireMPS(a *attempt) (string, error) {
	if !a.shares() || len(a.devs) != 1 || !s.mps.Available() {
		return "", nil
	}
	dir, err := s.mps.Acquire(a.devs[0])
	if err == nil {
		a.mpsHeld = true
	}
	return dir, err
}

// adoptMPS holds, for a re-adopted attempt whose record says it holds
// its GPU's MPS daemon (held, store.Attempt.MPS), that daemon, which
// still runs for it. The record decides, not whether the attempt shares
// its GPU now: a packed attempt adopted alone, its partner gone, still
// holds the daemon it was launched with (else the daemon runs on unknown
// to the server, which starts a second one on the GPU for the next part
// and never stops the first), and one launched alone, paired at
// recovery, never had one. Under mu.
func (s *Server) adoptMPS(a *attempt, held bool) {
	if held && !a.mpsHeld && len(a.devs) == 1 && s.mps.Available() {
		s.mps.Adopt(a.devs[0])
		a.mpsHeld = true
	}
}

// releaseMPS lets go of the daemon attempt a held, if any, once its
// process is gone (the last one stops the daemon, which takes a moment:
// not under mu).
func (s *Server) releaseMPS(a *attempt) {
	if !a.mpsHeld {
		return
	}
	a.mpsHeld = false
	s.releaseDev(a.devs[0])
}

// releaseDev lets go of one hold of GPU dev's daemon, stopping it when it
// was the last (outside mu: that takes a moment; Close waits for it).
func (s *Server) releaseDev(dev int) {
	s.mpsStops.Add(1)
	go func() {
		defer s.mpsStops.Done()
		if err := s.mps.Release(dev); err != nil {
			s.log.Warn("MPS daemon", "gpu", dev, "err", err)
		}
	}()
}

// orphanMPS counts, for recovered attempt a whose process is gone, the
// daemon it held, which the previous server left running: released once
// recovery is done (mpsOrphans), it stops unless a re-adopted attempt
// holds it too. Under mu, during recovery.
func (s *Server) orphanMPS(a *store.Attempt) {
	if a.MPS && a.Phase != store.PhaseEnded && len(a.Devices) == 1 && s.mps.Available() {
		s.mps.Adopt(a.Devices[0])
		s.mpsOrphans = append(s.mpsOrphans, a.Devices[0])
		a.MPS = false
	}
}
