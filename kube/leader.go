package kube

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// Election configures leader election among replicas of tide kube, through
// a coordination.k8s.io Lease (client-go's leaderelection).
type Election struct {
	// Client reads and writes the Lease. Give it a client of its own, not
	// the scheduler's: lease renewals must not queue behind a round's
	// thousands of binding calls in a shared client-side rate limiter, or
	// a busy leader loses its lease (ElectionClient makes one).
	Client kubernetes.Interface
	// Namespace and Name name the Lease (required).
	Namespace, Name string
	// Identity names this replica in the Lease; default the host name and
	// a random suffix, so two processes on one host differ.
	Identity string
	// LeaseDuration is how long a standby waits after the leader's last
	// renewal before taking over (default 15 s); RenewDeadline is how long
	// the leader keeps trying to renew before it stops scheduling (default
	// 10 s, less than LeaseDuration); RetryPeriod is the time between tries
	// (default 2 s). The Kubernetes control plane's defaults.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// OnLeading, when set, is called when this replica starts leading
	// (tests and logs read it); it must not block.
	OnLeading func(identity string)
}

// ElectionClient makes the client Election.Client wants from cfg: its own
// connection and a small rate limit of its own.
func ElectionClient(cfg *rest.Config) (kubernetes.Interface, error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = 5, 10
	c.Timeout = 0
	cs, err := kubernetes.NewForConfig(rest.AddUserAgent(c, "tide-leader-election"))
	if err != nil {
		return nil, fmt.Errorf("leader election client: %w", err)
	}
	return cs, nil
}

// ErrLostLease is what RunElected returns when this replica led and lost
// its Lease: the process should exit, and be restarted as a standby.
var ErrLostLease = errors.New("kube: lost the leader lease")

func (el *Election) defaults() error {
	if el.Client == nil {
		return fmt.Errorf("kube: leader election: a client is required")
	}
	if el.Namespace == "" || el.Name == "" {
		return fmt.Errorf("kube: leader election: the Lease's namespace and name are required")
	}
	if el.Identity == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		el.Identity = host + "_" + hex.EncodeToString(b[:])
	}
	if el.LeaseDuration <= 0 {
		el.LeaseDuration = 15 * time.Second
	}
	if el.RenewDeadline <= 0 {
		el.RenewDeadline = 10 * time.Second
	}
	if el.RetryPeriod <= 0 {
		el.RetryPeriod = 2 * time.Second
	}
	if el.RenewDeadline >= el.LeaseDuration {
		return fmt.Errorf("kube: leader election: renew deadline %v must be less than the lease duration %v", el.RenewDeadline, el.LeaseDuration)
	}
	if el.RetryPeriod >= el.RenewDeadline {
		return fmt.Errorf("kube: leader election: retry period %v must be less than the renew deadline %v", el.RetryPeriod, el.RenewDeadline)
	}
	return nil
}

// RunElected runs the scheduler as one of several replicas. It starts the
// informers and syncs their caches at once, so a standby is ready (and
// /readyz says so) and takes over with a warm cache; it schedules only
// while it holds the Lease. It returns nil when ctx ends (releasing the
// Lease, so a standby takes over without waiting for it to expire) and
// ErrLostLease when it led and could not renew: its view may be stale and
// another replica may already schedule, so the process should exit and
// start over.
//
// A replica that stops renewing stops scheduling within RenewDeadline
// (its round's API calls are cancelled), before any standby can acquire
// the Lease (LeaseDuration later), so two replicas never bind at once
// while the clocks of their machines run at the same rate.
func (s *Scheduler) RunElected(ctx context.Context, el Election) error {
	if err := el.defaults(); err != nil {
		return err
	}
	s.health.elected.Store(true)
	s.persistPolicyState(el.Client, el.Namespace, el.Name+"-policy-state")
	wctx, cancel := context.WithCancel(ctx)
	defer s.unwatch(cancel)
	if err := s.watch(wctx); err != nil {
		return err
	}
	lock := &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: el.Namespace, Name: el.Name},
		Client:     el.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: el.Identity},
	}
	var (
		mu      sync.Mutex // guards stopped, led and loopErr
		stopped bool       // OnStoppedLeading ran: the loop must not start
		led     bool
		loopErr error
		wg      sync.WaitGroup // the loop
	)
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:          lock,
		LeaseDuration: el.LeaseDuration,
		RenewDeadline: el.RenewDeadline,
		RetryPeriod:   el.RetryPeriod,
		// Released when this replica stops on purpose (ctx ended), at the
		// moment its round's calls are cancelled: a standby acquires it a
		// retry period later at the earliest.
		ReleaseOnCancel: true,
		Name:            el.Name,
		Callbacks: leaderelection.LeaderCallbacks{
			OnStartedLeading: func(lctx context.Context) {
				mu.Lock()
				if stopped {
					mu.Unlock()
					return
				}
				led = true
				wg.Add(1)
				mu.Unlock()
				defer wg.Done()
				s.health.leading.Store(true)
				s.log.Info("leading: scheduling", "lease", el.Namespace+"/"+el.Name, "identity", el.Identity)
				if el.OnLeading != nil {
					el.OnLeading(el.Identity)
				}
				err := s.loop(lctx)
				mu.Lock()
				loopErr = err
				mu.Unlock()
			},
			OnStoppedLeading: func() {
				mu.Lock()
				stopped = true
				mu.Unlock()
				wg.Wait() // the loop has returned: no call of ours is in flight
				s.health.leading.Store(false)
			},
			OnNewLeader: func(id string) {
				if id != el.Identity {
					s.log.Info("standing by", "leader", id, "lease", el.Namespace+"/"+el.Name)
				}
			},
		},
	})
	if err != nil {
		return fmt.Errorf("kube: leader election: %w", err)
	}
	s.log.Info("waiting for the leader lease", "lease", el.Namespace+"/"+el.Name, "identity", el.Identity)
	le.Run(wctx)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	switch {
	case loopErr != nil:
		return loopErr
	case ctx.Err() != nil:
		return nil
	case led:
		return ErrLostLease
	default:
		return fmt.Errorf("kube: leader election ended without leading")
	}
}
