// Package browsertest drives the web console in a real headless Chromium
// (Debian's chromium, over the DevTools protocol with chromedp) for tests:
// tide serve's in package console, tide kube's in the Kubernetes suite.
// Screenshots go to testdata/out/ under the test's package directory.
// Without Chromium the tests skip, saying so; TIDE_CHROMIUM names another
// browser.
package browsertest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
)

// Chromium finds Chromium or skips the test.
func Chromium(t testing.TB) string {
	t.Helper()
	if p := os.Getenv("TIDE_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "google-chrome-stable"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("no Chromium found: install Debian's chromium (scripts/test does, as root) or set TIDE_CHROMIUM; skipping the browser tests")
	return ""
}

// OutDir is where screenshots go.
func OutDir(t testing.TB) string {
	dir := filepath.Join("testdata", "out")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// startWait is how long Chromium may take to start (to print its DevTools
// address): chromedp's default, 20 s, ran out in a full suite's run at a
// load of about 10 on 2 cores ("websocket url timeout reached"). It only
// guards against a browser that never starts.
const startWait = 3 * time.Minute

// New starts headless Chromium at width x height.
func New(t testing.TB, exe string, width, height int) context.Context {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(exe), chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(width, height),
		chromedp.WSURLReadTimeout(startWait))
	actx, cancel := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancel)
	ctx, cancel2 := chromedp.NewContext(actx, chromedp.WithErrorf(t.Logf))
	t.Cleanup(cancel2)
	// Accept confirm() dialogs (the cancel button asks).
	chromedp.ListenTarget(ctx, func(ev any) {
		if _, ok := ev.(*page.EventJavascriptDialogOpening); ok {
			go func() { _ = chromedp.Run(ctx, page.HandleJavaScriptDialog(true)) }()
		}
	})
	ctx, cancel3 := context.WithTimeout(ctx, 8*time.Minute)
	t.Cleanup(cancel3)
	if err := chromedp.Run(ctx, chromedp.EmulateViewport(int64(width), int64(height))); err != nil {
		t.Fatalf("starting %s: %v", exe, err)
	}
	return ctx
}

// Shot saves a full-page screenshot.
func Shot(t testing.TB, ctx context.Context, name string) {
	t.Helper()
	var buf []byte
	if err := chromedp.Run(ctx, chromedp.FullScreenshot(&buf, 100)); err != nil {
		t.Fatalf("screenshot %s: %v", name, err)
	}
	path := filepath.Join(OutDir(t), name+".png")
	if err := os.WriteFile(path, buf, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("%s screenshot %s", time.Now().Format("15:04:05"), path)
}

// Text is the visible text of the first node matching sel.
func Text(t testing.TB, ctx context.Context, sel string) string {
	t.Helper()
	var s string
	if err := chromedp.Run(ctx, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Text(sel, &s, chromedp.ByQuery)); err != nil {
		t.Fatalf("reading %s: %v", sel, err)
	}
	return s
}

// WaitText waits until the text of sel contains want.
func WaitText(t testing.TB, ctx context.Context, sel, want string) string {
	t.Helper()
	deadline := time.Now().Add(90 * time.Second)
	for {
		var s string
		_ = chromedp.Run(ctx, chromedp.Evaluate(fmt.Sprintf(`(document.querySelector(%q)||{}).innerText||""`, sel), &s))
		if strings.Contains(s, want) {
			return s
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s does not show %q after 90 s; it shows:\n%s", sel, want, s)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Eval evaluates js in the page and returns its value.
func Eval[T any](t testing.TB, ctx context.Context, js string) T {
	t.Helper()
	var v T
	if err := chromedp.Run(ctx, chromedp.Evaluate(js, &v)); err != nil {
		t.Fatalf("evaluating %s: %v", js, err)
	}
	return v
}

// Login signs in on the console at url with token (typed, then Enter).
func Login(t testing.TB, ctx context.Context, url, token string) {
	t.Helper()
	err := chromedp.Run(ctx,
		chromedp.Navigate(url+"/"),
		chromedp.WaitVisible("#token", chromedp.ByID),
		chromedp.SendKeys("#token", token, chromedp.ByID),
		chromedp.SendKeys("#token", "\r", chromedp.ByID), // Enter submits
		chromedp.WaitVisible("header nav", chromedp.ByQuery),
	)
	if err != nil {
		t.Fatalf("signing in: %v", err)
	}
}

// Click waits until sel shows and clicks it.
func Click(t testing.TB, ctx context.Context, sel string) {
	t.Helper()
	if err := chromedp.Run(ctx, chromedp.WaitVisible(sel, chromedp.ByQuery), chromedp.Click(sel, chromedp.ByQuery)); err != nil {
		t.Fatalf("clicking %s: %v", sel, err)
	}
}

// WhatIf opens the what-if view, replays the queue under policy and
// returns the text of the comparison table once it names policy.
func WhatIf(t testing.TB, ctx context.Context, policy string) string {
	t.Helper()
	Click(t, ctx, `nav a[href="#/whatif"]`)
	if err := chromedp.Run(ctx, chromedp.WaitReady(`select[name=policy] option[value=`+policy+`]`, chromedp.ByQuery),
		chromedp.SetValue(`select[name=policy]`, policy, chromedp.ByQuery)); err != nil {
		t.Fatal(err)
	}
	Click(t, ctx, `form button[type=submit]`)
	return WaitText(t, ctx, "table.compare", policy)
}
