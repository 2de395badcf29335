package console_test

// Browser tests: a real `tide serve` (the binary, on fake GPUs, running the
// countjob example) and a real headless Chromium driven over the DevTools
// protocol (chromedp). They load every view, check what it shows, click
// through, and keep screenshots in testdata/out/ (ignored by git).
// Without Chromium (Debian's chromium; scripts/test installs it when it
// runs as root) they skip, saying so. TIDE_CHROMIUM names another browser.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/console/browsertest"
)

// binaries builds tide and the countjob example once per test binary.
var binDir string

func buildBinaries(t *testing.T) (tide, countjob string) {
	t.Helper()
	if binDir == "" {
		dir, err := os.MkdirTemp("", "tide-console-test")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][2]string{{"tide", "../cmd/tide"}, {"countjob", "../examples/countjob"}} {
			out, err := exec.Command("go", "build", "-o", filepath.Join(dir, b[0]), b[1]).CombinedOutput()
			if err != nil {
				t.Fatalf("building %s: %v\n%s", b[1], err, out)
			}
		}
		binDir = dir
	}
	return filepath.Join(binDir, "tide"), filepath.Join(binDir, "countjob")
}

func TestMain(m *testing.M) {
	code := m.Run()
	if binDir != "" {
		os.RemoveAll(binDir)
	}
	os.Exit(code)
}

// serve starts `tide serve` and returns its URL and admin token.
func serve(t *testing.T, tide string, args ...string) (url, token string) {
	t.Helper()
	dir := t.TempDir()
	// Jobs run as tide serve's own user (as root it would want a Unix user
	// per tenant).
	args = append([]string{"serve", "--single-user", "--data-dir", dir, "--listen", "127.0.0.1:0", "--round", "300ms",
		"--grace", "2s", "--stop-jobs-on-exit", "--log-level", "warn"}, args...)
	cmd := exec.Command(tide, args...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("tide serve exited: %v", err)
			}
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			t.Errorf("tide serve did not stop within 30 s of SIGINT")
		}
	})
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if _, rest, ok := strings.Cut(lines.Text(), "listening on "); ok {
			url, _, _ = strings.Cut(rest, " ")
			break
		}
	}
	if url == "" {
		t.Fatal("tide serve did not say where it listens")
	}
	go func() { _, _ = io.Copy(io.Discard, stdout) }()
	tok, err := os.ReadFile(filepath.Join(dir, "admin.token"))
	if err != nil {
		t.Fatal(err)
	}
	return url, strings.TrimSpace(string(tok))
}

// TestConsoleServe drives every view of the console of a real tide serve.
func TestConsoleServe(t *testing.T) {
	exe := browsertest.Chromium(t)
	tide, countjob := buildBinaries(t)
	url, adminTok := serve(t, tide, "--gpus", "fake:4:t4", "--policy", "fifo")
	ctx := context.Background()
	admin := api.NewClient(url, adminTok)
	alice, err := admin.CreateTenant(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := admin.CreateTenant(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	ac, bc := api.NewClient(url, alice.Token), api.NewClient(url, bob.Token)
	long := func(name string, gpus int, extra ...string) *api.JobSpec {
		cmd := append([]string{countjob, "-steps", "3000", "-step-time", "100ms"}, extra...)
		return &api.JobSpec{Name: name, Command: cmd, GPUs: gpus, EstimateS: 300}
	}
	run1, err := ac.Submit(ctx, long("train-a", 2))
	if err != nil {
		t.Fatal(err)
	}
	run2, err := bc.Submit(ctx, long("train-b", 2))
	if err != nil {
		t.Fatal(err)
	}
	wait1 := long("big", 4)
	wait1.Deadline = time.Now().Add(2 * time.Minute).UTC().Format(time.RFC3339)
	queued, err := ac.Submit(ctx, wait1)
	if err != nil {
		t.Fatal(err)
	}
	// Wait until both run (their processes write to their logs).
	for _, id := range []string{run1.ID, run2.ID} {
		deadline := time.Now().Add(60 * time.Second)
		for {
			j, err := admin.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if j.State == api.StateRunning && j.Started != nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("job %s not running after 60 s: %s", id, j.State)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	b := browsertest.New(t, exe, 1280, 900)

	// The login page refuses a bad token and says so.
	if err := chromedp.Run(b, chromedp.Navigate(url+"/"), chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", "not-a-token-0123456789", chromedp.ByID), chromedp.Click(`form button[type=submit]`, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	browsertest.WaitText(t, b, ".error", "not known")
	browsertest.Shot(t, b, "serve-login-refused")
	if s := browsertest.Eval[string](t, b, `location.href`); strings.Contains(s, "token") {
		t.Errorf("the token reached the URL: %s", s)
	}

	browsertest.Login(t, b, url, adminTok)
	if s := browsertest.Eval[string](t, b, `location.href + " " + document.cookie`); strings.Contains(s, adminTok) {
		t.Errorf("the token is in the URL or a cookie: %s", s)
	}

	// Cluster: 4 GPUs, 4 held by two tenants' jobs.
	browsertest.WaitText(t, b, "main", "Cluster")
	browsertest.WaitText(t, b, ".nodes", "t4")
	cells := browsertest.Eval[[]string](t, b, `[...document.querySelectorAll('.gpus .cell')].map(c => c.getAttribute('aria-label'))`)
	if len(cells) != 4 {
		t.Fatalf("cluster view shows %d GPU cells, want 4: %q", len(cells), cells)
	}
	held := 0
	for _, c := range cells {
		if strings.Contains(c, "job "+run1.ID) || strings.Contains(c, "job "+run2.ID) {
			held++
		}
	}
	if held != 4 {
		t.Errorf("cells %q: want all 4 held by %s and %s", cells, run1.ID, run2.ID)
	}
	browsertest.Shot(t, b, "serve-cluster")

	// Queue: the running jobs and the waiting one with its position,
	// reason-or-order, predicted start and deadline risk.
	browsertest.Click(t, b, `nav a[href="#/queue"]`)
	q := browsertest.WaitText(t, b, "table.queue", queued.ID)
	for _, want := range []string{run1.ID, run2.ID, "alice", "bob", "running", "pending"} {
		if !strings.Contains(q, want) {
			t.Errorf("queue does not show %q:\n%s", want, q)
		}
	}
	// Its row: position 1, a predicted start (FIFO's own, or the
	// console's forecast) and finish, and a deadline risk. The 4-GPU job cannot start
	// before the 300 s jobs end, so with its 2-minute deadline it is late.
	row := browsertest.WaitText(t, b, fmt.Sprintf(`#row-%s`, queued.ID), "in ")
	cellsOf := browsertest.Eval[[]string](t, b, fmt.Sprintf(`[...document.querySelectorAll('#row-%s td')].map(c => c.innerText)`, queued.ID))
	if len(cellsOf) < 10 || cellsOf[0] != "1" || !strings.HasPrefix(cellsOf[6], "in ") || !strings.HasPrefix(cellsOf[7], "in ") || !strings.Contains(cellsOf[9], "late") {
		t.Errorf("the waiting job's row lacks its position, predicted start and finish, or risk: %q", cellsOf)
	}
	_ = row
	browsertest.Shot(t, b, "serve-queue")

	// Hold and release the waiting job from the console: the server's
	// state follows each click.
	browsertest.Click(t, b, fmt.Sprintf(`button[aria-label="Hold %s"]`, queued.ID))
	browsertest.WaitText(t, b, "#row-"+queued.ID+" td:nth-child(4)", "held")
	if j, err := admin.Job(ctx, queued.ID); err != nil {
		t.Fatal(err)
	} else if !j.Held {
		t.Errorf("job %s is not held after the console's Hold (state %s)", queued.ID, j.State)
	}
	// No job waits now: the queue says so, not that FIFO gives no order
	// (it once did).
	browsertest.WaitText(t, b, "p.order", "No job waits")
	browsertest.Shot(t, b, "serve-queue-held")
	// Shown held jobs only, the queue lists it alone.
	showState := func(state string) {
		t.Helper()
		browsertest.Eval[bool](t, b, fmt.Sprintf(`(s => { s.value = %q; s.dispatchEvent(new Event('change', {bubbles: true})); return true })(document.querySelector('.controls select'))`, state))
	}
	showState("held")
	if err := chromedp.Run(b, chromedp.Poll(`document.querySelectorAll('table.queue tbody tr').length === 1`, nil, chromedp.WithPollingTimeout(90*time.Second))); err != nil {
		t.Errorf("the held jobs are not listed alone: %v\n%s", err, browsertest.Text(t, b, "table.queue"))
	} else if q := browsertest.Text(t, b, "table.queue tbody"); !strings.Contains(q, queued.ID) {
		t.Errorf("the held jobs: %q, want %s", q, queued.ID)
	}
	showState("active")
	browsertest.WaitText(t, b, "table.queue", run1.ID)
	browsertest.Click(t, b, fmt.Sprintf(`button[aria-label="Release %s"]`, queued.ID))
	browsertest.WaitText(t, b, "#row-"+queued.ID+" td:nth-child(4)", "pending")
	if j, err := admin.Job(ctx, queued.ID); err != nil {
		t.Fatal(err)
	} else if j.Held || j.State != api.StatePending {
		t.Errorf("job %s after the console's Release: held %v, state %s; want pending", queued.ID, j.Held, j.State)
	}
	// Released, it is back in FIFO's order, first, and the queue says
	// whose order it is.
	browsertest.WaitText(t, b, "#row-"+queued.ID+" td:nth-child(1)", "1")
	if o := browsertest.Text(t, b, "p.order"); !strings.Contains(o, "the policy's order") {
		t.Errorf("under FIFO with a job waiting the queue says %q, want the policy's order", o)
	}
	// A running job offers no Hold (the server would refuse it).
	if n := browsertest.Eval[int](t, b, fmt.Sprintf(`document.querySelectorAll('button[aria-label="Hold %s"]').length`, run1.ID)); n != 0 {
		t.Errorf("the running job %s offers Hold", run1.ID)
	}

	// Live: a job submitted now appears without a reload.
	extra, err := bc.Submit(ctx, long("late-comer", 1))
	if err != nil {
		t.Fatal(err)
	}
	browsertest.WaitText(t, b, "table.queue", extra.ID)

	// Job view: timeline, events, log tail.
	browsertest.Click(t, b, fmt.Sprintf(`table.queue a[href="#/job/%s"]`, run1.ID))
	browsertest.WaitText(t, b, "h1", "Job "+run1.ID)
	browsertest.WaitText(t, b, "pre.log", "step")
	ev := browsertest.Text(t, b, "details")
	for _, want := range []string{"submitted", "launched"} {
		if !strings.Contains(ev, want) {
			t.Errorf("job events lack %q:\n%s", want, ev)
		}
	}
	if n := browsertest.Eval[int](t, b, `document.querySelectorAll('.timeline .bar').length`); n < 1 {
		t.Errorf("timeline shows %d launches, want at least 1", n)
	}
	browsertest.Shot(t, b, "serve-job")

	// Cancel from the console (the confirm dialog is accepted).
	browsertest.Click(t, b, fmt.Sprintf(`button[aria-label="Cancel %s"]`, run1.ID))
	browsertest.WaitText(t, b, ".fields", "cancelled")
	j, err := admin.Job(ctx, run1.ID)
	if err != nil {
		t.Fatal(err)
	}
	if j.State != api.StateCancelled {
		t.Errorf("job %s is %s after the console cancelled it", run1.ID, j.State)
	}

	// Tenants and utilisation.
	browsertest.Click(t, b, `nav a[href="#/tenants"]`)
	browsertest.WaitText(t, b, "main h1", "Tenants") // not the job view's tables
	tt := browsertest.WaitText(t, b, "main table", "alice")
	if !strings.Contains(tt, "bob") {
		t.Errorf("tenants view lacks bob:\n%s", tt)
	}
	browsertest.Shot(t, b, "serve-tenants")
	browsertest.Click(t, b, `nav a[href="#/usage"]`)
	browsertest.WaitText(t, b, "main", "idle-allocated")
	browsertest.Shot(t, b, "serve-usage")

	// What-if: replay under SRTF beside FIFO.
	cmp := browsertest.WhatIf(t, b, "srtf")
	if !strings.Contains(cmp, "fifo") || !strings.Contains(cmp, "mean") {
		t.Errorf("what-if comparison:\n%s", cmp)
	}
	browsertest.Shot(t, b, "serve-whatif")

	// Keyboard: "g q" goes to the queue; Tab reaches the skip link first.
	if err := chromedp.Run(b, chromedp.KeyEvent("g"), chromedp.KeyEvent("q")); err != nil {
		t.Fatal(err)
	}
	browsertest.WaitText(t, b, "main h1", "Queue")
	if err := chromedp.Run(b, chromedp.Reload(), chromedp.WaitVisible("main h1", chromedp.ByQuery), chromedp.KeyEvent("\t")); err != nil {
		t.Fatal(err)
	}
	if s := browsertest.Eval[string](t, b, `document.activeElement.className + ":" + document.activeElement.textContent`); !strings.Contains(s, "skip") {
		t.Errorf("the first Tab focuses %q, want the skip link", s)
	}

	// Phone width: nothing wider than the screen but the tables' own scroll.
	if err := chromedp.Run(b, chromedp.EmulateViewport(390, 844)); err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"cluster", "queue"} {
		if err := chromedp.Run(b, chromedp.Navigate(url+"/#/"+v)); err != nil {
			t.Fatal(err)
		}
		browsertest.WaitText(t, b, "main h1", map[string]string{"cluster": "Cluster", "queue": "Queue"}[v])
		time.Sleep(300 * time.Millisecond)
		if w := browsertest.Eval[int](t, b, `document.documentElement.scrollWidth`); w > 390 {
			t.Errorf("%s view at phone width is %d px wide, want at most 390", v, w)
		}
		browsertest.Shot(t, b, "serve-phone-"+v)
	}

	// A tenant sees its own jobs only, and the cluster's shape.
	bt := browsertest.New(t, exe, 1280, 900)
	browsertest.Login(t, bt, url, alice.Token)
	browsertest.WaitText(t, bt, ".nodes", "t4")
	others := browsertest.Eval[int](t, bt, `document.querySelectorAll('.gpus .cell[data-other=true]').length`)
	if others != 2 {
		t.Errorf("alice sees %d GPUs as another tenant's, want bob's 2", others)
	}
	browsertest.Shot(t, bt, "serve-tenant-cluster")
	browsertest.Click(t, bt, `nav a[href="#/queue"]`)
	q = browsertest.WaitText(t, bt, "table.queue", queued.ID)
	if strings.Contains(q, run2.ID) || strings.Contains(q, "bob") {
		t.Errorf("alice's queue shows bob's jobs:\n%s", q)
	}
	if err := chromedp.Run(bt, chromedp.Navigate(url+"/#/job/"+run2.ID)); err != nil {
		t.Fatal(err)
	}
	browsertest.WaitText(t, bt, ".error", "no job")
}

// TestConsoleTimeline: a job's timeline marks its starts, preemptions and
// resizes and lists them with the policy's reasons, against a real tide
// serve under SRTF (a short job preempts a long one) and Optimus (it
// shrinks an elastic job to make room for a second).
func TestConsoleTimeline(t *testing.T) {
	exe := browsertest.Chromium(t)
	tide, countjob := buildBinaries(t)
	for _, tc := range []struct {
		policy, kind, name, reason string
		elastic                    bool
	}{
		{policy: "srtf", kind: "preempted", name: "preempted", reason: ": preempted"},
		{policy: "optimus", kind: "resized", name: "resized", reason: "shrunk 4->", elastic: true},
	} {
		t.Run(tc.policy, func(t *testing.T) {
			url, tok := serve(t, tide, "--gpus", "fake:4:t4", "--policy", tc.policy)
			ctx := context.Background()
			admin := api.NewClient(url, tok)
			spec := func(steps int, est float64) *api.JobSpec {
				s := &api.JobSpec{Command: []string{countjob, "-steps", fmt.Sprint(steps), "-step-time", "50ms"}, GPUs: 4, EstimateS: est}
				if tc.elastic {
					s.MinGPUs, s.MaxGPUs = 1, 4
				}
				return s
			}
			long, err := admin.Submit(ctx, spec(4000, 1000))
			if err != nil {
				t.Fatal(err)
			}
			waitEvent(t, admin, long.ID, "launched")
			if _, err := admin.Submit(ctx, spec(20, 1)); err != nil {
				t.Fatal(err)
			}
			waitEvent(t, admin, long.ID, tc.kind)

			b := browsertest.New(t, exe, 1280, 900)
			browsertest.Login(t, b, url, tok)
			if err := chromedp.Run(b, chromedp.Navigate(url+"/#/job/"+long.ID)); err != nil {
				t.Fatal(err)
			}
			list := browsertest.WaitText(t, b, ".moments", tc.name)
			if !strings.Contains(list, "started") || !strings.Contains(list, tc.reason) {
				t.Errorf("the timeline's list lacks the start, or the %s with the policy's reason %q:\n%s", tc.name, tc.reason, list)
			}
			if n := browsertest.Eval[int](t, b, `document.querySelectorAll('.track .moment').length`); n < 2 {
				t.Errorf("the timeline's track marks %d moments, want a start and a %s at least", n, tc.name)
			}
			browsertest.Shot(t, b, "serve-timeline-"+tc.policy)
		})
	}
}

// waitEvent waits until job id has an event of kind (60 s at most).
func waitEvent(t *testing.T, c *api.Client, id, kind string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		evs, err := c.Events(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range evs {
			if e.Kind == kind {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s has no %s event after 60 s: %+v", id, kind, evs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
