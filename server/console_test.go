package server

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/console"
)

// TestConsoleMounted: tide serve serves the web console at / and its data
// under /ui/api/, authenticated by the API's tokens.
func TestConsoleMounted(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	alice, err := ts.admin.CreateTenant(context.Background(), "alice")
	if err != nil {
		t.Fatal(err)
	}
	get := func(path, tok string) (int, map[string]any) {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.url+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var out map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&out)
		return resp.StatusCode, out
	}
	if code, _ := get("/", ""); code != 200 {
		t.Errorf("GET /: %d, want the console's page", code)
	}
	if code, _ := get("/ui/api/summary", "not-a-token"); code != 401 {
		t.Errorf("unknown token: %d, want 401", code)
	}
	for _, c := range []struct {
		tok, tenant string
		admin       bool
	}{{ts.token, "admin", true}, {alice.Token, "alice", false}} {
		code, out := get("/ui/api/summary", c.tok)
		me, _ := out["me"].(map[string]any)
		if code != 200 || me["tenant"] != c.tenant || me["admin"] != c.admin {
			t.Errorf("summary as %s: %d %v", c.tenant, code, out)
		}
	}
	if code, _ := get("/v1/nothing", ts.token); code != 404 {
		t.Errorf("unknown API path: %d, want 404", code)
	}
}

// TestConsoleHistorySurvivesRestart: the console's utilisation history is
// kept in the database, so after a restart the usage view still shows the
// GPUs a job held before it, and the time the server was down as a gap.
func TestConsoleHistorySurvivesRestart(t *testing.T) {
	dir := t.TempDir()
	cfg := testConfig(t, dir)
	cfg.ConsoleSample = 50 * time.Millisecond
	usage := func(ts *testServer) console.Usage {
		t.Helper()
		req, _ := http.NewRequest("GET", ts.url+"/ui/api/usage?hours=1", nil)
		req.Header.Set("Authorization", "Bearer "+ts.token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var u console.Usage
		if err := json.NewDecoder(resp.Body).Decode(&u); err != nil || resp.StatusCode != 200 {
			t.Fatalf("usage: %d %v", resp.StatusCode, err)
		}
		return u
	}
	allocated := func(samples []console.Sample, before time.Time) int {
		n := 0
		for _, s := range samples {
			if s.Time.Before(before) && s.Allocated == 2 {
				n++
			}
		}
		return n
	}
	s1 := startServer(t, cfg)
	j := submit(t, s1.admin, countSpec(2, 100, 20*time.Millisecond))
	waitJob(t, s1.admin, j.ID, 10*time.Second, "running", inState(api.StateRunning))
	deadline := time.Now().Add(20 * time.Second)
	for allocated(usage(s1).Samples, time.Now()) < 3 {
		if time.Now().After(deadline) {
			t.Fatalf("no 3 samples with 2 GPUs allocated after 20 s: %+v", usage(s1).Samples)
		}
		time.Sleep(50 * time.Millisecond)
	}
	before := usage(s1)
	s1.close(t)
	stopped := time.Now()

	s2 := startServer(t, cfg)
	defer s2.close(t)
	after := usage(s2)
	// The usage view ends with the state now, not a kept sample.
	kept := before.Samples[:len(before.Samples)-1]
	if got, want := allocated(after.Samples, stopped), allocated(kept, stopped); got < want || want < 2 {
		t.Errorf("after the restart the history shows %d samples with 2 GPUs allocated before it, want the %d shown before", got, want)
	}
	gaps := 0
	for _, s := range after.Samples {
		if s.Gap {
			gaps++
		}
	}
	if gaps != 1 {
		t.Errorf("%d gaps in the history after one restart, want 1", gaps)
	}
	if after.AllocatedGPUh <= 0 {
		t.Errorf("allocated GPU-hours after the restart %v, want those before it", after.AllocatedGPUh)
	}
}

// TestConsoleReplayAsScheduled: the console's replay of the queue (its
// forecast of starts, the what-if) schedules as tide serve's rounds do: a
// tenant's quota holds back its second job although GPUs are free, and
// held jobs and jobs waiting for others are left out (nothing in the
// replay would let them start).
func TestConsoleReplayAsScheduled(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	alice, err := ts.admin.CreateTenantWith(ctx, &api.NewTenant{Name: "alice", Limits: &api.Limits{MaxGPUs: 2}})
	if err != nil {
		t.Fatal(err)
	}
	bob, err := ts.admin.CreateTenant(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	ac, bc := api.NewClient(ts.url, alice.Token), api.NewClient(ts.url, bob.Token)
	long := countSpec(2, 100000, 100*time.Millisecond)
	long.EstimateS = 1000
	first := submit(t, ac, long)
	waitJob(t, ac, first.ID, 30*time.Second, "running", inState(api.StateRunning))
	short := countSpec(2, 1000, 100*time.Millisecond)
	short.EstimateS = 100
	second := submit(t, ac, short) // over alice's quota: waits
	held := countSpec(1, 10, 100*time.Millisecond)
	held.Hold = true
	heldJob := submit(t, bc, held)
	after := countSpec(1, 10, 100*time.Millisecond)
	after.After = []string{heldJob.ID}
	afterJob := submit(t, bc, after)

	c := console.New(consoleSource{ts.Server}, console.Options{})
	var w console.WhatIf
	req, _ := http.NewRequest("POST", "/ui/api/whatif", strings.NewReader(`{"policy": "srtf"}`))
	req.Header.Set("Authorization", "Bearer "+ts.token)
	rec := httptest.NewRecorder()
	c.Handler().ServeHTTP(rec, req)
	if rec.Code != 200 {
		t.Fatalf("what-if: %d %s", rec.Code, rec.Body)
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &w); err != nil {
		t.Fatal(err)
	}
	rows := map[string]console.WhatIfRow{}
	for _, r := range w.Rows {
		rows[r.ID] = r
	}
	if _, ok := rows[heldJob.ID]; ok {
		t.Errorf("the held job %s is in the replay", heldJob.ID)
	}
	if _, ok := rows[afterJob.ID]; ok {
		t.Errorf("job %s, waiting for %s, is in the replay", afterJob.ID, heldJob.ID)
	}
	// Within alice's quota her two jobs (1,000 s and 100 s of work) never
	// run at once, under either policy: one of them ends after 1,100 s
	// (on the free GPUs, without the quota, both would end by 1,000 s).
	r1, ok1 := rows[first.ID]
	r2, ok2 := rows[second.ID]
	if !ok1 || !ok2 || w.Jobs != 2 {
		t.Fatalf("what-if replays %d jobs, rows %+v: want %s and %s", w.Jobs, w.Rows, first.ID, second.ID)
	}
	if last := max(r1.Base, r2.Base); last < 1050 {
		t.Errorf("under fifo alice's jobs end %.0f s and %.0f s after their submission: want one after both together's 1,100 s (her quota is 2 GPUs)", r1.Base, r2.Base)
	}
	if last := max(r1.Alt, r2.Alt); last < 1050 {
		t.Errorf("under srtf alice's jobs end %.0f s and %.0f s after their submission: want one after both together's 1,100 s (her quota is 2 GPUs)", r1.Alt, r2.Alt)
	}
}
