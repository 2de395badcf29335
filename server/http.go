package server

import (
	"cmp"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/store"
)

// principal is who makes a request.
type principal struct {
	tenant string
	admin  bool
	token  string // the token's hash
	limits api.Limits
}

// Handler is the server's HTTP API.
func (s *Server) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		io.WriteString(w, "ok\n")
	})
	mux.HandleFunc("GET /metrics", func(w http.ResponseWriter, r *http.Request) { s.writeMetrics(w) })
	mux.HandleFunc("POST /v1/jobs", s.authed(s.handleSubmit))
	mux.HandleFunc("GET /v1/jobs", s.authed(s.handleList))
	mux.HandleFunc("GET /v1/jobs/{id}", s.authed(s.handleGet))
	mux.HandleFunc("POST /v1/jobs/{id}/cancel", s.authed(s.handleCancel))
	mux.HandleFunc("GET /v1/jobs/{id}/logs", s.authed(s.handleLogs))
	mux.HandleFunc("GET /v1/jobs/{id}/events", s.authed(s.handleEvents))
	mux.HandleFunc("POST /v1/jobs/{id}/hold", s.authed(s.handleHold))
	mux.HandleFunc("POST /v1/jobs/{id}/release", s.authed(s.handleRelease))
	mux.HandleFunc("POST /v1/jobs/{id}/requeue", s.authed(s.handleRequeue))
	mux.HandleFunc("GET /v1/usage", s.authed(s.handleUsage))
	mux.HandleFunc("POST /v1/jobs/{id}/report", s.handleReport)
	mux.HandleFunc("GET /v1/cluster", s.authed(s.handleCluster))
	mux.HandleFunc("POST /v1/tenants", s.authed(s.handleNewTenant))
	mux.HandleFunc("GET /v1/tenants", s.authed(s.handleTenants))
	mux.HandleFunc("PATCH /v1/tenants/{name}", s.authed(s.handleUpdateTenant))
	mux.HandleFunc("DELETE /v1/tenants/{name}", s.authed(s.handleDeleteTenant))
	mux.HandleFunc("POST /v1/tenants/{name}/token", s.authed(s.handleRotateToken))
	mux.HandleFunc("DELETE /v1/tenants/{name}/token", s.authed(s.handleRevokeToken))
	ui := s.consoleHandler() // the web console (console.go)
	mux.Handle("GET /{$}", ui)
	mux.Handle("/ui/", ui)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		writeError(w, http.StatusNotFound, "no such endpoint: "+r.Method+" "+r.URL.Path+" (see docs/api.md)", nil)
	})
	return s.observe(mux)
}

// statusWriter records the status code of a response.
type statusWriter struct {
	http.ResponseWriter
	code int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.code == 0 {
		w.code = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.code == 0 {
		w.code = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

// observe counts responses, logs requests and turns a handler panic into a
// 500 (a bug must not take the server down).
func (s *Server) observe(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		start := time.Now()
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				s.log.Error("handler panic", "method", r.Method, "path", r.URL.Path, "panic", fmt.Sprint(v))
				if sw.code == 0 {
					writeError(sw, http.StatusInternalServerError, "internal error", nil)
				}
			}
			s.mmu.Lock()
			s.metrics.requests[sw.code]++
			s.mmu.Unlock()
			s.log.Debug("request", "method", r.Method, "path", r.URL.Path, "status", sw.code, "duration_ms", float64(time.Since(start).Microseconds())/1000)
		}()
		h.ServeHTTP(sw, r)
	})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeError(w http.ResponseWriter, code int, msg string, fields []api.FieldError) {
	writeJSON(w, code, &api.Error{Message: msg, Fields: fields})
}

// bearer extracts the token of an Authorization: Bearer header.
func bearer(r *http.Request) string {
	h := r.Header.Get("Authorization")
	scheme, tok, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return ""
	}
	return strings.TrimSpace(tok)
}

// who authenticates a tenant token.
func (s *Server) who(r *http.Request) *principal {
	tok := bearer(r)
	if tok == "" {
		return nil
	}
	h := store.HashToken(tok)
	s.tmu.RLock()
	t := s.tokens[h]
	s.tmu.RUnlock()
	if t == nil {
		return nil
	}
	return &principal{tenant: t.Name, admin: t.Admin, token: h, limits: t.Limits}
}

type authedHandler func(w http.ResponseWriter, r *http.Request, p *principal)

func (s *Server) authed(h authedHandler) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		p := s.who(r)
		if p == nil {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tide"`)
			msg := "missing bearer token: send Authorization: Bearer TOKEN"
			if bearer(r) != "" {
				msg = "unknown token"
			}
			writeError(w, http.StatusUnauthorized, msg, nil)
			return
		}
		h(w, r, p)
	}
}

// visible returns the job a principal may see, or writes 404.
func (s *Server) visible(w http.ResponseWriter, id string, p *principal) *liveJob {
	lj := s.jobs[id]
	if lj == nil || !(p.admin || lj.rec.Tenant == p.tenant) {
		writeError(w, http.StatusNotFound, "no job "+strconv.Quote(id), nil)
		return nil
	}
	return lj
}

// lockVisible takes mu and returns the request's job if p may see it;
// otherwise it writes 404 and returns nil with mu released.
func (s *Server) lockVisible(w http.ResponseWriter, r *http.Request, p *principal) *liveJob {
	s.lock()
	lj := s.visible(w, r.PathValue("id"), p)
	if lj == nil {
		s.mu.Unlock()
	}
	return lj
}

// readBody decodes a JSON request body strictly, writing the error
// response (413 over 1 MiB, 400 otherwise) and returning false on failure.
func readBody(w http.ResponseWriter, r *http.Request, v any) bool {
	r.Body = http.MaxBytesReader(w, r.Body, api.MaxBodyBytes)
	err := api.DecodeStrict(r.Body, v)
	if err == nil {
		return true
	}
	var mbe *http.MaxBytesError
	var de *api.DecodeError
	switch {
	case errors.As(err, &mbe):
		writeError(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("request body over %d bytes", api.MaxBodyBytes), nil)
	case errors.As(err, &de):
		var fields []api.FieldError
		if de.Field != "" {
			fields = []api.FieldError{{Field: de.Field, Message: de.Msg}}
		}
		writeError(w, http.StatusBadRequest, "malformed request: "+de.Error(), fields)
	default:
		writeError(w, http.StatusBadRequest, "reading the request: "+err.Error(), nil)
	}
	return false
}

func (s *Server) handleSubmit(w http.ResponseWriter, r *http.Request, p *principal) {
	if ok, wait := s.rates.allow(p.token, p.limits.SubmitRate, time.Now()); !ok {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(wait.Seconds()))))
		writeError(w, http.StatusTooManyRequests, fmt.Sprintf("tenant %s may submit %g jobs a second: retry in %s", p.tenant, p.limits.SubmitRate, wait.Round(time.Millisecond)), nil)
		return
	}
	var spec api.JobSpec
	if !readBody(w, r, &spec) {
		return
	}
	if errs := spec.Validate(); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "invalid job spec", errs)
		return
	}
	tenant := p.tenant
	if spec.Tenant != "" && spec.Tenant != p.tenant {
		if !p.admin {
			writeError(w, http.StatusForbidden, "only the admin may submit for another tenant",
				[]api.FieldError{{Field: "tenant", Message: "only the admin may set it"}})
			return
		}
		tenant = spec.Tenant
	}
	spec.Tenant = tenant
	spec.GPUType = strings.ToLower(spec.GPUType)
	key := r.Header.Get(api.IdempotencyHeader)
	if msg := api.CheckIdempotencyKey(key); msg != "" {
		writeError(w, http.StatusBadRequest, "invalid "+api.IdempotencyHeader+" header", []api.FieldError{{Field: api.IdempotencyHeader, Message: msg}})
		return
	}
	hash := specHash(&spec)
	// A retry of a recorded submission gets its job back whatever changed
	// since: the tenant's queue (the job itself may fill max_queued), its
	// dependencies (one may have failed), the server's programs. The
	// checks below are for a new job; the queue's last, once the request
	// is known valid (a 429 says a retry may succeed).
	if key != "" {
		var old *store.Idempotency
		_ = s.db.View(func(tx *store.Tx) error {
			old, _ = tx.Idempotency(p.tenant, key)
			return nil
		})
		if old != nil {
			s.replaySubmit(w, old.Job, key, old.SpecHash != hash)
			return
		}
	}
	if tenant != p.tenant && s.tenantByName(tenant) == nil {
		// Also with --single-user, where no Unix user is looked up: a job
		// of a tenant that does not exist would be seen by whoever is
		// later created under that name.
		writeError(w, http.StatusBadRequest, "the job cannot run here", []api.FieldError{{Field: "tenant",
			Message: fmt.Sprintf("no tenant %s: create it first ('tide tenant add %s')", tenant, tenant)}})
		return
	}
	if _, err := s.tenantUser(tenant); err != nil {
		writeError(w, http.StatusBadRequest, "the job cannot run here", []api.FieldError{{Field: "tenant", Message: err.Error()}})
		return
	}
	if errs := s.checkRunnable(&spec); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "the job cannot run here", errs)
		return
	}
	if len(spec.After) > 0 {
		s.lock()
		errs := s.checkAfter(spec.After, p)
		s.mu.Unlock()
		if len(errs) > 0 {
			writeError(w, http.StatusBadRequest, "invalid dependencies", errs)
			return
		}
	}
	if msg := s.checkQueued(tenant); msg != "" {
		writeError(w, http.StatusTooManyRequests, msg, nil)
		return
	}
	now := s.clk.Now()
	var rec *store.Job
	var replay string
	var conflict bool
	err := s.db.Batch(func(tx *store.Tx) error {
		replay, conflict = "", false // fn may run more than once
		if key != "" {
			if old, err := tx.Idempotency(p.tenant, key); err == nil {
				replay, conflict = old.Job, old.SpecHash != hash
				return nil
			}
		}
		id, seq, err := tx.NewJobID()
		if err != nil {
			return err
		}
		rec = &store.Job{ID: id, Seq: seq, Tenant: tenant, Spec: spec, State: api.StatePending, Submitted: now, IdempotencyKey: key, Held: spec.Hold}
		if err := tx.PutJob(rec); err != nil {
			return err
		}
		if key != "" {
			if err := tx.PutIdempotency(p.tenant, key, &store.Idempotency{Job: id, SpecHash: hash}); err != nil {
				return err
			}
		}
		return tx.AddEvent(&store.Event{Time: now, Job: id, Kind: "submitted", Message: "by " + p.tenant})
	})
	if err != nil {
		s.log.Error("store write failed", "err", err)
		writeError(w, http.StatusInternalServerError, "could not record the job: "+err.Error(), nil)
		return
	}
	if replay != "" {
		s.replaySubmit(w, replay, key, conflict)
		return
	}
	// The job joins the job table and the engine at the next lock (drain):
	// a submission does not wait for a scheduling round in progress.
	// Its view is taken before: once in the inbox, the record is the
	// scheduler's (under mu).
	lj := &liveJob{rec: rec}
	v := recordView(rec) // what view says of a job not yet scheduled
	if rec.Held {
		v.Waiting = heldWaiting(rec.ID)
	}
	s.imu.Lock()
	s.inbox = append(s.inbox, lj)
	s.imu.Unlock()
	if len(spec.After) > 0 {
		s.lock() // its view says which dependency it waits for
		v = s.view(lj, false)
		s.mu.Unlock()
	}
	s.log.Info("job submitted", "job", rec.ID, "tenant", tenant, "gpus", spec.GPUs)
	s.kickRound()
	w.Header().Set("Location", "/v1/jobs/"+rec.ID)
	writeJSON(w, http.StatusCreated, v)
}

// lock takes mu and brings the jobs submitted since into the job table
// and the engine, so that whoever holds mu sees every job accepted.
func (s *Server) lock() {
	s.mu.Lock()
	s.drain()
}

// drain moves the jobs of the inbox into the job table (s.order in
// submission order) and the engine. Under mu.
func (s *Server) drain() {
	s.imu.Lock()
	in := s.inbox
	s.inbox = nil
	s.imu.Unlock()
	for _, lj := range in {
		rec := lj.rec
		s.jobs[rec.ID] = lj
		if n := len(s.order); n == 0 || s.order[n-1].rec.Seq < rec.Seq {
			s.order = append(s.order, lj)
		} else {
			i := sort.Search(n, func(i int) bool { return s.order[i].rec.Seq > rec.Seq })
			s.order = slices.Insert(s.order, i, lj)
		}
		s.metrics.counters["submitted"]++
		j, err := s.specJob(&rec.Spec, rec.ID, rec.Submitted)
		if err == nil {
			_, err = s.eng.Submit(j)
		}
		if err != nil {
			// checkRunnable should have caught it; record why it cannot
			// run (the next commit writes it).
			s.fail(lj, "refused by the scheduler: "+err.Error())
			continue
		}
		lj.j = j
		if len(rec.Spec.After) > 0 {
			s.deps[lj] = true
		}
		if rec.Held {
			s.held[lj] = true
		}
	}
}

// checkQueued says why tenant may not queue one more job (its
// limits.max_queued), or "".
func (s *Server) checkQueued(tenant string) string {
	if t := s.tenantByName(tenant); t == nil || t.Limits.MaxQueued <= 0 {
		return "" // no limit: no need to wait for mu (a round may hold it)
	}
	s.lock()
	defer s.mu.Unlock()
	return s.queuedLimit(tenant)
}

// queuedLimit is checkQueued under mu.
func (s *Server) queuedLimit(tenant string) string {
	t := s.tenantByName(tenant)
	if t == nil || t.Limits.MaxQueued <= 0 {
		return ""
	}
	n := 0
	for _, lj := range s.order {
		if lj.rec.Tenant == tenant && (lj.rec.State == api.StatePending || lj.rec.State == api.StatePreempted) {
			n++
		}
	}
	if n >= t.Limits.MaxQueued {
		return fmt.Sprintf("tenant %s has %d jobs waiting to run, its limit (limits.max_queued): wait for some to start, or cancel some", tenant, n)
	}
	return ""
}

// replaySubmit answers a submission whose idempotency key already created
// job id: that job (200, Idempotent-Replayed: true), or 409 when the retry
// carries another spec.
func (s *Server) replaySubmit(w http.ResponseWriter, id, key string, conflict bool) {
	if conflict {
		writeError(w, http.StatusConflict, fmt.Sprintf("idempotency key %q was used for job %s with another spec: use a new key for a new job", key, id),
			[]api.FieldError{{Field: api.IdempotencyHeader, Message: "already used with another spec"}})
		return
	}
	// The first request recorded the job; it may not have reached the
	// job table yet.
	for deadline := time.Now().Add(5 * time.Second); ; time.Sleep(2 * time.Millisecond) {
		s.lock()
		lj := s.jobs[id]
		var v api.Job
		if lj != nil {
			v = s.view(lj, false)
		}
		s.mu.Unlock()
		if lj != nil {
			w.Header().Set("Location", "/v1/jobs/"+id)
			w.Header().Set("Idempotent-Replayed", "true")
			writeJSON(w, http.StatusOK, v)
			return
		}
		if time.Now().After(deadline) {
			writeError(w, http.StatusServiceUnavailable, fmt.Sprintf("idempotency key %q: job %s is still being recorded, retry", key, id), nil)
			return
		}
	}
}

// specHash identifies a submitted spec, to tell a retry from another job.
func specHash(spec *api.JobSpec) string {
	data, _ := json.Marshal(spec) // map keys are sorted: stable
	return store.HashToken(string(data))
}

// pathCache remembers for a while whether programs are in the server's
// PATH: a burst of submissions of one program looks it up once, not once
// each (a stat per PATH entry).
type pathCache struct {
	mu    sync.Mutex
	found map[string]pathLookup
}

type pathLookup struct {
	ok bool
	at time.Time
}

// pathCacheTTL is how long a lookup is reused: a program installed (or
// removed) is seen within it.
const pathCacheTTL = 2 * time.Second

// find reports whether prog is in the server's PATH at now.
func (c *pathCache) find(prog string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l, ok := c.found[prog]; ok && now.Sub(l.at) < pathCacheTTL {
		return l.ok
	}
	if c.found == nil || len(c.found) > 1000 {
		c.found = map[string]pathLookup{}
	}
	_, err := exec.LookPath(prog)
	c.found[prog] = pathLookup{ok: err == nil, at: now}
	return err == nil
}

// checkRunnable checks what Validate cannot: that this server has the
// GPUs, and that the working directory and program exist.
func (s *Server) checkRunnable(spec *api.JobSpec) []api.FieldError {
	var errs []api.FieldError
	j, err := spec.Job("new", 0)
	if err != nil {
		return []api.FieldError{{Field: "spec", Message: err.Error()}}
	}
	if j.GPUType != "" && s.cluster.GPUsOfType(j.GPUType) == 0 {
		errs = append(errs, api.FieldError{Field: "gpu_type", Message: fmt.Sprintf("this server has no %s GPUs (it has %s)", j.GPUType, strings.Join(s.cluster.GPUTypes(), ", "))})
	} else if have := s.cluster.MaxJobGPUs(j.GPUType); have < j.MinGPUs {
		// A job runs on one GPU type: 2 a100 and 2 v100 hold no job of 4.
		field := "gpus"
		if j.MinGPUs != j.GPUs {
			field = "min_gpus"
		}
		msg := fmt.Sprintf("needs at least %d GPUs, this server has %d", j.MinGPUs, have)
		if all := s.cluster.GPUsOfType(j.GPUType); all > have {
			msg = fmt.Sprintf("needs at least %d GPUs of one type, this server has at most %d of one type (%d in all; a job never mixes types)", j.MinGPUs, have, all)
		}
		errs = append(errs, api.FieldError{Field: field, Message: msg})
	} else if j.Fractional() && s.wholeOnly != "" {
		errs = append(errs, api.FieldError{Field: partField(j), Message: fmt.Sprintf("policy %s is elastic: it runs jobs on whole GPUs, and this job asks for part of each GPU; "+
			"tide serve runs such jobs under a policy that is not elastic (tide policies lists them)", s.wholeOnly)})
	} else if j.Fractional() {
		// A part no GPU here has the memory for: refused now, not
		// accepted and failed by the first round.
		if have := engine.MaxPartGPUs(s.cluster, j); have < j.GPUs {
			errs = append(errs, api.FieldError{Field: partField(j), Message: fmt.Sprintf("its part of each GPU needs %.3g GiB of GPU memory, which %d of this server's GPUs hold (%s), it needs %d", partMem(j, s.cluster), have, gpuMemories(s.cluster), j.GPUs)})
		}
	}
	errs = append(errs, s.checkJobType(j)...)
	if spec.Workdir != "" {
		if fi, err := os.Stat(spec.Workdir); err != nil || !fi.IsDir() {
			errs = append(errs, api.FieldError{Field: "workdir", Message: fmt.Sprintf("%s is not a directory on the server", spec.Workdir)})
			return errs
		}
	}
	prog := spec.Command[0]
	if strings.Contains(prog, "/") {
		if !filepath.IsAbs(prog) && spec.Workdir != "" {
			prog = filepath.Join(spec.Workdir, prog)
		}
		if filepath.IsAbs(prog) {
			if fi, err := os.Stat(prog); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
				errs = append(errs, api.FieldError{Field: "command", Message: fmt.Sprintf("%s is not an executable file on the server", spec.Command[0])})
			}
		}
	} else if _, ok := spec.Env["PATH"]; !ok {
		if !s.paths.find(prog, time.Now()) {
			errs = append(errs, api.FieldError{Field: "command", Message: fmt.Sprintf("%s is not in the server's PATH", prog)})
		}
	}
	return errs
}

// partField is the spec's field that sets the memory of fractional job
// j's part.
func partField(j *job.Job) string {
	switch {
	case j.MIG != "":
		return "mig"
	case j.GPUMemGiB > 0:
		return "gpu_mem_gib"
	}
	return "gpu_share"
}

// partMem is the GPU memory fractional job j needs on each GPU, on the
// largest GPU of c that it may run on (a share alone takes that share of
// the GPU's memory).
func partMem(j *job.Job, c *cluster.Cluster) float64 {
	most := 0.0
	for i := range c.Nodes {
		if n := &c.Nodes[i]; j.GPUType == "" || n.GPUType == j.GPUType {
			most = math.Max(most, n.GPUMemGiB())
		}
	}
	_, mem := j.Demand(most)
	return mem
}

// gpuMemories lists the memory of each GPU type of c: "t4 16 GiB".
func gpuMemories(c *cluster.Cluster) string {
	var out []string
	seen := map[string]bool{}
	for i := range c.Nodes {
		n := &c.Nodes[i]
		if s := fmt.Sprintf("%s %g GiB", n.GPUType, n.GPUMemGiB()); !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return strings.Join(out, ", ")
}

func (s *Server) handleList(w http.ResponseWriter, r *http.Request, p *principal) {
	q, errs := s.parseList(r, p)
	if len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "invalid job list query", errs)
		return
	}
	s.lock()
	out := api.JobList{Jobs: []api.Job{}}
	start := 0
	if q.after != "" {
		if a := s.jobs[q.after]; a != nil {
			seq := a.rec.Seq
			start = sort.Search(len(s.order), func(i int) bool { return s.order[i].rec.Seq > seq })
		} else if n, err := strconv.ParseUint(q.after[1:], 10, 64); err == nil {
			// A job purged or never made: its number still orders.
			start = sort.Search(len(s.order), func(i int) bool { return s.order[i].rec.Seq > n })
		}
	}
	for _, lj := range s.order[start:] {
		if !p.admin && lj.rec.Tenant != p.tenant {
			continue
		}
		if (q.states != nil && !q.states[lj.rec.State]) || (q.tenant != "" && lj.rec.Tenant != q.tenant) {
			continue
		}
		if q.limit > 0 && len(out.Jobs) == q.limit {
			out.Next = out.Jobs[len(out.Jobs)-1].ID
			break
		}
		out.Jobs = append(out.Jobs, s.view(lj, false))
	}
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleGet(w http.ResponseWriter, r *http.Request, p *principal) {
	lj := s.lockVisible(w, r, p)
	if lj == nil {
		return
	}
	v := s.view(lj, true)
	s.mu.Unlock()
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleCancel(w http.ResponseWriter, r *http.Request, p *principal) {
	lj := s.lockVisible(w, r, p)
	if lj == nil {
		return
	}
	if api.Terminal(lj.rec.State) {
		st := lj.rec.State
		s.mu.Unlock()
		writeError(w, http.StatusConflict, fmt.Sprintf("job %s is already %s", r.PathValue("id"), st), nil)
		return
	}
	err := s.cancelJob(lj, p.tenant)
	v := s.view(lj, true)
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	s.kickRound()
	writeJSON(w, http.StatusOK, v)
}

func (s *Server) handleLogs(w http.ResponseWriter, r *http.Request, p *principal) {
	var off int64
	if o := r.URL.Query().Get("offset"); o != "" {
		v, err := strconv.ParseInt(o, 10, 64)
		if err != nil || v < 0 {
			writeError(w, http.StatusBadRequest, "offset: want a byte offset >= 0", []api.FieldError{{Field: "offset", Message: "want an integer >= 0"}})
			return
		}
		off = v
	}
	s.lock()
	lj := s.visible(w, r.PathValue("id"), p)
	var state string
	if lj != nil {
		state = lj.rec.State
	}
	s.mu.Unlock()
	if lj == nil {
		return
	}
	var data []byte
	next := off
	f, err := os.Open(s.logFile(lj.rec.ID))
	if err == nil {
		defer f.Close()
		if fi, err := f.Stat(); err == nil && off > fi.Size() {
			off = fi.Size()
		}
		if _, err := f.Seek(off, io.SeekStart); err == nil {
			data, _ = io.ReadAll(io.LimitReader(f, api.MaxBodyBytes))
		}
		next = off + int64(len(data))
	} else if !errors.Is(err, os.ErrNotExist) {
		writeError(w, http.StatusInternalServerError, "reading the log: "+err.Error(), nil)
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("X-Tide-Next-Offset", strconv.FormatInt(next, 10))
	w.Header().Set("X-Tide-Job-State", state)
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(data)
}

func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request, p *principal) {
	lj := s.lockVisible(w, r, p)
	if lj == nil {
		return
	}
	// Read what the job's state says happened: wait for a commit in
	// flight (wmu after mu, as commit takes them), then add the events
	// not yet written.
	s.wmu.Lock()
	var evs []store.Event
	err := s.db.View(func(tx *store.Tx) error {
		var err error
		evs, err = tx.Events(lj.rec.ID)
		return err
	})
	s.wmu.Unlock()
	for _, e := range s.events {
		if e.Job == lj.rec.ID {
			evs = append(evs, *e)
		}
	}
	s.mu.Unlock()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	out := struct {
		Events []api.Event `json:"events"`
	}{Events: []api.Event{}}
	for _, e := range evs {
		out.Events = append(out.Events, api.Event{Seq: e.Seq, Time: *toTime(e.Time), Job: e.Job, Kind: e.Kind, Attempt: e.Attempt, Message: e.Message})
	}
	writeJSON(w, http.StatusOK, out)
}

// handleReport takes a job's report; the job authenticates with its
// $TIDE_REPORT_TOKEN (its tenant's or the admin's token work too).
func (s *Server) handleReport(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	tok := bearer(r)
	p := s.who(r)
	s.lock()
	lj := s.jobs[id]
	ok := false
	if lj != nil {
		if p != nil && (p.admin || p.tenant == lj.rec.Tenant) {
			ok = true
		} else if tok != "" && lj.rec.ReportTokenHash != "" {
			ok = subtle.ConstantTimeCompare([]byte(store.HashToken(tok)), []byte(lj.rec.ReportTokenHash)) == 1
		}
	}
	s.mu.Unlock()
	if !ok {
		if tok == "" {
			writeError(w, http.StatusUnauthorized, "missing bearer token: send Authorization: Bearer $TIDE_REPORT_TOKEN", nil)
		} else {
			writeError(w, http.StatusNotFound, "no job "+strconv.Quote(id)+" for this token", nil)
		}
		return
	}
	var rep api.Report
	if !readBody(w, r, &rep) {
		return
	}
	if errs := rep.Validate(); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "invalid report", errs)
		return
	}
	s.lock()
	terminal := api.Terminal(lj.rec.State)
	s.applyReport(lj, &rep)
	s.mu.Unlock()
	if terminal {
		writeError(w, http.StatusConflict, "job "+id+" is over", nil)
		return
	}
	w.WriteHeader(http.StatusNoContent)
}

func (s *Server) handleCluster(w http.ResponseWriter, r *http.Request, p *principal) {
	s.lock()
	out := api.Cluster{Policy: s.policyName, Placer: s.placerName, Total: s.cluster.TotalGPUs(),
		Allocated: s.eng.Allocated(), Rounds: s.eng.Rounds()}
	// Each GPU's holders in submission order (the engine's is queue
	// order, where a requeued job comes after those queued before its
	// requeue).
	type holder struct {
		seq  uint64
		name string
	}
	holders := make([][]holder, s.cluster.TotalGPUs())
	for _, st := range s.eng.Active() {
		if len(st.GPUs) > 0 {
			out.Running++
		} else {
			out.Queued++
		}
		lj := s.jobs[st.Job.ID]
		name := "(other tenant)"
		if p.admin || (lj != nil && lj.rec.Tenant == p.tenant) {
			name = st.Job.ID
		}
		var seq uint64
		if lj != nil {
			seq = lj.rec.Seq
		}
		for _, g := range st.GPUs {
			holders[g] = append(holders[g], holder{seq, name})
		}
	}
	s.mu.Unlock()
	byIndex := map[int]int{} // CUDA index -> position in s.gpus
	for i, g := range s.gpus {
		byIndex[g.Index] = i
	}
	for g, dev := range s.devices {
		d := s.gpus[byIndex[dev]]
		gpu := api.GPU{Index: d.Index, Name: d.Name, Type: d.Type, MemoryGiB: d.MemGiB}
		if hs := holders[g]; len(hs) > 0 {
			slices.SortStableFunc(hs, func(a, b holder) int { return cmp.Compare(a.seq, b.seq) })
			gpu.Job = hs[0].name
			if len(hs) > 1 {
				for _, h := range hs {
					gpu.Jobs = append(gpu.Jobs, h.name)
				}
			}
		}
		out.GPUs = append(out.GPUs, gpu)
	}
	slices.SortFunc(out.GPUs, func(a, b api.GPU) int { return a.Index - b.Index })
	writeJSON(w, http.StatusOK, out)
}

func (s *Server) handleNewTenant(w http.ResponseWriter, r *http.Request, p *principal) {
	if !p.admin {
		writeError(w, http.StatusForbidden, "only the admin may create tenants", nil)
		return
	}
	var req api.NewTenant
	if !readBody(w, r, &req) {
		return
	}
	if !api.TenantName(req.Name) {
		writeError(w, http.StatusBadRequest, "invalid tenant", []api.FieldError{{Field: "name", Message: "want 1 to 64 letters, digits, '-', '_' or '.'"}})
		return
	}
	s.tmu.RLock()
	n := len(s.tenants)
	s.tmu.RUnlock()
	if err := checkIsolation(geteuid(), n+1, s.cfg.SingleUser); err != nil {
		writeError(w, http.StatusForbidden, err.Error(), nil)
		return
	}
	if fe := s.checkTenantUser(req.Name, req.User); fe != nil {
		writeError(w, http.StatusBadRequest, "invalid tenant", []api.FieldError{*fe})
		return
	}
	if errs := req.Limits.Validate(); len(errs) > 0 {
		writeError(w, http.StatusBadRequest, "invalid limits", errs)
		return
	}
	tok, err := store.NewToken()
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	t := &store.Tenant{Name: req.Name, TokenHash: store.HashToken(tok), Created: s.clk.Now(), User: req.User}
	if req.Limits != nil {
		t.Limits = *req.Limits
	}
	err = s.db.Update(func(tx *store.Tx) error {
		if _, err := tx.Tenant(req.Name); err == nil {
			return errExists
		}
		if err := tx.PutTenant(t); err != nil {
			return err
		}
		return tx.AddEvent(&store.Event{Time: t.Created, Kind: "tenant-created", Message: req.Name})
	})
	if errors.Is(err, errExists) {
		writeError(w, http.StatusConflict, "tenant "+req.Name+" exists", []api.FieldError{{Field: "name", Message: "already taken"}})
		return
	}
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	s.tmu.Lock()
	s.putTenant(t)
	s.tmu.Unlock()
	s.log.Info("tenant created", "tenant", req.Name, "user", req.User)
	v := tenantView(t)
	v.Token = tok
	writeJSON(w, http.StatusCreated, v)
}

// checkTenantUser checks the Unix user a tenant is to run its jobs as:
// it must exist (or be numeric), not be root, and not be another
// tenant's. An empty user is fine (an isolating server then refuses the
// tenant's jobs until one is set).
func (s *Server) checkTenantUser(tenant, spec string) *api.FieldError {
	if spec == "" {
		return nil
	}
	u, err := localexec.LookupUser(spec)
	if err != nil {
		return &api.FieldError{Field: "user", Message: err.Error()}
	}
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	for _, t := range s.tenants {
		if t.Name == tenant || t.User == "" {
			continue
		}
		if o, err := localexec.LookupUser(t.User); err == nil && o.UID == u.UID {
			return &api.FieldError{Field: "user", Message: fmt.Sprintf("uid %d already runs tenant %s's jobs: tenants sharing a Unix user are not isolated", u.UID, t.Name)}
		}
	}
	return nil
}

func tenantView(t *store.Tenant) api.Tenant {
	return api.Tenant{Name: t.Name, Admin: t.Admin, Created: *toTime(t.Created), User: t.User, Limits: t.Limits, Revoked: t.TokenHash == ""}
}

var errExists = errors.New("exists")

func (s *Server) handleTenants(w http.ResponseWriter, r *http.Request, p *principal) {
	if !p.admin {
		writeError(w, http.StatusForbidden, "only the admin may list tenants", nil)
		return
	}
	var ts []store.Tenant
	err := s.db.View(func(tx *store.Tx) error {
		var err error
		ts, err = tx.Tenants()
		return err
	})
	if err != nil {
		writeError(w, http.StatusInternalServerError, err.Error(), nil)
		return
	}
	out := struct {
		Tenants []api.Tenant `json:"tenants"`
	}{Tenants: []api.Tenant{}}
	for i := range ts {
		out.Tenants = append(out.Tenants, tenantView(&ts[i]))
	}
	writeJSON(w, http.StatusOK, out)
}

// recordView is the API's view of a job's record, without what the
// scheduler says of it (view adds that).
func recordView(r *store.Job) api.Job {
	v := api.Job{ID: r.ID, Name: r.Spec.Name, Tenant: r.Tenant, State: r.State, Spec: r.Spec,
		Submitted: *toTime(r.Submitted), Started: toTime(r.FirstStart), Ended: toTime(r.Ended),
		Restarts: r.Restarts, Failures: r.Failures, Preemptions: r.Preemptions, Progress: r.Progress,
		Throughput: r.Throughput, Message: r.Message, ReportedAt: toTime(r.ReportedAt), Reason: r.Reason, Held: r.Held, Requeues: r.Requeues}
	v.Spec.Command = append([]string(nil), r.Spec.Command...)
	return v
}

// view is the API's view of a job; detail adds the attempts. Under mu.
func (s *Server) view(lj *liveJob, detail bool) api.Job {
	r := lj.rec
	v := recordView(r)
	if !api.Terminal(r.State) && lj.att == nil {
		v.Waiting = s.blocked(r.ID)
	}
	if lj.j != nil && !api.Terminal(r.State) {
		if st := s.eng.Job(r.ID); st != nil {
			for _, g := range st.GPUs {
				v.GPUs = append(v.GPUs, s.devices[g])
			}
			if v.Reason == "" {
				why := st.Reason()
				v.Reason, v.QueuePosition, v.PredictedStart = api.WallReason(why.Text), why.Position, toTime(why.PredictedStart)
				if !r.Held && why.Text == heldWaiting(r.ID) {
					// Released since the last round, which gave that reason.
					v.Reason = "released: waits for the next scheduling round"
				}
			}
		}
	}
	if detail {
		v.Perf = s.perfView(lj)
		for _, a := range r.Attempts {
			out := a.Outcome
			if out == "" {
				out = a.Phase
			}
			va := api.Attempt{N: a.N, GPUs: append([]int(nil), a.Devices...), PID: a.PID, Started: toTime(a.Started), Ended: toTime(a.Ended), Outcome: out,
				BatchSize: a.BatchSize, LocalBsz: a.LocalBsz, AccumSteps: a.AccumSteps}
			if a.ExitCode != nil {
				c := *a.ExitCode
				va.ExitCode = &c
			}
			v.Attempts = append(v.Attempts, va)
		}
	}
	return v
}
