package console

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tide-sched/tide/cluster"
	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/job"
	"github.com/tide-sched/tide/perf"
	"github.com/tide-sched/tide/place"
	"github.com/tide-sched/tide/policy"
)

// engineSource is a Source over a real engine on a manual clock: the
// executors' adapters do the same with their own records beside it.
type engineSource struct {
	mu      sync.Mutex
	clk     *manualClock
	c       *cluster.Cluster
	eng     *engine.Engine
	policy  string
	tokens  map[string]Principal
	tenants []string
	quotas  map[string]int
	ended   []Job
	// roundS is the executor's round, s, the what-if replays with
	// (default 60).
	roundS float64
}

type manualClock struct{ t float64 }

func (c *manualClock) Now() float64 { return c.t }

// t0 is the sources' start, Unix seconds.
const t0 = 1.7e9

func newEngineSource(t testing.TB, clusterSpec, pol string) *engineSource {
	t.Helper()
	c, err := cluster.Parse(clusterSpec)
	if err != nil {
		t.Fatal(err)
	}
	p, err := policy.Parse(pol, policy.Context{})
	if err != nil {
		t.Fatal(err)
	}
	pl, err := place.Lookup("pack")
	if err != nil {
		t.Fatal(err)
	}
	clk := &manualClock{t: t0}
	eng, err := engine.New(engine.Config{Cluster: c, Model: perf.Duration{}, Policy: p, Placer: pl, Clock: clk})
	if err != nil {
		t.Fatal(err)
	}
	return &engineSource{clk: clk, c: c, eng: eng, policy: pol,
		tokens: map[string]Principal{"admin-token": {Tenant: "admin", Admin: true}}}
}

// submit adds a job of gpus GPUs and run time secs for tenant.
func (s *engineSource) submit(t testing.TB, id, tenant string, gpus int, secs, deadline float64) {
	t.Helper()
	s.clk.t++ // one second apart, in submission order
	j := &job.Job{ID: id, Tenant: tenant, Submit: s.clk.t, GPUs: gpus, Work: secs, Unit: job.Seconds, Duration: secs, Deadline: deadline}
	if _, err := s.eng.Submit(j); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.tokens[tenant+"-token"]; !ok {
		s.tokens[tenant+"-token"] = Principal{Tenant: tenant}
		s.tenants = append(s.tenants, tenant)
	}
}

func (s *engineSource) round(t testing.TB) {
	t.Helper()
	if _, err := s.eng.Schedule(); err != nil {
		t.Fatal(err)
	}
}

func (s *engineSource) Auth(tok string) (Principal, bool) {
	p, ok := s.tokens[tok]
	return p, ok
}

func (s *engineSource) Snapshot() (*Snapshot, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := &Snapshot{Time: Unix(s.clk.t), Kind: "test", Policy: s.policy, Rounds: s.eng.Rounds(), Tenants: s.tenants, Quotas: s.quotas}
	out.Nodes = EngineNodes(s.c, s.eng, nil)
	active := s.eng.Active()
	out.Jobs = make([]Job, 0, len(active)+len(s.ended))
	for _, st := range active {
		j := Job{ID: st.Job.ID, Tenant: st.Job.Tenant, State: string(st.State), Submitted: Unix(st.Job.Submit)}
		FromStatus(&j, st)
		j.Working = j.Held > 0
		out.Jobs = append(out.Jobs, j)
	}
	out.Jobs = append(out.Jobs, s.ended...)
	return out, nil
}

func (s *engineSource) Detail(p Principal, id string) (*Detail, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.eng.Job(id)
	if st == nil || !p.sees(st.Job.Tenant) {
		return nil, ErrNotFound
	}
	d := &Detail{Job: Job{ID: id, Tenant: st.Job.Tenant, State: string(st.State)}, Events: []Event{}}
	FromStatus(&d.Job, st)
	return d, nil
}

func (s *engineSource) Replay() (*Replay, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	round := s.roundS
	if round == 0 {
		round = 60
	}
	return EngineReplay(s.eng, s.c, s.policy, "pack", round, Unix(s.clk.t)), nil
}

// get calls the console's handler as tok and decodes the answer into out.
func get(t testing.TB, h http.Handler, tok, method, path string, body string, out any) int {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if tok != "" {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if out != nil && rec.Code < 300 {
		if err := json.Unmarshal(rec.Body.Bytes(), out); err != nil {
			t.Fatalf("%s %s: %v\n%s", method, path, err, rec.Body)
		}
	}
	return rec.Code
}

func TestAuthAndFiltering(t *testing.T) {
	src := newEngineSource(t, "2x4:t4", "fifo")
	src.submit(t, "a1", "alice", 4, 600, 0)
	src.submit(t, "b1", "bob", 2, 600, 0)
	src.submit(t, "a2", "alice", 8, 600, 0) // waits for the whole cluster
	src.round(t)
	c := New(src, Options{})
	h := c.Handler()

	for _, tok := range []string{"", "nope"} {
		if code := get(t, h, tok, "GET", "/ui/api/queue", "", nil); code != http.StatusUnauthorized {
			t.Errorf("token %q: status %d, want 401", tok, code)
		}
	}
	var q QueuePage
	if code := get(t, h, "admin-token", "GET", "/ui/api/queue", "", &q); code != 200 {
		t.Fatalf("admin queue: %d", code)
	}
	if q.Total != 3 || len(q.Jobs) != 3 {
		t.Fatalf("admin sees %d jobs, want 3: %+v", q.Total, q.Jobs)
	}
	// Running first, then the waiting one.
	if q.Jobs[2].ID != "a2" || q.Jobs[2].State != StatePending {
		t.Errorf("last row %+v, want the waiting a2", q.Jobs[2])
	}
	var aq QueuePage
	get(t, h, "alice-token", "GET", "/ui/api/queue", "", &aq)
	for _, j := range aq.Jobs {
		if j.Tenant != "alice" {
			t.Errorf("alice sees %s of %s", j.ID, j.Tenant)
		}
	}
	if aq.Total != 2 {
		t.Errorf("alice sees %d jobs, want 2", aq.Total)
	}
	var cp ClusterPage
	get(t, h, "alice-token", "GET", "/ui/api/cluster", "", &cp)
	own, other := 0, 0
	for _, n := range cp.Nodes {
		for _, g := range n.GPUs {
			switch {
			case g.Tenant == "alice" && g.Job == "a1":
				own++
			case g.Tenant == "(other tenant)" && g.Job == "":
				other++
			case g.Job != "":
				t.Errorf("alice sees GPU held by %s of %s", g.Job, g.Tenant)
			}
		}
	}
	if own != 4 || other != 2 {
		t.Errorf("alice sees %d own and %d other GPUs, want 4 and 2", own, other)
	}
	if cp.Summary.GPUs != 8 || cp.Summary.Allocated != 6 {
		t.Errorf("summary %+v: want 8 GPUs, 6 allocated", cp.Summary)
	}
	if code := get(t, h, "alice-token", "GET", "/ui/api/jobs/b1", "", nil); code != http.StatusNotFound {
		t.Errorf("alice reading bob's job: %d, want 404", code)
	}
	var tn struct{ Tenants []TenantRow }
	get(t, h, "alice-token", "GET", "/ui/api/tenants", "", &tn)
	if len(tn.Tenants) != 1 || tn.Tenants[0].Name != "alice" || tn.Tenants[0].InUse != 4 || tn.Tenants[0].WaitingGPUs != 8 {
		t.Errorf("alice's tenants view %+v", tn.Tenants)
	}
}

func TestPagingAndBadInput(t *testing.T) {
	src := newEngineSource(t, "1x2:t4", "fifo")
	for i := 0; i < 25; i++ {
		src.submit(t, fmt.Sprintf("j%02d", i), "alice", 1, 100, 0)
	}
	src.round(t)
	h := New(src, Options{}).Handler()
	var seen []string
	for off := 0; off < 25; off += 10 {
		var q QueuePage
		get(t, h, "admin-token", "GET", fmt.Sprintf("/ui/api/queue?offset=%d&limit=10", off), "", &q)
		if q.Total != 25 {
			t.Fatalf("total %d, want 25", q.Total)
		}
		for _, j := range q.Jobs {
			seen = append(seen, j.ID)
		}
	}
	if len(seen) != 25 {
		t.Fatalf("pages gave %d jobs, want 25", len(seen))
	}
	// Two run; the rest wait in submission order (FIFO).
	for k := 2; k < 25; k++ {
		if seen[k] != fmt.Sprintf("j%02d", k) {
			t.Errorf("row %d is %s, want j%02d", k, seen[k], k)
		}
	}
	for _, bad := range []string{"offset=-1", "limit=0", "limit=5000", "state=sleeping", "offset=x"} {
		if code := get(t, h, "admin-token", "GET", "/ui/api/queue?"+bad, "", nil); code != http.StatusBadRequest {
			t.Errorf("%s: status %d, want 400", bad, code)
		}
	}
	if code := get(t, h, "admin-token", "POST", "/ui/api/whatif", `{"policy": "no-such-policy"}`, nil); code != http.StatusBadRequest {
		t.Errorf("unknown what-if policy: %d, want 400", code)
	}
	if code := get(t, h, "admin-token", "POST", "/ui/api/whatif", `{"polcy": "fifo"}`, nil); code != http.StatusBadRequest {
		t.Errorf("misspelt what-if field: %d, want 400", code)
	}
}

func TestPredictAndRisk(t *testing.T) {
	now := time.Unix(1000, 0)
	at := func(s float64) *time.Time { x := now.Add(seconds(s)); return &x }
	for _, c := range []struct {
		name string
		j    Job
		want string
	}{
		{"running, finishes in time", Job{State: StateRunning, RemainingS: 100, Deadline: at(200)}, "ok"},
		{"running, late", Job{State: StateRunning, RemainingS: 300, Deadline: at(200)}, "late"},
		{"running, within a tenth", Job{State: StateRunning, RemainingS: 100, Deadline: at(105)}, "tight"},
		{"waiting, predicted late", Job{State: StatePending, RemainingS: 100, PredictedStart: at(150), Deadline: at(200)}, "late"},
		{"waiting, no prediction but cannot make it", Job{State: StatePending, RemainingS: 300, Deadline: at(200)}, "late"},
		{"waiting, no prediction", Job{State: StatePending, RemainingS: 10, Deadline: at(200)}, "unknown"},
		{"finished late", Job{State: "finished", Ended: at(300), Deadline: at(200)}, "missed"},
		{"no deadline", Job{State: StateRunning, RemainingS: 10}, ""},
	} {
		j := c.j
		predict(&j, now)
		if j.Risk != c.want {
			t.Errorf("%s: risk %q, want %q", c.name, j.Risk, c.want)
		}
	}
}

func TestUsageAndTenants(t *testing.T) {
	base := time.Unix(0, 0)
	at := func(h float64) time.Time { return base.Add(time.Duration(h * float64(time.Hour))) }
	samples := []Sample{
		{Time: at(0), Up: 8, Allocated: 4, Useful: 2, Tenants: map[string]int{"a": 4}},
		{Time: at(1), Up: 8, Allocated: 8, Useful: 8, Tenants: map[string]int{"a": 2, "b": 6}},
	}
	u := usage(samples, at(0), at(3))
	// 1 h at 4 allocated + 2 h at 8; useful 1 h x 2 + 2 h x 8.
	if u.AllocatedGPUh != 20 || u.UsefulGPUh != 18 || u.IdleAllocatedGPUh != 2 || u.UpGPUh != 24 {
		t.Errorf("usage %+v", u)
	}
	snap := &Snapshot{Quotas: map[string]int{"a": 6, "b": 2}, Jobs: []Job{
		{ID: "1", Tenant: "a", State: StateRunning, Held: 2},
		{ID: "2", Tenant: "b", State: StateRunning, Held: 6},
		{ID: "3", Tenant: "c", State: StatePending, GPUs: 3},
	}}
	rows := tenants(snap, samples, at(3))
	want := map[string]TenantRow{
		"a": {Name: "a", Quota: 6, InUse: 2, Lent: 4, Running: 1, GPUHours: 4 + 2*2},
		"b": {Name: "b", Quota: 2, InUse: 6, Borrowed: 4, Running: 1, GPUHours: 6 * 2},
		"c": {Name: "c", Waiting: 1, WaitingGPUs: 3},
	}
	if len(rows) != 3 {
		t.Fatalf("rows %+v", rows)
	}
	for _, r := range rows {
		if r != want[r.Name] {
			t.Errorf("tenant %s: %+v, want %+v", r.Name, r, want[r.Name])
		}
	}
	// On tide serve a quota (max_gpus) caps its tenant only: a tenant
	// without one borrows nothing, and nobody lends.
	serve := &Snapshot{Quotas: map[string]int{"a": 6}, Unquoted: true, Jobs: []Job{
		{ID: "1", Tenant: "a", State: StateRunning, Held: 2},
		{ID: "2", Tenant: "c", State: StateRunning, Held: 5},
	}}
	for _, r := range tenants(serve, nil, at(3)) {
		if r.Borrowed != 0 || r.Lent != 0 {
			t.Errorf("tide serve, tenant %s: borrowed %d, lent %d; want none", r.Name, r.Borrowed, r.Lent)
		}
	}
}

// TestWhatIf replays a queue where SRTF must beat FIFO on mean JCT: a long
// job ahead of short ones on a one-GPU cluster. A round of a fractional
// length (0.3 s, as tide serve's default) is replayed as it is: the
// simulator once looped forever on it and the console rounded it.
func TestWhatIf(t *testing.T) {
	for _, round := range []float64{60, 0.3} {
		t.Run(fmt.Sprintf("round=%gs", round), func(t *testing.T) {
			src := newEngineSource(t, "1x1:t4", "fifo")
			src.roundS = round
			src.submit(t, "long", "alice", 1, 1000, 0)
			for i := 0; i < 3; i++ {
				src.submit(t, fmt.Sprintf("short%d", i), "bob", 1, 10, 0)
			}
			h := New(src, Options{}).Handler()
			var w WhatIf
			if code := get(t, h, "admin-token", "POST", "/ui/api/whatif", `{"policy": "srtf"}`, &w); code != 200 {
				t.Fatalf("what-if: %d", code)
			}
			if w.Base != "fifo" || w.Alt != "srtf" || w.Jobs != 4 || len(w.Rows) != 4 {
				t.Fatalf("what-if %+v", w)
			}
			// FIFO: long ends at 1000, the shorts at 1010, 1020, 1030 (mean
			// 1015); SRTF: shorts at 10, 20, 30, long at 1030 (mean 272.5).
			// Rounds fall every round s, so allow for a round's delay per job.
			if !(w.AltStats.Mean < w.BaseStats.Mean/2) {
				t.Errorf("SRTF mean JCT %.0f s not well below FIFO's %.0f s", w.AltStats.Mean, w.BaseStats.Mean)
			}
			// With short rounds FIFO's JCTs from submission (1 s apart, the
			// replay starting at the last) are 1003, 1012, 1021, 1030 s.
			if round < 1 && (w.BaseStats.Mean < 1016.5 || w.BaseStats.Mean > 1017.5) {
				t.Errorf("FIFO mean JCT %.2f s with %g s rounds, want 1016.5 s within a second", w.BaseStats.Mean, round)
			}
			var wb WhatIf
			get(t, h, "bob-token", "POST", "/ui/api/whatif", `{"policy": "srtf"}`, &wb)
			if len(wb.Rows) != 3 {
				t.Errorf("bob's what-if shows %d rows, want his 3", len(wb.Rows))
			}
			for _, r := range wb.Rows {
				if r.Tenant != "bob" {
					t.Errorf("bob sees %s of %s", r.ID, r.Tenant)
				}
			}
		})
	}
}

func TestPageAndHeaders(t *testing.T) {
	src := newEngineSource(t, "1x1:t4", "fifo")
	h := New(src, Options{}).Handler()
	for _, path := range []string{"/", "/ui/app.js", "/ui/app.css", "/ui/uplot.css"} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		if rec.Code != 200 || rec.Body.Len() == 0 {
			t.Errorf("%s: %d, %d bytes", path, rec.Code, rec.Body.Len())
		}
		if csp := rec.Header().Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("%s: CSP %q", path, csp)
		}
		if strings.Contains(rec.Body.String(), "://cdn") || strings.Contains(rec.Body.String(), "https://unpkg") {
			t.Errorf("%s refers to a CDN", path)
		}
	}
}

// snapshotsSeen is a source that says when it has given a snapshot.
type snapshotsSeen struct {
	*engineSource
	given chan struct{}
}

func (s *snapshotsSeen) Snapshot() (*Snapshot, error) {
	snap, err := s.engineSource.Snapshot()
	select {
	case s.given <- struct{}{}:
	default:
	}
	return snap, err
}

// TestStream: a stream opens with the current digest and sends another
// when a job is submitted, never the same digest twice in a row. The
// submission comes once the console has looked for changes with the
// stream open: its first look, with nothing changed, sent the stream's
// first digest again (seen under load, where a look fell between the
// first event and the submission: 'update with an unchanged digest').
func TestStream(t *testing.T) {
	src := &snapshotsSeen{newEngineSource(t, "1x2:t4", "fifo"), make(chan struct{}, 1)}
	c := New(src, Options{Tick: 10 * time.Millisecond, MaxAge: time.Millisecond})
	srv := httptest.NewServer(c.Handler())
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go c.Run(ctx)
	req, _ := http.NewRequest("GET", srv.URL+"/ui/api/stream", nil)
	req.Header.Set("Authorization", "Bearer admin-token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("content type %q", ct)
	}
	events := make(chan Update, 8)
	go func() {
		buf := make([]byte, 4096)
		var acc string
		for {
			n, err := resp.Body.Read(buf)
			acc += string(buf[:n])
			for {
				i := strings.Index(acc, "\n\n")
				if i < 0 {
					break
				}
				block := acc[:i]
				acc = acc[i+2:]
				if _, data, ok := strings.Cut(block, "data: "); ok {
					var u Update
					if json.Unmarshal([]byte(data), &u) == nil {
						events <- u
					}
				}
			}
			if err != nil {
				close(events)
				return
			}
		}
	}()
	first := <-events
	// Snapshots taken from now on are Run's, with the stream open: at most
	// one of two is record's, at Run's start (the next is SampleEvery
	// away), so the second is taken by a look for changes.
	select {
	case <-src.given:
	default:
	}
	for range 2 {
		select {
		case <-src.given:
		case <-time.After(60 * time.Second):
			t.Fatal("the console took no snapshot 60 s after the stream opened")
		}
	}
	src.mu.Lock()
	src.submit(t, "new", "alice", 1, 100, 0)
	src.mu.Unlock()
	select {
	case u := <-events:
		if u.Digest == first.Digest {
			t.Errorf("update with an unchanged digest %s", u.Digest)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no update 30 s after a submission")
	}
	c.Close()
	for range events { // the stream ends at Close
	}
}

// TestQueueOrder: the queue says whose order it shows. Under FIFO (which
// numbers the waiting jobs) it is the policy's, also when none of the jobs
// waiting now has a position yet (submitted or released since the last
// round; the held job of the browser test once made the console claim
// FIFO gives no order); with no job waiting it says so; under a policy
// that numbers none (DRF) the console numbers them in submission order.
func TestQueueOrder(t *testing.T) {
	queue := func(h http.Handler) QueuePage {
		t.Helper()
		var q QueuePage
		if code := get(t, h, "admin-token", "GET", "/ui/api/queue", "", &q); code != 200 {
			t.Fatalf("queue: %d", code)
		}
		return q
	}
	positions := func(q QueuePage) map[string]int {
		out := map[string]int{}
		for _, j := range q.Jobs {
			if j.State == StatePending {
				out[j.ID] = j.Position
			}
		}
		return out
	}
	src := newEngineSource(t, "1x4:t4", "fifo")
	c := New(src, Options{MaxAge: time.Nanosecond})
	h := c.Handler()
	src.submit(t, "big", "alice", 4, 600, 0)
	src.round(t)
	if q := queue(h); q.PositionBy != "none" {
		t.Errorf("no job waits: position_by %q, want none", q.PositionBy)
	}
	src.submit(t, "b", "alice", 2, 600, 0)
	src.submit(t, "c", "bob", 2, 600, 0)
	src.round(t)
	q := queue(h)
	if p := positions(q); q.PositionBy != "policy" || p["b"] != 1 || p["c"] != 2 {
		t.Errorf("two wait under FIFO: position_by %q, positions %v; want policy, b 1 and c 2", q.PositionBy, p)
	}
	// b and c leave; d arrives and no round has run since.
	for _, id := range []string{"b", "c"} {
		if err := src.eng.Fail(id); err != nil {
			t.Fatal(err)
		}
	}
	src.submit(t, "d", "bob", 1, 600, 0)
	q = queue(h)
	if q.PositionBy != "policy" {
		t.Errorf("d arrived after FIFO's round: position_by %q, want policy", q.PositionBy)
	}
	for _, j := range q.Jobs {
		if j.ID == "d" && (j.Position != 0 || !strings.Contains(j.Reason, "not in the policy's order yet")) {
			t.Errorf("d before a round: position %d, reason %q; want none, and why", j.Position, j.Reason)
		}
	}
	src.round(t)
	if p := positions(queue(h)); p["d"] != 1 {
		t.Errorf("after the round d has position %d, want 1", p["d"])
	}

	// DRF gives no positions: the console numbers in submission order.
	drf := newEngineSource(t, "1x4:t4", "drf")
	drf.submit(t, "x", "alice", 4, 600, 0)
	drf.submit(t, "y", "bob", 4, 600, 0)
	drf.submit(t, "z", "alice", 4, 600, 0)
	drf.round(t)
	q = queue(New(drf, Options{}).Handler())
	p := positions(q)
	if q.PositionBy != "submission" || len(p) != 2 {
		t.Fatalf("DRF: position_by %q, waiting %v; want submission and two waiting", q.PositionBy, p)
	}
	var want []string // the waiting two, in submission order
	for _, id := range []string{"x", "y", "z"} {
		if _, ok := p[id]; ok {
			want = append(want, id)
		}
	}
	first, second := want[0], want[1]
	if p[first] != 1 || p[second] != 2 {
		t.Errorf("DRF positions %v: want %s 1, %s 2 (submission order)", p, first, second)
	}
}

// TestBroadcastKeepsNewest: a stream reader too slow to take one update
// before the next is broadcast gets the newest, not the older one (a page
// left on the older digest was never told of the last change).
func TestBroadcastKeepsNewest(t *testing.T) {
	c := &Console{subs: map[chan Update]bool{}}
	ch := make(chan Update, 1)
	c.subs[ch] = true
	for _, d := range []uint64{1, 2, 3} {
		c.broadcast(&view{snap: &Snapshot{Time: time.Unix(int64(d), 0)}, digest: d})
	}
	select {
	case u := <-ch:
		if want := hex(3); u.Digest != want {
			t.Errorf("pending update %s: want the newest, %s", u.Digest, want)
		}
	default:
		t.Fatal("no update pending")
	}
}
