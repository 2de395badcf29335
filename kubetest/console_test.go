package kubetest

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	corev1 "k8s.io/api/core/v1"

	"github.com/tide-sched/tide/console/browsertest"
	"github.com/tide-sched/tide/kube"
)

// TestKubeConsole: tide kube's web console (--ui-listen) shows what the
// scheduler decided on a real API server, through the informers: nodes and
// GPUs with their holders, the queue with the waiting job, tenants with
// their quotas; a tenant sees its own jobs only. The console's browser
// test runs against tide serve (console/browser_test.go); both executors
// serve the same page, and this test checks the kube side's data.
func TestKubeConsole(t *testing.T) {
	e := startEnv(t)
	s := e.scenario(t, "tide-console", "team-a", "team-b")
	s.node("console-1", 4, "a100")
	s.node("console-2", 4, "a100")
	sch, _ := s.start(kube.Config{Quotas: map[string]int{"team-a": 4, "team-b": 4}, Borrow: false})

	dir := t.TempDir()
	toks := filepath.Join(dir, "tokens")
	admin, teamA := "admin-token-0123456789", "team-a-token-0123456789"
	if err := os.WriteFile(toks, []byte("# console tokens\nadmin "+admin+"\nteam-a "+teamA+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ui := kube.UIFlags{Listen: "127.0.0.1:0", Tokens: toks}
	url, err := ui.Start(ctx, sch)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := (&kube.UIFlags{Listen: "127.0.0.1:0"}).Start(ctx, sch); err == nil || !strings.Contains(err.Error(), "--ui-tokens") {
		t.Errorf("--ui-listen without --ui-tokens: %v", err)
	}

	s.pod("team-a", "a-0", 4)
	s.pod("team-b", "b-0", 2)
	s.pod("team-a", "a-1", 2) // over team-a's quota, no borrowing: waits
	s.pod("team-b", "b-1", 1)
	eventually(t, 30*time.Second, func() (bool, string) {
		s.kubelet("team-a", "team-b")
		b := bound(s.pods("team-a"), "a-0", "a-1")
		c := bound(s.pods("team-b"), "b-0", "b-1")
		return len(b) == 1 && len(c) == 2, fmt.Sprintf("bound %v %v, want a-0, b-0 and b-1", b, c)
	})

	get := func(tok, path string, out any) int {
		t.Helper()
		req, _ := http.NewRequest("GET", strings.TrimSuffix(url, "/")+path, nil)
		if tok != "" {
			req.Header.Set("Authorization", "Bearer "+tok)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if out != nil && resp.StatusCode == 200 {
			if err := json.Unmarshal(body, out); err != nil {
				t.Fatalf("%s: %v\n%s", path, err, body)
			}
		}
		return resp.StatusCode
	}
	if code := get("", "/", nil); code != 200 {
		t.Errorf("GET /: %d", code)
	}
	if code := get("", "/ui/api/queue", nil); code != 401 {
		t.Errorf("queue without a token: %d, want 401", code)
	}

	type job struct {
		ID, Tenant, State string
		Held, Position    int
		Working           bool
	}
	var q struct{ Jobs []job }
	eventually(t, 30*time.Second, func() (bool, string) {
		// A pod bound after the first wait's last kubelet pass is still
		// Pending: run the kubelet here too.
		s.kubelet("team-a", "team-b")
		q.Jobs = nil
		get(admin, "/ui/api/queue?state=active", &q)
		running, waiting, working := 0, 0, 0
		for _, j := range q.Jobs {
			switch j.State {
			case "running":
				running++
				if j.Working {
					working++
				}
			case "pending":
				waiting++
				if j.ID != "pods/team-a/a-1" || j.Position != 1 {
					return false, fmt.Sprintf("waiting %+v, want pods/team-a/a-1 at position 1", j)
				}
			}
		}
		return running == 3 && waiting == 1 && working == 3, fmt.Sprintf("queue %+v: want 3 running (pods Running) and 1 waiting", q.Jobs)
	})

	var cl struct {
		Summary struct{ GPUs, Allocated, Useful int }
		Nodes   []struct {
			Name string
			GPUs []struct{ Job, Tenant string }
		}
	}
	get(admin, "/ui/api/cluster", &cl)
	if cl.Summary.GPUs != 8 || cl.Summary.Allocated != 7 || cl.Summary.Useful != 7 || len(cl.Nodes) != 2 {
		t.Errorf("cluster %+v: want 2 nodes, 8 GPUs, 7 allocated and useful", cl.Summary)
	}
	var ca struct {
		Nodes []struct {
			GPUs []struct{ Job, Tenant string }
		}
	}
	get(teamA, "/ui/api/cluster", &ca)
	own, other := 0, 0
	for _, n := range ca.Nodes {
		for _, g := range n.GPUs {
			switch {
			case g.Tenant == "team-a" && g.Job == "pods/team-a/a-0":
				own++
			case g.Tenant == "(other tenant)" && g.Job == "":
				other++
			case g.Job != "":
				t.Errorf("team-a sees a GPU of %s (%s)", g.Job, g.Tenant)
			}
		}
	}
	if own != 4 || other != 3 {
		t.Errorf("team-a sees %d own and %d other GPUs, want 4 and 3", own, other)
	}
	var qa struct{ Jobs []job }
	get(teamA, "/ui/api/queue?state=all", &qa)
	if len(qa.Jobs) != 2 {
		t.Errorf("team-a's queue %+v, want its 2 jobs", qa.Jobs)
	}
	for _, j := range qa.Jobs {
		if j.Tenant != "team-a" {
			t.Errorf("team-a sees %s of %s", j.ID, j.Tenant)
		}
	}
	if code := get(teamA, "/ui/api/jobs/pods%2Fteam-b%2Fb-0", nil); code != 404 {
		t.Errorf("team-a reading team-b's job: %d, want 404", code)
	}
	var tn struct {
		Tenants []struct {
			Name        string `json:"name"`
			Quota       int    `json:"quota"`
			InUse       int    `json:"in_use"`
			WaitingGPUs int    `json:"waiting_gpus"`
		} `json:"tenants"`
	}
	get(admin, "/ui/api/tenants", &tn)
	got := map[string][3]int{}
	for _, r := range tn.Tenants {
		got[r.Name] = [3]int{r.Quota, r.InUse, r.WaitingGPUs}
	}
	if got["team-a"] != [3]int{4, 4, 2} || got["team-b"] != [3]int{4, 3, 0} {
		t.Errorf("tenants (quota, in use, waiting GPUs) %v", got)
	}
	var w struct {
		Base, Alt string
		Rows      []struct{ ID string }
	}
	req, _ := http.NewRequest("POST", strings.TrimSuffix(url, "/")+"/ui/api/whatif", strings.NewReader(`{"policy": "srtf"}`))
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || json.Unmarshal(body, &w) != nil || w.Alt != "srtf" || len(w.Rows) != 4 {
		t.Errorf("what-if: %d %s", resp.StatusCode, body)
	}

	// GPUs tide cannot use: a cordoned node's are down, one a pod of
	// another scheduler holds is taken back; each says why.
	s.node("console-3", 2, "a100")
	s.editNode("console-3", func(n *corev1.Node) { n.Spec.Unschedulable = true })
	s.podWith("team-b", "other", 1, func(p *corev1.Pod) { p.Spec.SchedulerName = "someone-else" })
	s.bindTo("team-b", "other", "console-2")
	eventually(t, 30*time.Second, func() (bool, string) {
		s.kubelet("team-b")
		var cl struct {
			Nodes []struct {
				Name string
				GPUs []struct {
					Down, Reclaimed bool
					Why, Job        string
				}
			}
		}
		get(admin, "/ui/api/cluster", &cl)
		down, taken, held := map[string]int{}, map[string]int{}, 0
		for _, n := range cl.Nodes {
			for _, g := range n.GPUs {
				switch {
				case g.Down && strings.Contains(g.Why, "cordoned"):
					down[n.Name]++
				case g.Reclaimed && strings.Contains(g.Why, "tide does not schedule"):
					taken[n.Name]++
				case g.Job != "":
					held++
				}
			}
		}
		ok := len(down) == 1 && down["console-3"] == 2 && len(taken) == 1 && taken["console-2"] == 1 && held == 7
		return ok, fmt.Sprintf("down %v, taken back %v, held by jobs %d: want console-3's 2 down, 1 taken back on console-2, 7 held\n%+v", down, taken, held, cl.Nodes)
	})

	t.Run("browser", func(t *testing.T) { kubeConsoleBrowser(t, strings.TrimSuffix(url, "/"), admin, teamA) })

	// --ui-history: the utilisation history survives a restart of the
	// console (its first sample is taken as it starts), the time between
	// marked as a gap.
	t.Run("history", func(t *testing.T) {
		hist := filepath.Join(dir, "history")
		start := func() (string, context.CancelFunc) {
			t.Helper()
			hctx, stop := context.WithCancel(ctx)
			u, err := (&kube.UIFlags{Listen: "127.0.0.1:0", Tokens: toks, History: hist}).Start(hctx, sch)
			if err != nil {
				stop()
				t.Fatal(err)
			}
			return strings.TrimSuffix(u, "/"), stop
		}
		_, stop := start()
		eventually(t, 30*time.Second, func() (bool, string) {
			data, err := os.ReadFile(hist)
			return err == nil && strings.Count(string(data), "\n") >= 1, fmt.Sprintf("history file: %q %v", data, err)
		})
		stop()
		u2, stop2 := start()
		defer stop2()
		var us struct {
			Samples []struct {
				Allocated int
				Gap       bool
			}
		}
		url = u2
		if code := get(admin, "/ui/api/usage?hours=1", &us); code != 200 {
			t.Fatalf("usage after the restart: %d", code)
		}
		gaps, before := 0, 0
		for k, smp := range us.Samples {
			switch {
			case smp.Gap:
				gaps++
			case gaps == 0 && smp.Allocated == 7:
				before++
			case gaps == 0:
				t.Errorf("sample %d before the restart: %d GPUs allocated, want 7", k, smp.Allocated)
			}
		}
		if before < 1 || gaps != 1 {
			t.Errorf("usage after a restart: %d samples from before it and %d gaps, want 1 or more and 1: %+v", before, gaps, us.Samples)
		}
	})
}

// kubeConsoleBrowser loads every view of tide kube's console in a real
// Chromium (TestKubeConsole's cluster and pods), checks what each shows
// and keeps screenshots in kubetest/testdata/out/.
func kubeConsoleBrowser(t *testing.T, url, admin, teamA string) {
	exe := browsertest.Chromium(t)
	b := browsertest.New(t, exe, 1280, 900)
	browsertest.Login(t, b, url, admin)

	// Cluster: three nodes; a-0's 4 GPUs, the cordoned node's 2 down and
	// the GPU another scheduler's pod holds taken back, each marked apart.
	browsertest.WaitText(t, b, ".nodes", "console-3")
	labels := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('.gpus .cell')].map(c => c.className + '|' + c.getAttribute('aria-label'))`)
	count := func(sub string) int {
		n := 0
		for _, l := range labels {
			if strings.Contains(l, sub) {
				n++
			}
		}
		return n
	}
	if len(labels) != 10 || count("cell down|console-3") != 2 || count("cell taken|console-2") != 1 || count("job pods/team-a/a-0") != 4 {
		t.Errorf("cluster view's GPUs %q: want 10, console-3's 2 down, 1 taken back on console-2, 4 of a-0", labels)
	}
	if legend := browsertest.Text(t, b, ".legend"); !strings.Contains(legend, "down") || !strings.Contains(legend, "taken back") {
		t.Errorf("the legend does not explain down and taken-back GPUs: %q", legend)
	}
	browsertest.Shot(t, b, "kube-cluster")

	// Queue: the waiting pod first in the policy's order; tide kube is
	// read-only, so no buttons.
	browsertest.Click(t, b, `nav a[href="#/queue"]`)
	row := browsertest.WaitText(t, b, "#row-pods\\/team-a\\/a-1", "pending")
	if cells := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('#row-pods\\/team-a\\/a-1 td')].map(c => c.innerText)`); len(cells) < 4 || cells[0] != "1" {
		t.Errorf("the waiting pod's row %q: want position 1", cells)
	}
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll('table.queue button').length`); n != 0 {
		t.Errorf("tide kube's queue offers %d buttons; it is read-only", n)
	}
	q := browsertest.Text(t, b, "table.queue")
	for _, want := range []string{"pods/team-a/a-0", "pods/team-b/b-0", "pods/team-b/b-1", "running"} {
		if !strings.Contains(q, want) {
			t.Errorf("queue lacks %q:\n%s", want, q)
		}
	}
	_ = row
	browsertest.Shot(t, b, "kube-queue")

	// Job: its pods as events.
	// (Navigated to: a click on the queue's link can land on a row the
	// live update has just moved.)
	if err := chromedp.Run(b, chromedp.Navigate(url+"/#/job/pods%2Fteam-a%2Fa-0")); err != nil {
		t.Fatal(err)
	}
	browsertest.WaitText(t, b, "h1", "Job pods/team-a/a-0")
	if ev := browsertest.WaitText(t, b, "details", "pod Running"); !strings.Contains(ev, "a-0 on console-") {
		t.Errorf("job events lack the pod and its node:\n%s", ev)
	}
	// Its timeline: the launch the engine knows, running, and its start.
	if bars := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('.timeline .bar')].map(e => e.getAttribute('aria-label'))`); len(bars) != 1 || !strings.Contains(bars[0], "running") {
		t.Errorf("the running job's timeline shows launches %q, want one, running", bars)
	}
	if m := browsertest.WaitText(t, b, ".moments", "started"); !strings.Contains(m, "first start") {
		t.Errorf("the timeline's list lacks the first start:\n%s", m)
	}
	browsertest.Shot(t, b, "kube-job")

	// Tenants, utilisation, what-if.
	browsertest.Click(t, b, `nav a[href="#/tenants"]`)
	browsertest.WaitText(t, b, "main h1", "Tenants") // not the job view's tables
	if tt := browsertest.WaitText(t, b, "main table", "team-a"); !strings.Contains(tt, "team-b") {
		t.Errorf("tenants view lacks team-b:\n%s", tt)
	}
	browsertest.Shot(t, b, "kube-tenants")
	browsertest.Click(t, b, `nav a[href="#/usage"]`)
	browsertest.WaitText(t, b, "main", "idle-allocated")
	browsertest.Shot(t, b, "kube-usage")
	if cmp := browsertest.WhatIf(t, b, "srtf"); !strings.Contains(cmp, "mean") {
		t.Errorf("what-if comparison:\n%s", cmp)
	}
	browsertest.Shot(t, b, "kube-whatif")

	// A tenant sees its own pods and the cluster's shape only.
	bt := browsertest.New(t, exe, 1280, 900)
	browsertest.Login(t, bt, url, teamA)
	browsertest.WaitText(t, bt, ".nodes", "console-1")
	if n := browsertest.Eval[int](t, bt, `document.querySelectorAll('.gpus .cell[data-other=true]').length`); n != 3 {
		t.Errorf("team-a sees %d GPUs as another tenant's, want team-b's 3", n)
	}
	browsertest.Shot(t, bt, "kube-tenant-cluster")
	browsertest.Click(t, bt, `nav a[href="#/queue"]`)
	if q := browsertest.WaitText(t, bt, "table.queue", "pods/team-a/a-1"); strings.Contains(q, "team-b") {
		t.Errorf("team-a's queue shows team-b's pods:\n%s", q)
	}
}
