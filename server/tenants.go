package server

import (
	"errors"
	"fmt"
	"math"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/store"
)

// Tenant management beyond creation: PATCH (user, limits), token rotation
// and revocation, deletion. Admin only.

// adminTenant reads the tenant of the request's {name}, writing 403 (not
// the admin) or 404; nil then.
func (s *Server) adminTenant(w http.ResponseWriter, r *http.Request, p *principal) *store.Tenant {
	if !p.admin {
		writeError(w, http.StatusForbidden, "only the admin may manage tenants", nil)
		return nil
	}
	name := r.PathValue("name")
	t := s.tenantByName(name)
	if t == nil {
		writeError(w, http.StatusNotFound, "no tenant "+strconv.Quote(name), nil)
		return nil
	}
	c := *t
	return &c
}

// saveTenant writes t (with an event) and makes it the tenant in memory.
func (s *Server) saveTenant(t *store.Tenant, kind string) error {
	err := s.db.Update(func(tx *store.Tx) error {
		if err := tx.PutTenant(t); err != nil {
			return err
		}
		return tx.AddEvent(&store.Event{Time: s.clk.Now(), Kind: kind, Message: t.Name})
	})
	if err != nil {
		return err
	}
	s.tmu.Lock()
	s.putTenant(t)
	s.tmu.Unlock()
	s.log.Info(kind, "tenant", t.Name)
	return nil
}

func (s *Server) handleUpdateTenant(w http.ResponseWriter, r *http.Request, p *principal) {
	t := s.adminTenant(w, r, p)
	if t == nil {
		return
	}
	var req api.TenantUpdate
	if !readBody(w, r, &req) {
		return
	}
	if errs := req.Limits.Validate(); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "invalid limits", errs)
		return
	}
	if req.User != nil {
		if fe := s.checkTenantUser(t.Name, *req.User); fe != nil {
			writeError(w, http.StatusBadRequest, "invalid tenant", []api.FieldError{*fe})
			return
		}
		t.User = *req.User
	}
	if req.Limits != nil {
		t.Limits = *req.Limits
	}
	if err := s.saveTenant(t, "tenant-updated"); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	s.kickRound() // a new quota may let jobs run
	writeJSON(w, http.StatusOK, tenantView(t))
}

// handleRotateToken gives a tenant a new token; the old one stops working.
func (s *Server) handleRotateToken(w http.ResponseWriter, r *http.Request, p *principal) {
	t := s.adminTenant(w, r, p)
	if t == nil {
		return
	}
	if t.Admin && s.cfg.AdminTokenFile != "" {
		writeError(w, http.StatusConflict, "the admin token comes from --admin-token-file "+s.cfg.AdminTokenFile+": change that file and restart tide serve", nil)
		return
	}
	tok, err := store.NewToken()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	t.TokenHash = store.HashToken(tok)
	if t.Admin {
		// The operator reads the admin token from the data directory.
		path := filepath.Join(s.cfg.DataDir, "admin.token")
		if err := writeFileAtomic(path, []byte(tok+"\n"), 0o600); err != nil {
			writeError(w, http.StatusInternalServerError, "writing the new admin token: "+err.Error(), nil)
			return
		}
	}
	if err := s.saveTenant(t, "token-rotated"); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	v := tenantView(t)
	v.Token = tok
	writeJSON(w, http.StatusOK, v)
}

func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	tmp := path + ".new"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// handleRevokeToken leaves a tenant without a valid token (until rotated).
func (s *Server) handleRevokeToken(w http.ResponseWriter, r *http.Request, p *principal) {
	t := s.adminTenant(w, r, p)
	if t == nil {
		return
	}
	if t.Admin {
		writeError(w, http.StatusForbidden, "the admin token cannot be revoked (rotate it instead)", nil)
		return
	}
	t.TokenHash = ""
	if err := s.saveTenant(t, "token-revoked"); err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	writeJSON(w, http.StatusOK, tenantView(t))
}

// handleDeleteTenant deletes a tenant. Its unfinished jobs must be
// cancelled first, or with ?cancel_jobs=true; its finished jobs stay (the
// admin sees them).
func (s *Server) handleDeleteTenant(w http.ResponseWriter, r *http.Request, p *principal) {
	t := s.adminTenant(w, r, p)
	if t == nil {
		return
	}
	if t.Admin {
		writeError(w, http.StatusForbidden, "the admin tenant cannot be deleted", nil)
		return
	}
	cancel := false
	if v := r.URL.Query().Get("cancel_jobs"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			writeError(w, http.StatusBadRequest, "cancel_jobs: want true or false", []api.FieldError{{Field: "cancel_jobs", Message: "want true or false"}})
			return
		}
		cancel = b
	}
	s.lock()
	var open []*liveJob
	for _, lj := range s.order {
		if lj.rec.Tenant == t.Name && !api.Terminal(lj.rec.State) {
			open = append(open, lj)
		}
	}
	if len(open) > 0 && !cancel {
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("tenant %s has %d unfinished jobs (first %s): cancel them, or delete with cancel_jobs=true (tide tenant delete --cancel-jobs)",
			t.Name, len(open), open[0].rec.ID), nil)
		return
	}
	var ids []string
	for _, lj := range open {
		if api.Terminal(lj.rec.State) {
			continue // ended while an earlier cancellation's commit let mu go
		}
		if err := s.cancelJob(lj, p.tenant+" (tenant deleted)"); err != nil {
			s.mu.Unlock()
			writeError(w, http.StatusInternalServerError, err.Error(), nil)
			return
		}
		ids = append(ids, lj.rec.ID)
	}
	s.mu.Unlock()
	err := s.db.Update(func(tx *store.Tx) error {
		if err := tx.DeleteTenant(t.Name); err != nil {
			return err
		}
		return tx.AddEvent(&store.Event{Time: s.clk.Now(), Kind: "tenant-deleted", Message: t.Name})
	})
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	s.tmu.Lock()
	s.dropTenant(t.Name)
	s.tmu.Unlock()
	s.log.Info("tenant deleted", "tenant", t.Name, "cancelled", len(ids))
	s.kickRound()
	if ids == nil {
		ids = []string{}
	}
	writeJSON(w, http.StatusOK, map[string]any{"deleted": t.Name, "cancelled": ids})
}

// rateLimiter is a token bucket per API token: rate submissions a second,
// bursts of max(1, rate).
type rateLimiter struct {
	mu      sync.Mutex
	buckets map[string]*bucket
}

type bucket struct {
	tokens float64
	last   time.Time
}

// allow takes one submission from key's bucket; when it is empty, it
// returns how long until one is available.
func (l *rateLimiter) allow(key string, rate float64, now time.Time) (bool, time.Duration) {
	if rate <= 0 {
		return true, 0
	}
	burst := math.Max(1, rate)
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.buckets == nil {
		l.buckets = map[string]*bucket{}
	}
	b := l.buckets[key]
	if b == nil {
		b = &bucket{tokens: burst, last: now}
		l.buckets[key] = b
	}
	b.tokens = math.Min(burst, b.tokens+now.Sub(b.last).Seconds()*rate)
	b.last = now
	if b.tokens >= 1 {
		b.tokens--
		return true, 0
	}
	return false, time.Duration((1 - b.tokens) / rate * float64(time.Second))
}

// quotaPolicy wraps the server's policy: jobs that may not start yet
// (held, or waiting for their dependencies; see blocked) are hidden from
// it, and the tenants' GPU quotas (limits.max_gpus) apply over it through
// policy.Quota without borrowing, where a tenant without a quota may use
// every GPU. Without any of these it is the policy itself. Its state is
// set under mu before each round.
type quotaPolicy struct {
	inner engine.Policy
	quota policy.Quota
	on    bool
	// blocked says why a waiting job may not start, "" when it may;
	// gated says whether any job may be blocked (held, or waiting for
	// another), so that a round without one skips asking for each job.
	blocked func(id string) string
	gated   func() bool
	// stopped says why a running job may not run under this policy, ""
	// when it may: hidden from the policy, it is preempted (a part of a
	// GPU re-adopted under an elastic policy, see partsWait).
	stopped func(id string) string
}

func (p *quotaPolicy) Name() string { return p.inner.Name() }

func (p *quotaPolicy) Schedule(snap *engine.Snapshot) engine.Plan {
	held := map[string]string{}
	if p.blocked != nil && (p.gated == nil || p.gated()) {
		jobs := make([]*engine.Status, 0, len(snap.Jobs))
		for _, st := range snap.Jobs {
			if len(st.GPUs) == 0 {
				if why := p.blocked(st.Job.ID); why != "" {
					held[st.Job.ID] = why
					continue
				}
			} else if p.stopped != nil {
				if why := p.stopped(st.Job.ID); why != "" {
					held[st.Job.ID] = why
					continue
				}
			}
			jobs = append(jobs, st)
		}
		if len(held) > 0 {
			c := *snap
			c.Jobs = jobs
			snap = &c
		}
	}
	var plan engine.Plan
	if p.on {
		plan = p.quota.Schedule(snap)
	} else {
		plan = p.inner.Schedule(snap)
	}
	if len(held) > 0 {
		if plan.Reasons == nil {
			plan.Reasons = map[string]engine.Reason{}
		}
		for id, why := range held {
			plan.Reasons[id] = engine.Reason{Text: why}
		}
	}
	return plan
}

// setQuotas hands the quota policy the tenants' current quotas. Under mu.
func (s *Server) setQuotas() {
	q := s.quotas
	if q == nil {
		return
	}
	limits := map[string]int{}
	s.tmu.RLock()
	for name, t := range s.tenants {
		if t.Limits.MaxGPUs > 0 {
			limits[name] = t.Limits.MaxGPUs
		}
	}
	s.tmu.RUnlock()
	q.on = len(limits) > 0
	if !q.on {
		return
	}
	for _, st := range s.eng.Active() {
		if _, ok := limits[st.Job.Tenant]; !ok {
			limits[st.Job.Tenant] = s.cluster.TotalGPUs()
		}
	}
	q.quota = policy.Quota{Inner: q.inner, Limits: limits}
}
