package console

import (
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tide-sched/tide/policy"
)

//go:embed assets
var assets embed.FS

// Handler serves the console: the page at / and /ui/..., the assets under
// /ui/, the data under /ui/api/. Mount it for "GET /{$}" and "/ui/".
func (c *Console) Handler() http.Handler {
	mux := http.NewServeMux()
	static, _ := fs.Sub(assets, "assets")
	mux.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) { c.page(w, static) })
	mux.HandleFunc("GET /ui/{$}", func(w http.ResponseWriter, r *http.Request) { c.page(w, static) })
	files := http.StripPrefix("/ui/", http.FileServerFS(static))
	mux.HandleFunc("GET /ui/{file}", func(w http.ResponseWriter, r *http.Request) {
		secure(w)
		w.Header().Set("Cache-Control", "no-cache")
		files.ServeHTTP(w, r)
	})
	mux.HandleFunc("POST /ui/api/login", c.authed(c.handleLogin))
	mux.HandleFunc("GET /ui/api/summary", c.authed(c.handleSummary))
	mux.HandleFunc("GET /ui/api/cluster", c.authed(c.handleCluster))
	mux.HandleFunc("GET /ui/api/queue", c.authed(c.handleQueue))
	mux.HandleFunc("GET /ui/api/jobs/{id}", c.authed(c.handleJob))
	mux.HandleFunc("POST /ui/api/jobs/{id}/{action}", c.authed(c.handleAct))
	mux.HandleFunc("GET /ui/api/tenants", c.authed(c.handleTenants))
	mux.HandleFunc("GET /ui/api/usage", c.authed(c.handleUsage))
	mux.HandleFunc("GET /ui/api/policies", c.authed(c.handlePolicies))
	mux.HandleFunc("POST /ui/api/whatif", c.authed(c.handleWhatIf))
	mux.HandleFunc("GET /ui/api/stream", c.authed(c.handleStream))
	mux.HandleFunc("/ui/", func(w http.ResponseWriter, r *http.Request) {
		writeErr(w, http.StatusNotFound, "no such console endpoint: "+r.Method+" "+r.URL.Path)
	})
	return mux
}

// secure sets the headers every console response carries: no framing, no
// sniffing, no referrer, scripts and styles from this origin only.
func secure(w http.ResponseWriter) {
	h := w.Header()
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self' 'unsafe-inline'; frame-ancestors 'none'; base-uri 'none'; form-action 'self'")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
}

func (c *Console) page(w http.ResponseWriter, static fs.FS) {
	data, err := fs.ReadFile(static, "index.html")
	if err != nil {
		writeErr(w, http.StatusInternalServerError, "console assets missing: "+err.Error())
		return
	}
	secure(w)
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	_, _ = w.Write(data)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	secure(w)
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
}

func writeErr(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, map[string]string{"error": msg})
}

type authedFunc func(w http.ResponseWriter, r *http.Request, p Principal)

// authed checks the request's bearer token.
func (c *Console) authed(h authedFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		scheme, tok, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		tok = strings.TrimSpace(tok)
		if !ok || !strings.EqualFold(scheme, "Bearer") || tok == "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tide"`)
			writeErr(w, http.StatusUnauthorized, "missing bearer token: sign in with an API token")
			return
		}
		p, ok := c.src.Auth(tok)
		if !ok {
			w.Header().Set("WWW-Authenticate", `Bearer realm="tide"`)
			writeErr(w, http.StatusUnauthorized, "unknown token")
			return
		}
		h(w, r, p)
	}
}

// view returns the current snapshot or writes the error.
func (c *Console) view(w http.ResponseWriter) *view {
	v, err := c.snapshot()
	if err != nil {
		code := http.StatusInternalServerError
		if errors.Is(err, ErrClosed) {
			code = http.StatusServiceUnavailable
		}
		writeErr(w, code, err.Error())
		return nil
	}
	return v
}

// Me is who signed in and what the console offers them.
type Me struct {
	Principal
	Kind    string   `json:"kind"`
	Actions []string `json:"actions"`
	WhatIf  bool     `json:"whatif"`
}

func (c *Console) me(p Principal) Me {
	m := Me{Principal: p, Actions: []string{}}
	if a, ok := c.src.(Actor); ok {
		m.Actions = a.Actions()
	}
	_, m.WhatIf = c.src.(Replayer)
	return m
}

func (c *Console) handleLogin(w http.ResponseWriter, r *http.Request, p Principal) {
	m := c.me(p)
	if v, err := c.snapshot(); err == nil {
		m.Kind = v.snap.Kind
	}
	writeJSON(w, http.StatusOK, m)
}

// summaryFor is the summary a principal sees: a tenant's job counts are
// its own; the cluster's GPU counts are everyone's (its shape).
func summaryFor(v *view, p Principal) Summary {
	s := v.summary
	if p.Admin {
		return s
	}
	s.Running, s.Waiting, s.Held, s.AtRisk = 0, 0, 0, 0
	for i := range v.snap.Jobs {
		j := &v.snap.Jobs[i]
		if j.Tenant != p.Tenant {
			continue
		}
		switch {
		case j.State == StateRunning:
			s.Running++
		case j.Waiting():
			s.Waiting++
		case j.State == StateHeld:
			s.Held++
		}
		if j.Active() && (j.Risk == "late" || j.Risk == "tight") {
			s.AtRisk++
		}
	}
	return s
}

func (c *Console) handleSummary(w http.ResponseWriter, r *http.Request, p Principal) {
	v := c.view(w)
	if v == nil {
		return
	}
	writeJSON(w, http.StatusOK, struct {
		Summary
		Me Me `json:"me"`
	}{summaryFor(v, p), c.me(p)})
}

// paging reads offset and limit (default 0 and def, limit at most max).
func paging(r *http.Request, def, max int) (int, int, error) {
	q := r.URL.Query()
	off, lim := 0, def
	if s := q.Get("offset"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			return 0, 0, fmt.Errorf("offset %q: want an integer >= 0", s)
		}
		off = n
	}
	if s := q.Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > max {
			return 0, 0, fmt.Errorf("limit %q: want an integer in [1, %d]", s, max)
		}
		lim = n
	}
	return off, lim, nil
}

// ClusterPage is a page of nodes.
type ClusterPage struct {
	Summary Summary `json:"summary"`
	Total   int     `json:"total"` // nodes matching the filter
	Offset  int     `json:"offset"`
	Nodes   []Node  `json:"nodes"`
}

func (c *Console) handleCluster(w http.ResponseWriter, r *http.Request, p Principal) {
	off, lim, err := paging(r, 200, 2000)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	v := c.view(w)
	if v == nil {
		return
	}
	q := r.URL.Query()
	site, typ := q.Get("site"), q.Get("type")
	out := ClusterPage{Summary: summaryFor(v, p), Offset: off, Nodes: []Node{}}
	for i := range v.snap.Nodes {
		n := &v.snap.Nodes[i]
		if (site != "" && n.Site != site) || (typ != "" && n.GPUType != typ) {
			continue
		}
		out.Total++
		if out.Total <= off || len(out.Nodes) >= lim {
			continue
		}
		nn := *n
		if !p.Admin {
			nn.GPUs = slices.Clone(n.GPUs)
			for k := range nn.GPUs {
				if g := &nn.GPUs[k]; g.Job != "" && g.Tenant != p.Tenant {
					g.Job, g.Tenant = "", "(other tenant)"
				}
			}
		}
		out.Nodes = append(out.Nodes, nn)
	}
	writeJSON(w, http.StatusOK, out)
}

// QueuePage is a page of jobs.
type QueuePage struct {
	Total  int   `json:"total"` // jobs matching the filter
	Offset int   `json:"offset"`
	Jobs   []Job `json:"jobs"`
	// PositionBy says where positions come from: "policy" (the policy's
	// order; waiting jobs it has not ordered yet come last, unnumbered),
	// "submission" (the policy gives none; the console numbers the
	// waiting jobs in submission order) or "none" (no job waits).
	PositionBy string    `json:"position_by"`
	Time       time.Time `json:"time"`
}

// match reports whether j passes the queue filter: state is active (the
// default), waiting, running, held, ended or all; q a substring of its ID,
// name or tenant.
func match(j *Job, state, tenant, q string) bool {
	switch state {
	case "", "active":
		if !j.Active() {
			return false
		}
	case "waiting":
		if !j.Waiting() {
			return false
		}
	case "running", "held":
		if j.State != state {
			return false
		}
	case "ended":
		if j.Active() {
			return false
		}
	}
	if tenant != "" && j.Tenant != tenant {
		return false
	}
	if q != "" && !strings.Contains(strings.ToLower(j.ID+" "+j.Name+" "+j.Tenant), q) {
		return false
	}
	return true
}

func (c *Console) handleQueue(w http.ResponseWriter, r *http.Request, p Principal) {
	off, lim, err := paging(r, 100, 1000)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	q := r.URL.Query()
	state := q.Get("state")
	switch state {
	case "", "active", "waiting", "running", "held", "ended", "all":
	default:
		writeErr(w, http.StatusBadRequest, fmt.Sprintf("state %q: want active, waiting, running, held, ended or all", state))
		return
	}
	v := c.view(w)
	if v == nil {
		return
	}
	text := strings.ToLower(strings.TrimSpace(q.Get("q")))
	out := QueuePage{Offset: off, Jobs: []Job{}, PositionBy: v.positionBy, Time: v.snap.Time}
	for _, i := range v.order {
		j := &v.snap.Jobs[i]
		if !p.sees(j.Tenant) || !match(j, state, q.Get("tenant"), text) {
			continue
		}
		out.Total++
		if out.Total > off && len(out.Jobs) < lim {
			out.Jobs = append(out.Jobs, *j)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) handleJob(w http.ResponseWriter, r *http.Request, p Principal) {
	d, err := c.src.Detail(p, r.PathValue("id"))
	if errors.Is(err, ErrNotFound) {
		writeErr(w, http.StatusNotFound, "no job "+strconv.Quote(r.PathValue("id")))
		return
	}
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	// The row as the queue shows it (predicted finish, risk).
	if v, err := c.snapshot(); err == nil {
		if i, ok := v.byID[d.Job.ID]; ok {
			d.Job = v.snap.Jobs[i]
		}
	}
	writeJSON(w, http.StatusOK, d)
}

func (c *Console) handleAct(w http.ResponseWriter, r *http.Request, p Principal) {
	a, ok := c.src.(Actor)
	action := r.PathValue("action")
	if !ok || !slices.Contains(a.Actions(), action) {
		writeErr(w, http.StatusNotFound, fmt.Sprintf("action %q is not offered here", action))
		return
	}
	err := a.Act(p, r.PathValue("id"), action)
	var ae *ActionError
	switch {
	case errors.Is(err, ErrNotFound):
		writeErr(w, http.StatusNotFound, "no job "+strconv.Quote(r.PathValue("id")))
		return
	case errors.As(err, &ae):
		writeErr(w, http.StatusConflict, ae.Msg)
		return
	case err != nil:
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	c.mu.Lock()
	c.cur = nil // show the change at once
	c.mu.Unlock()
	writeJSON(w, http.StatusOK, map[string]string{"job": r.PathValue("id"), "action": action})
}

// period reads ?hours= (default 24, at most the history kept).
func (c *Console) period(r *http.Request, now time.Time) (time.Time, error) {
	h := 24.0
	if s := r.URL.Query().Get("hours"); s != "" {
		x, err := strconv.ParseFloat(s, 64)
		if err != nil || !(x > 0) || x > 24*366 {
			return time.Time{}, fmt.Errorf("hours %q: want a number of hours > 0", s)
		}
		h = x
	}
	return now.Add(-time.Duration(h * float64(time.Hour))), nil
}

func (c *Console) handleTenants(w http.ResponseWriter, r *http.Request, p Principal) {
	v := c.view(w)
	if v == nil {
		return
	}
	from, err := c.period(r, v.snap.Time)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	rows := tenants(v.snap, c.history(from), v.snap.Time)
	out := struct {
		From    time.Time   `json:"from"`
		To      time.Time   `json:"to"`
		Tenants []TenantRow `json:"tenants"`
	}{From: from, To: v.snap.Time, Tenants: []TenantRow{}}
	for _, t := range rows {
		if p.sees(t.Name) {
			out.Tenants = append(out.Tenants, t)
		}
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) handleUsage(w http.ResponseWriter, r *http.Request, p Principal) {
	v := c.view(w)
	if v == nil {
		return
	}
	from, err := c.period(r, v.snap.Time)
	if err != nil {
		writeErr(w, http.StatusBadRequest, err.Error())
		return
	}
	// The history, and the state now (not kept) so the chart ends now.
	samples := append(c.history(from), sampleOf(v))
	// At most 2,000 points: thin evenly (the totals use every sample).
	u := usage(samples, from, v.snap.Time)
	if n := len(u.Samples); n > 2000 {
		thin := make([]Sample, 0, 2000)
		for k := 0; k < 2000; k++ {
			thin = append(thin, u.Samples[k*n/2000])
		}
		u.Samples = thin
	}
	if u.Samples == nil {
		u.Samples = []Sample{}
	}
	writeJSON(w, http.StatusOK, u)
}

// PolicyInfo is one policy the what-if offers.
type PolicyInfo struct {
	Name    string `json:"name"`
	Summary string `json:"summary"`
}

func (c *Console) handlePolicies(w http.ResponseWriter, r *http.Request, p Principal) {
	out := []PolicyInfo{}
	for _, i := range policy.All() {
		out = append(out, PolicyInfo{Name: i.Name, Summary: i.Summary})
	}
	writeJSON(w, http.StatusOK, out)
}

func (c *Console) handleWhatIf(w http.ResponseWriter, r *http.Request, p Principal) {
	rp, ok := c.src.(Replayer)
	if !ok {
		writeErr(w, http.StatusNotFound, "this console cannot replay its queue")
		return
	}
	var req struct {
		Policy string `json:"policy"`
	}
	dec := json.NewDecoder(io.LimitReader(r.Body, 4096))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil || strings.TrimSpace(req.Policy) == "" {
		writeErr(w, http.StatusBadRequest, `want a JSON body {"policy": "SPEC"} naming a policy (see GET /ui/api/policies)`)
		return
	}
	if !c.wmu.TryLock() {
		writeErr(w, http.StatusTooManyRequests, "a what-if is already running; try again when it is done")
		return
	}
	defer c.wmu.Unlock()
	in, err := rp.Replay()
	if err != nil {
		writeErr(w, http.StatusInternalServerError, err.Error())
		return
	}
	out, err := whatIf(in, strings.TrimSpace(req.Policy), p)
	if err != nil {
		writeErr(w, http.StatusBadRequest, "what-if: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, out)
}
