package kube

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
)

// PolicyStateAnnotation holds the policy's state on a Lease of its own
// beside the leader's (the leader's Lease name + "-policy-state"), so that
// a restarted or newly elected tide kube plans as the old leader would
// have: Tiresias' queues and attained service, Gavel's deficits,
// DeepBoot's timers, tidal's forecasts. Its value is base64 of a gzipped
// SavedPolicyState in gob (DecodePolicyState reads it).
const PolicyStateAnnotation = "tide-sched.io/policy-state"

// DefaultPolicyStateLimit bounds the annotation's value, bytes: the API
// server takes 256 KiB of annotations per object, and the Lease's other
// annotations need a little room.
const DefaultPolicyStateLimit = 200 << 10

// policyStateEvery is the least time between two writes.
const policyStateEvery = 10 * time.Second

// SavedPolicyState is what tide kube keeps on the Lease.
type SavedPolicyState struct {
	// Engine is engine.Engine.PolicyState: rounds run, the active jobs'
	// memos and the policy's own state (engine.Stateful).
	Engine []byte
	// Jobs is each active job's history, which policies rank by
	// (Tiresias: attained service) and which a new engine would otherwise
	// start at zero; by job ID, ascending.
	Jobs []JobHistory
	// At is when the state was taken (the engine's clock: Unix seconds).
	At float64
}

// JobHistory is a job's record beside its memo (engine.Engine.Carry).
type JobHistory struct {
	Job                          string
	GPUs                         int // held at At (0: waiting)
	Attained, Executed, Waited   float64
	FirstStart, LastStart        float64
	LastStop                     float64
	Starts, Preemptions, Resizes int
	TypeExecuted                 map[string]float64
	Progress                     float64
}

// policyStateStore reads and writes the state. Only the leader uses it.
type policyStateStore struct {
	client    kubernetes.Interface
	ns, name  string
	limit     int
	loaded    bool
	saved     []byte    // the engine's state last saved or loaded
	savedAt   time.Time // when it was taken (zero: none is on the Lease)
	tooLarge  bool      // the last state was over the limit (an Event said so)
	lastWrite time.Time
}

// persistPolicyState keeps the policy's state on the Lease ns/name
// (created when missing). Leader election turns it on: RBAC grants the
// Lease verbs in the leader's namespace.
func (s *Scheduler) persistPolicyState(client kubernetes.Interface, ns, name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	limit := s.cfg.PolicyStateLimit
	if limit <= 0 {
		limit = DefaultPolicyStateLimit
	}
	s.state = &policyStateStore{client: client, ns: ns, name: name, limit: limit}
}

// syncPolicyState runs before each round: the first loads the saved state
// into the engine (its jobs are back by then); later ones save the state
// the previous round left when it changed, at most every
// policyStateEvery. A failure is logged, never fatal: the policy then
// starts afresh, as without persistence. A state over the limit is not
// saved (the Lease keeps the last one that fitted) and a Warning Event on
// the Lease says so. Under mu.
func (s *Scheduler) syncPolicyState(ctx context.Context) {
	st := s.state
	if st == nil || s.eng == nil {
		return
	}
	if !st.loaded {
		st.loaded = true
		v, err := st.read(ctx)
		if err != nil {
			s.log.Warn("reading the policy's saved state; it starts afresh", "lease", st.ns+"/"+st.name, "err", err)
			return
		}
		if v == "" {
			return
		}
		saved, err := DecodePolicyState(v)
		if err == nil {
			err = s.restorePolicyState(saved)
		}
		if err != nil {
			s.log.Warn("the policy's saved state was not restored; it starts afresh", "lease", st.ns+"/"+st.name, "err", err)
			return
		}
		st.saved, st.savedAt = saved.Engine, time.Unix(0, int64(saved.At*1e9))
		s.log.Info("policy state restored", "lease", st.ns+"/"+st.name, "jobs", len(saved.Jobs), "bytes", len(v))
		return
	}
	if time.Since(st.lastWrite) < policyStateEvery {
		return
	}
	saved, err := s.savePolicyState()
	if err != nil {
		s.log.Warn("saving the policy's state", "err", err)
		return
	}
	if bytes.Equal(saved.Engine, st.saved) && len(saved.Jobs) == 0 {
		return // nothing the next leader would plan differently with
	}
	v, err := encodePolicyState(saved)
	if err != nil {
		s.log.Warn("encoding the policy's state", "err", err)
		return
	}
	st.lastWrite = time.Now()
	if len(v) > st.limit {
		if !st.tooLarge {
			st.tooLarge = true
			kept := "none is kept: a new leader's policy starts afresh"
			if !st.savedAt.IsZero() {
				kept = "the Lease keeps the one saved at " + st.savedAt.UTC().Format(time.RFC3339) + ", which a new leader resumes from"
			}
			msg := fmt.Sprintf("the policy's state of %d jobs takes %d bytes, over the %d the annotation may hold: not saved; %s",
				len(saved.Jobs), len(v), st.limit, kept)
			s.log.Warn("policy state too large", "lease", st.ns+"/"+st.name, "jobs", len(saved.Jobs), "bytes", len(v), "limit", st.limit)
			s.fb.always(st.ref(), corev1.EventTypeWarning, "PolicyStateTooLarge", "SavePolicyState", msg)
		}
		return
	}
	if err := st.write(ctx, v); err != nil {
		s.log.Warn("saving the policy's state", "lease", st.ns+"/"+st.name, "err", err)
		return
	}
	if st.tooLarge {
		st.tooLarge = false
		s.fb.always(st.ref(), corev1.EventTypeNormal, "PolicyStateSaved", "SavePolicyState",
			fmt.Sprintf("the policy's state of %d jobs fits again (%d bytes) and is saved", len(saved.Jobs), len(v)))
	}
	st.saved, st.savedAt = saved.Engine, time.Now()
}

// savePolicyState takes the engine's state and its active jobs' histories.
func (s *Scheduler) savePolicyState() (*SavedPolicyState, error) {
	b, err := s.eng.PolicyState()
	if err != nil {
		return nil, err
	}
	snap := s.eng.Snapshot()
	saved := &SavedPolicyState{Engine: b, At: snap.Now}
	for _, j := range snap.Jobs {
		if j.State.Terminal() || (j.Attained == 0 && j.Executed == 0 && j.Starts == 0 && j.Waited == 0) {
			continue
		}
		saved.Jobs = append(saved.Jobs, JobHistory{Job: j.Job.ID, GPUs: len(j.GPUs),
			Attained: j.Attained, Executed: j.Executed, Waited: j.Waited,
			FirstStart: j.FirstStart, LastStart: j.LastStart, LastStop: j.LastStop,
			Starts: j.Starts, Preemptions: j.Preemptions, Resizes: j.Resizes,
			TypeExecuted: j.TypeExecuted, Progress: j.Progress})
	}
	slices.SortFunc(saved.Jobs, func(a, b JobHistory) int { return strings.Compare(a.Job, b.Job) })
	return saved, nil
}

// restorePolicyState carries each saved job's history into the engine's
// job of the same ID (jobs that ended meanwhile are skipped), then loads
// the engine's state. A job running when the state was saved and running
// now is counted as having run, on as many GPUs, in between (its pods kept
// running while no leader watched).
func (s *Scheduler) restorePolicyState(saved *SavedPolicyState) error {
	now := s.cfg.Clock.Now()
	for _, h := range saved.Jobs {
		cur := s.eng.Job(h.Job)
		if cur == nil || cur.State.Terminal() {
			continue
		}
		prev := &engine.Status{Job: &job.Job{ID: h.Job}, Attained: h.Attained, Executed: h.Executed, Waited: h.Waited,
			FirstStart: h.FirstStart, LastStart: h.LastStart, LastStop: h.LastStop,
			Starts: h.Starts, Preemptions: h.Preemptions, Resizes: h.Resizes,
			TypeExecuted: maps.Clone(h.TypeExecuted), Progress: h.Progress}
		if gap := now - saved.At; gap > 0 {
			if h.GPUs > 0 && cur.State == job.Running {
				prev.Attained += gap * float64(h.GPUs)
				prev.Executed += gap
			} else if h.GPUs == 0 && cur.State != job.Running {
				prev.Waited += gap
			}
		}
		if err := s.eng.Carry(h.Job, prev); err != nil {
			return err
		}
	}
	return s.eng.RestorePolicyState(nil, saved.Engine)
}

// encodePolicyState is the annotation's value for saved.
func encodePolicyState(saved *SavedPolicyState) (string, error) {
	b, err := engine.EncodeState(saved)
	if err != nil {
		return "", err
	}
	var z bytes.Buffer
	w := gzip.NewWriter(&z)
	if _, err := w.Write(b); err != nil {
		return "", err
	}
	if err := w.Close(); err != nil {
		return "", err
	}
	return base64.StdEncoding.EncodeToString(z.Bytes()), nil
}

// DecodePolicyState reads the value of PolicyStateAnnotation.
func DecodePolicyState(v string) (*SavedPolicyState, error) {
	z, err := base64.StdEncoding.DecodeString(v)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PolicyStateAnnotation, err)
	}
	r, err := gzip.NewReader(bytes.NewReader(z))
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PolicyStateAnnotation, err)
	}
	b, err := io.ReadAll(r)
	if err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PolicyStateAnnotation, err)
	}
	saved := &SavedPolicyState{}
	if err := engine.DecodeState(b, saved); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", PolicyStateAnnotation, err)
	}
	return saved, nil
}

// ref refers to the Lease, for Events about the state it holds.
func (st *policyStateStore) ref() *corev1.ObjectReference {
	return &corev1.ObjectReference{APIVersion: "coordination.k8s.io/v1", Kind: "Lease", Namespace: st.ns, Name: st.name}
}

// read returns the annotation's value, "" when there is none.
func (st *policyStateStore) read(ctx context.Context) (string, error) {
	l, err := st.client.CoordinationV1().Leases(st.ns).Get(ctx, st.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	return l.Annotations[PolicyStateAnnotation], nil
}

func (st *policyStateStore) write(ctx context.Context, v string) error {
	leases := st.client.CoordinationV1().Leases(st.ns)
	l, err := leases.Get(ctx, st.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		l = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Name: st.name, Namespace: st.ns,
			Annotations: map[string]string{PolicyStateAnnotation: v}}}
		_, err = leases.Create(ctx, l, metav1.CreateOptions{})
		return err
	}
	if err != nil {
		return err
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[PolicyStateAnnotation] = v
	_, err = leases.Update(ctx, l, metav1.UpdateOptions{})
	return err
}

// PolicyState is the engine's policy state as the leader saves it on its
// Lease (engine.Engine.PolicyState; nil before the first round), taken
// between rounds: for tests and tools that read what a policy learned.
func (s *Scheduler) PolicyState() ([]byte, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.eng == nil {
		return nil, nil
	}
	return s.eng.PolicyState()
}
