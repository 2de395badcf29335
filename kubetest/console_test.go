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
}
