package server

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/console"
)

// The random operations search's console, log-following and malformed
// request operations (TestRandomOperations): what a user of the web
// console, of `tide logs -f` and of a hand-written client does.

// raw sends a request with token ("" for none) and returns the answer's
// status and body. A 5xx, or no answer, fails the run: a request is
// answered, a bad one with a 4xx.
func (r *roTest) raw(token, method, path, body string) (int, []byte) {
	r.t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(r.ctx, method, r.ts.url+path, rd)
	if err != nil {
		r.fail("%s %s: %v", method, path, err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		r.fail("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		r.fail("%s %s: reading the answer: %v", method, path, err)
	}
	if resp.StatusCode >= 500 {
		r.fail("%s %s: %d %s", method, path, resp.StatusCode, data)
	}
	return resp.StatusCode, data
}

var (
	jobIDs    = regexp.MustCompile(`\bj\d{6,}\b`)
	exampleID = regexp.MustCompile(`such as (j\d{6,})\b`)
)

// consoleRead GETs a console page as a: it must answer 200 with JSON
// that decodes into out and leaks nothing a may not see (noLeak).
func (r *roTest) consoleRead(a *roActor, path, what string, out any) {
	code, body := r.raw(a.token, "GET", path, "")
	r.logf("%s reads the console's %s: %d", a.name, what, code)
	if code != http.StatusOK {
		r.fail("%s reads the console's %s: %d %s", a.name, what, code, body)
	}
	r.noLeak(a, "console "+what, body)
	if err := json.Unmarshal(body, out); err != nil {
		r.fail("the console's %s: %v: %s", what, err, body)
	}
}

// noLeak checks what a was answered: no actor's token, and for a tenant
// no job of another tenant but those it asked about (asked) and those its
// own jobs' specs name (the admin may make a tenant's job wait for
// anyone's).
func (r *roTest) noLeak(a *roActor, what string, body []byte, asked ...string) {
	r.t.Helper()
	for _, o := range r.actors {
		if bytes.Contains(body, []byte(o.token)) {
			r.fail("%s's %s holds %s's token:\n%s", a.name, what, o.name, body)
		}
	}
	if a.name == "admin" {
		return
	}
	named := asked
	for _, id := range r.order {
		if j := r.jobs[id]; j.tenant == a.name {
			named = append(named, j.spec.After...)
		}
	}
	for _, id := range jobIDs.FindAllString(string(body), -1) {
		if j := r.jobs[id]; j != nil && j.tenant != a.name && !slices.Contains(named, id) {
			r.fail("tenant %s's %s names tenant %s's job %s:\n%s", a.name, what, j.tenant, id, body)
		}
	}
}

// consoleOp reads the web console's views as some actor, or acts on a job
// there, or sends it a bad request. A tenant's views hold only its own
// jobs (others' GPUs marked "(other tenant)"), every job of its accepted
// a moment before; a job's view there has its spec's command and the end
// of its log; an action obeys the API's rules.
func (r *roTest) consoleOp() {
	a := r.actors[r.pick(len(r.actors))]
	switch r.pick(6) {
	case 0:
		r.consoleQueue(a)
	case 1:
		var page console.ClusterPage
		r.consoleRead(a, "/ui/api/cluster", "cluster", &page)
		n := 0
		for _, node := range page.Nodes {
			for _, g := range node.GPUs {
				n++
				if g.Job == "" {
					if g.Tenant != "" && (a.name == "admin" || g.Tenant != "(other tenant)") {
						r.fail("%s's console cluster: GPU %s of tenant %q without a job", a.name, g.Label, g.Tenant)
					}
					continue
				}
				if j := r.jobs[g.Job]; j == nil || j.tenant != g.Tenant || (a.name != "admin" && j.tenant != a.name) {
					r.fail("%s's console cluster: GPU %s held by %s of %q (model %+v)", a.name, g.Label, g.Job, g.Tenant, j)
				}
			}
		}
		if n != len(r.types) {
			r.fail("the console's cluster lists %d GPUs; the server has %d", n, len(r.types))
		}
	case 2:
		j, _ := r.target()
		if j == nil {
			return
		}
		code, body := r.raw(a.token, "GET", "/ui/api/jobs/"+j.id, "")
		own := a.name == "admin" || a.name == j.tenant
		r.logf("%s reads %s in the console: %d", a.name, j.id, code)
		if !own {
			if code != http.StatusNotFound {
				r.fail("tenant %s reads tenant %s's job %s in the console: %d %s", a.name, j.tenant, j.id, code, body)
			}
			return
		}
		if code != http.StatusOK {
			r.fail("%s reads its job %s in the console: %d %s", a.name, j.id, code, body)
		}
		r.noLeak(a, "console view of "+j.id, body, j.id)
		var d console.Detail
		if err := json.Unmarshal(body, &d); err != nil {
			r.fail("the console's view of %s: %v: %s", j.id, err, body)
		}
		if d.Job.ID != j.id || d.Job.Tenant != j.tenant || !slices.Equal(d.Command, j.spec.Command) {
			r.fail("the console's view of %s: job %s of %s, command %q; accepted for %s with %q", j.id, d.Job.ID, d.Job.Tenant, d.Command, j.tenant, j.spec.Command)
		}
		// The log only grows (no limit is set here): the tail read then
		// is in the log read now.
		data, _, _, err := a.c.Logs(r.ctx, j.id, 0)
		if err != nil {
			r.fail("log of %s: %v", j.id, err)
		}
		if !strings.Contains(string(data), d.LogTail) {
			r.fail("the console's log tail of %s is not in its log:\n%s\n---- log:\n%s", j.id, d.LogTail, data)
		}
	case 3:
		var out struct{ Tenants []console.TenantRow }
		r.consoleRead(a, "/ui/api/tenants", "tenants", &out)
		for _, row := range out.Tenants {
			if a.name != "admin" && row.Name != a.name {
				r.fail("tenant %s's console shows tenant %s: %+v", a.name, row.Name, row)
			}
		}
	case 4:
		r.consoleAct(a)
	default:
		r.consoleBad(a)
	}
}

// consoleQueue lists every job a may see in the console: its own (all for
// the admin), each once, none unknown, every one accepted more than the
// console's snapshot age before included, those the model knows ended
// shown ended.
func (r *roTest) consoleQueue(a *roActor) {
	read := time.Now()
	var page console.QueuePage
	r.consoleRead(a, "/ui/api/queue?state=all&limit=1000", "queue", &page)
	r.logf("%s reads the console's queue: %d jobs", a.name, len(page.Jobs))
	seen := map[string]bool{}
	for _, v := range page.Jobs {
		j := r.jobs[v.ID]
		switch {
		case j == nil || v.Tenant != j.tenant:
			r.fail("%s's console queue lists %s of %q (model %+v)", a.name, v.ID, v.Tenant, j)
		case a.name != "admin" && j.tenant != a.name:
			r.fail("tenant %s's console queue lists tenant %s's job %s", a.name, j.tenant, v.ID)
		case seen[v.ID]:
			r.fail("%s's console queue lists %s twice", a.name, v.ID)
		case j.obs != nil && api.Terminal(j.obs.State) && j.obs.Requeues == j.requeues && !j.obsAt.After(read.Add(-consoleAge)) && v.State != j.obs.State:
			r.fail("%s's console queue shows %s %s; it ended %s before", a.name, v.ID, v.State, j.obs.State)
		}
		seen[v.ID] = true
	}
	for _, id := range r.order {
		if j := r.jobs[id]; (a.name == "admin" || j.tenant == a.name) && j.at.Before(read.Add(-consoleAge)) && !seen[id] {
			r.fail("%s's console queue leaves out its job %s, accepted at %s (read at %s)", a.name, id, j.at.Format("15:04:05.000"), read.Format("15:04:05.000"))
		}
	}
}

// consoleAge bounds how old the console's snapshot may be when served
// (console.Options.MaxAge's default, with a margin).
const consoleAge = 600 * time.Millisecond

// consoleAct cancels, holds or releases a job in the console, as its
// owner, the admin or another tenant (404). The rules are the API's.
func (r *roTest) consoleAct(a *roActor) {
	j, _ := r.target()
	if j == nil {
		return
	}
	op := []string{"cancel", "hold", "release"}[r.pick(3)]
	code, body := r.raw(a.token, "POST", "/ui/api/jobs/"+j.id+"/"+op, "")
	r.logf("%s %ss %s in the console (model held %v, cancelled %v): %d %s", a.name, op, j.id, j.held, j.cancelled, code, bytes.TrimSpace(body))
	r.noLeak(a, "console "+op, body, j.id)
	if a.name != "admin" && a.name != j.tenant {
		if code != http.StatusNotFound {
			r.fail("tenant %s could %s tenant %s's job %s in the console: %d %s", a.name, op, j.tenant, j.id, code, body)
		}
		return
	}
	wasEnded := j.obs != nil && api.Terminal(j.obs.State)
	stableHeld := j.held && len(j.spec.After) == 0 && !wasEnded && !j.cancelled
	switch {
	case code == http.StatusOK:
		switch {
		case wasEnded:
			r.fail("%s of %s in the console, which was %s: accepted", op, j.id, j.obs.State)
		case op == "release" && !j.held:
			r.fail("release of %s in the console, not held: accepted", j.id)
		}
		switch op {
		case "cancel":
			j.cancelled = true
		case "hold":
			j.held = true
		default:
			j.held = false
		}
	case code == http.StatusConflict:
		if stableHeld {
			r.fail("%s of held job %s in the console refused: %s", op, j.id, body)
		}
		if op == "release" && j.held && !wasEnded && !j.cancelled {
			// Held, with dependencies: refused only once they failed it.
			if g, err := r.actors[0].c.Job(r.ctx, j.id); err != nil || !api.Terminal(g.State) {
				r.fail("release of held job %s in the console refused while it waits (%+v, %v): %s", j.id, g, err, body)
			}
		}
	default:
		r.fail("%s of %s in the console: %d %s", op, j.id, code, body)
	}
}

// consoleBad sends the console a request it must refuse, saying so.
func (r *roTest) consoleBad(a *roActor) {
	type bad struct {
		method, path, token string
		code                int
	}
	cases := []bad{
		{"GET", "/ui/api/queue?state=bogus", a.token, http.StatusBadRequest},
		{"GET", "/ui/api/queue?limit=0", a.token, http.StatusBadRequest},
		{"GET", "/ui/api/cluster?offset=-1", a.token, http.StatusBadRequest},
		{"GET", "/ui/api/tenants?hours=x", a.token, http.StatusBadRequest},
		{"GET", "/ui/api/queue", "", http.StatusUnauthorized},
		{"GET", "/ui/api/queue", a.token + "x", http.StatusUnauthorized},
		{"GET", "/ui/api/jobs/j999999", a.token, http.StatusNotFound},
		{"POST", "/ui/api/jobs/j999999/cancel", a.token, http.StatusNotFound},
	}
	if len(r.order) > 0 {
		cases = append(cases, bad{"POST", "/ui/api/jobs/" + r.order[r.pick(len(r.order))] + "/requeue", a.token, http.StatusNotFound})
	}
	c := cases[r.pick(len(cases))]
	code, body := r.raw(c.token, c.method, c.path, "")
	r.logf("%s: console %s %s: %d", a.name, c.method, c.path, code)
	var e struct{ Error string }
	if code != c.code || json.Unmarshal(body, &e) != nil || e.Error == "" {
		r.fail("%s: console %s %s: %d %s; want %d saying why", a.name, c.method, c.path, code, body, c.code)
	}
	r.noLeak(a, "console error", body, jobIDs.FindAllString(c.path, -1)...)
}

// tail follows a job's log as `tide logs -f` does, from where the last
// read of it ended: the pieces read, across restarts, make up the start
// of the log; the next offset is where the data read ends; a read past
// the end gets nothing; a bad offset is refused naming it; another
// tenant's job is not found.
func (r *roTest) tail() {
	j, a := r.target()
	if j == nil {
		return
	}
	if a.name != "admin" && a.name != j.tenant {
		_, _, _, err := a.c.Logs(r.ctx, j.id, j.tailOff)
		r.logf("%s follows %s's log: %v", a.name, j.id, oneLine(err))
		if !isStatus(err, http.StatusNotFound) {
			r.fail("tenant %s follows tenant %s's job %s's log: %v", a.name, j.tenant, j.id, err)
		}
		return
	}
	switch r.pick(6) {
	case 0:
		code, body := r.raw(a.token, "GET", "/v1/jobs/"+j.id+"/logs?offset="+[]string{"-1", "x", "1e3"}[r.pick(3)], "")
		r.logf("%s follows %s's log from a bad offset: %d", a.name, j.id, code)
		var e api.Error
		if code != http.StatusBadRequest || json.Unmarshal(body, &e) != nil || !hasField(&e, "offset") {
			r.fail("a bad log offset: %d %s; want 400 naming offset", code, body)
		}
		return
	case 1:
		// Past the end: nothing, and the next offset is the end.
		data, next, _, err := a.c.Logs(r.ctx, j.id, j.tailOff+1<<20)
		r.logf("%s reads %s's log past its end: %d bytes, next %d, %v", a.name, j.id, len(data), next, oneLine(err))
		if err != nil || len(data) > 0 || next < j.tailOff || next > j.tailOff+1<<20 {
			r.fail("reading %s's log past its end (%d): %d bytes, next %d, %v", j.id, j.tailOff+1<<20, len(data), next, err)
		}
		return
	}
	data, next, state, err := a.c.Logs(r.ctx, j.id, j.tailOff)
	r.logf("%s follows %s's log from %d: %d bytes, next %d, state %s, %v", a.name, j.id, j.tailOff, len(data), next, state, oneLine(err))
	if err != nil {
		r.fail("%s follows %s's log: %v", a.name, j.id, err)
	}
	if next != j.tailOff+int64(len(data)) || !slices.Contains(jobStatesAll, state) {
		r.fail("%s's log from %d: %d bytes, next offset %d, state %q", j.id, j.tailOff, len(data), next, state)
	}
	j.tailed = append(j.tailed, data...)
	j.tailOff = next
	r.noLeak(a, "log of "+j.id, data, j.id)
	all, _, _, err := a.c.Logs(r.ctx, j.id, 0)
	if err != nil {
		r.fail("log of %s: %v", j.id, err)
	}
	if !bytes.HasPrefix(all, j.tailed) {
		r.fail("%s's log, followed to %d, is not the start of its log:\n%s\n---- log:\n%s", j.id, j.tailOff, j.tailed, all)
	}
}

// badRequest sends the API a malformed request, as a hand-written client
// might: refused with a 4xx and a JSON error naming the field where there
// is one, creating nothing (check compares the jobs with the model).
func (r *roTest) badRequest() {
	a := r.actors[r.pick(len(r.actors))]
	type bad struct {
		method, path, body, token string
		code                      int
		field                     string
	}
	id := "j999999"
	if len(r.order) > 0 {
		id = r.order[r.pick(len(r.order))]
	}
	cases := []bad{
		{"POST", "/v1/jobs", `{"command": ["true"], "gpus": 1`, a.token, http.StatusBadRequest, ""},
		{"POST", "/v1/jobs", `{"command": "true", "gpus": 1}`, a.token, http.StatusBadRequest, "command"},
		{"POST", "/v1/jobs", `{"command": ["true"], "gpus": 1, "gpu": 2}`, a.token, http.StatusBadRequest, ""},
		{"POST", "/v1/jobs", `[]`, a.token, http.StatusBadRequest, ""},
		{"POST", "/v1/jobs", `{"command": ["true"], "gpus": 1}`, "", http.StatusUnauthorized, ""},
		{"POST", "/v1/jobs", `{"command": ["true"], "gpus": 1}`, "not-a-token", http.StatusUnauthorized, ""},
		{"GET", "/v1/jobs?limit=0", "", a.token, http.StatusBadRequest, "limit"},
		{"GET", "/v1/jobs?state=done", "", a.token, http.StatusBadRequest, "state"},
		{"GET", "/v1/jobs?after=42", "", a.token, http.StatusBadRequest, "after"},
		{"GET", "/v1/jobs?sort=id", "", a.token, http.StatusBadRequest, "sort"},
		// (Any method or path the API does not have: 404 naming both.)
		{"DELETE", "/v1/jobs/" + id, "", a.token, http.StatusNotFound, ""},
		{"POST", "/v1/jobs/" + id + "/report", `{"progress": 0.5}`, "", http.StatusUnauthorized, ""},
		// (Read before the job is looked up: 400 whoever's job it is.)
		{"POST", "/v1/jobs/" + id + "/requeue", `{"hold": "yes"}`, a.token, http.StatusBadRequest, "hold"},
		{"PATCH", "/v1/tenants/" + r.actors[1+r.pick(len(r.actors)-1)].name, `{"limits": {"max_gpus": -1}}`, r.actors[0].token, http.StatusBadRequest, ""},
	}
	c := cases[r.pick(len(cases))]
	code, body := r.raw(c.token, c.method, c.path, c.body)
	r.logf("%s: %s %s %s: %d %s", a.name, c.method, c.path, c.body, code, bytes.TrimSpace(body))
	var e api.Error
	if code != c.code || json.Unmarshal(body, &e) != nil || e.Message == "" {
		r.fail("%s: %s %s %s: %d %s; want %d with a JSON error", a.name, c.method, c.path, c.body, code, body, c.code)
	}
	if c.field != "" && !hasField(&e, c.field) {
		r.fail("%s: %s %s: %s; want the field %s named", a.name, c.method, c.path, body, c.field)
	}
	// The ID a message gives as an example of the format ("want a job ID
	// such as j000042") is no job's: it may be another tenant's.
	asked := jobIDs.FindAllString(c.path, -1)
	for _, m := range exampleID.FindAllStringSubmatch(string(body), -1) {
		asked = append(asked, m[1])
	}
	r.noLeak(a, "error", body, asked...)
}
