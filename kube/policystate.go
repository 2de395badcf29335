package kube

import (
	"bytes"
	"context"
	"encoding/base64"
	"fmt"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// policyStateAnnotation holds the policy's state (engine.Engine.PolicyState,
// base64) on a Lease of its own beside the leader's, so that a restarted
// or newly elected tide kube plans as the old leader would have: Tiresias'
// queues, Gavel's deficits, DeepBoot's timers, tidal's forecasts.
const policyStateAnnotation = "tide-sched.io/policy-state"

// maxPolicyState bounds the annotation (the API server takes 256 KiB of
// annotations per object); larger states are not saved, with a warning.
const maxPolicyState = 200 << 10

// policyStateEvery is the least time between two writes.
const policyStateEvery = 10 * time.Second

// policyStateStore reads and writes the state. Only the leader uses it.
type policyStateStore struct {
	client    kubernetes.Interface
	ns, name  string
	loaded    bool
	saved     []byte
	lastWrite time.Time
}

// persistPolicyState keeps the policy's state on the Lease ns/name
// (created when missing). Leader election turns it on: RBAC grants the
// Lease verbs in the leader's namespace.
func (s *Scheduler) persistPolicyState(client kubernetes.Interface, ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.state = &policyStateStore{client: client, ns: ns, name: name}
}

// syncPolicyState runs before each round: the first loads the saved state
// into the engine (its jobs are back by then); later ones save the state
// the previous round left when it changed, at most every
// policyStateEvery. A failure is logged, never fatal: the policy then
// starts afresh, as without persistence. Under mu.
func (s *Scheduler) syncPolicyState(ctx context.Context) {
	st := s.state
	if st == nil || s.eng == nil {
		return
	}
	if !st.loaded {
		st.loaded = true
		b, err := st.read(ctx)
		if err != nil {
			s.log.Warn("reading the policy's saved state; it starts afresh", "lease", st.ns+"/"+st.name, "err", err)
			return
		}
		if err := s.eng.RestorePolicyState(nil, b); err != nil {
			s.log.Warn("the policy's saved state was not restored; it starts afresh", "err", err)
			return
		}
		st.saved = b
		return
	}
	if time.Since(st.lastWrite) < policyStateEvery {
		return
	}
	b, err := s.eng.PolicyState()
	if err != nil || bytes.Equal(b, st.saved) {
		return
	}
	if len(b)*4/3 > maxPolicyState {
		s.log.Warn("the policy's state is too large to keep in an annotation; not saved", "bytes", len(b))
		return
	}
	st.lastWrite = time.Now()
	if err := st.write(ctx, b); err != nil {
		s.log.Warn("saving the policy's state", "lease", st.ns+"/"+st.name, "err", err)
		return
	}
	st.saved = b
}

func (st *policyStateStore) read(ctx context.Context) ([]byte, error) {
	l, err := st.client.CoordinationV1().Leases(st.ns).Get(ctx, st.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	v, ok := l.Annotations[policyStateAnnotation]
	if !ok {
		return nil, nil
	}
	b, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", policyStateAnnotation, err)
	}
	return b, nil
}

func (st *policyStateStore) write(ctx context.Context, b []byte) error {
	leases := st.client.CoordinationV1().Leases(st.ns)
	v := base64.StdEncoding.EncodeToString(b)
	l, err := leases.Get(ctx, st.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: st.name, Namespace: st.ns,
			Annotations: map[string]string{policyStateAnnotation: v}}}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[policyStateAnnotation] = v
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}
