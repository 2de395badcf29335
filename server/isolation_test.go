package server

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// isolatedDir is a data directory whose parents job users may pass
// through (t.TempDir's are mode 0700).
func isolatedDir(t *testing.T) string {
	t.Helper()
	base := t.TempDir()
	for _, d := range []string{filepath.Dir(base), base} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	return filepath.Join(base, "data")
}

// TestIsolation runs tide serve as root with two tenants mapped to Unix
// users that need no passwd entry (numeric UIDs, robust on any CI
// machine). From inside alice's job, a probe tries to read the admin token
// and the database, read bob's log and checkpoint, write into bob's job
// directories and signal bob's process: each must fail, while the same
// job can write its own checkpoint and working directory.
func TestIsolation(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: tide serve isolates tenants by running their jobs as their Unix users only as root")
	}
	cfg := testConfig(t, isolatedDir(t))
	cfg.SingleUser = false
	ts := startServer(t, cfg)
	ctx := context.Background()
	const aliceUID, bobUID = 61001, 61002
	alice, err := ts.admin.CreateTenantUser(ctx, "alice", fmt.Sprint(aliceUID))
	if err != nil {
		t.Fatal(err)
	}
	bob, err := ts.admin.CreateTenantUser(ctx, "bob", fmt.Sprintf("%d:%d", bobUID, bobUID))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.admin.CreateTenantUser(ctx, "carol", fmt.Sprint(aliceUID)); !isStatus(err, 400) || !strings.Contains(err.Error(), "alice") {
		t.Errorf("a second tenant on alice's uid: %v", err)
	}
	if _, err := ts.admin.CreateTenantUser(ctx, "carol", "0"); !isStatus(err, 400) || !strings.Contains(err.Error(), "root") {
		t.Errorf("a tenant run as root: %v", err)
	}
	if _, err := ts.admin.Submit(ctx, &api.JobSpec{Command: []string{"true"}, GPUs: 1}); !isStatus(err, 400) || !strings.Contains(err.Error(), "no Unix user") {
		t.Errorf("a job of a tenant without a Unix user: %v", err)
	}
	ca, cb := api.NewClient(ts.url, alice.Token), api.NewClient(ts.url, bob.Token)

	bobJob := submit(t, cb, &api.JobSpec{GPUs: 1, Command: []string{"/bin/sh", "-c",
		`echo bob-secret-log; echo bob-secret-ckpt > "$TIDE_CHECKPOINT_DIR/ckpt"; echo ready; while :; do sleep 0.05; done`}})
	jb := waitJob(t, cb, bobJob.ID, 20*time.Second, "running", func(j *api.Job) bool {
		return j.State == api.StateRunning && len(j.Attempts) > 0 && j.Attempts[0].PID > 0 && strings.Contains(logs(t, cb, j.ID), "ready")
	})
	bobDir := filepath.Join(cfg.DataDir, "jobs", bobJob.ID)

	probe := `id -u
try() { if eval "$2" >/dev/null 2>&1; then echo "LEAK $1"; else echo "denied $1"; fi; }
try admin-token 'cat "$DATA/admin.token"'
try database 'cat "$DATA/tide.db"'
try data-dir-listing 'ls "$DATA"'
try bob-log 'cat "$BOB/output.log"'
try bob-checkpoint 'cat "$BOB/checkpoint/ckpt"'
try bob-checkpoint-listing 'ls "$BOB/checkpoint"'
try bob-job-dir-write 'echo x > "$BOB/planted"'
try bob-log-replace 'mv "$BOB/output.log" "$BOB/old.log"'
try bob-work-write 'echo x > "$BOB/work/planted"'
try bob-checkpoint-write 'echo x > "$BOB/checkpoint/planted"'
try bob-report-write 'echo "{\"progress\": 1}" >> "$BOB/report.jsonl"'
try bob-signal 'kill -TERM "$BOB_PID"'
try bob-group-signal 'kill -KILL -- "-$BOB_PID"'

echo mine > "$TIDE_CHECKPOINT_DIR/mine" && echo "ok own-checkpoint"
echo mine > mine && echo "ok own-workdir"
`
	aliceJob := submit(t, ca, &api.JobSpec{GPUs: 1, Command: []string{"/bin/sh", "-c", probe}, Env: map[string]string{
		"DATA": cfg.DataDir, "BOB": bobDir, "BOB_PID": fmt.Sprint(jb.Attempts[0].PID)}})
	ja := waitJob(t, ca, aliceJob.ID, 30*time.Second, "over", inState(api.StateFinished, api.StateFailed))
	out := logs(t, ca, ja.ID)
	if ja.State != api.StateFinished {
		t.Fatalf("probe job %s (%s):\n%s", ja.State, ja.Reason, out)
	}
	t.Logf("probe output:\n%s", out)
	if !strings.Contains(out, fmt.Sprintf("\n%d\n", aliceUID)) {
		t.Errorf("alice's job did not run as uid %d:\n%s", aliceUID, out)
	}
	for _, what := range []string{"admin-token", "database", "data-dir-listing", "bob-log", "bob-checkpoint", "bob-checkpoint-listing",
		"bob-job-dir-write", "bob-log-replace", "bob-work-write", "bob-checkpoint-write", "bob-report-write", "bob-signal", "bob-group-signal"} {
		if !strings.Contains(out, "denied "+what+"\n") {
			t.Errorf("from alice's job, %s was not denied:\n%s", what, out)
		}
	}
	for _, what := range []string{"own-checkpoint", "own-workdir"} {
		if !strings.Contains(out, "ok "+what+"\n") {
			t.Errorf("alice's job could not write its %s:\n%s", what, out)
		}
	}
	if strings.Contains(logs(t, ca, ja.ID), "bob-secret") {
		t.Errorf("bob's secrets reached alice's log")
	}
	if j, err := cb.Job(ctx, bobJob.ID); err != nil || j.State != api.StateRunning || syscall.Kill(jb.Attempts[0].PID, 0) != nil {
		t.Errorf("bob's job did not survive alice's probe: %+v %v", j, err)
	}
	// The layout the probe met.
	for path, want := range map[string]os.FileMode{cfg.DataDir: 0o711, filepath.Join(cfg.DataDir, "admin.token"): 0o600,
		filepath.Join(cfg.DataDir, "tide.db"): 0o600, bobDir: 0o711, filepath.Join(bobDir, "output.log"): 0o600,
		filepath.Join(bobDir, "checkpoint"): 0o700} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %04o", path, fi.Mode().Perm(), err, want)
		}
	}
	if fi, err := os.Stat(filepath.Join(bobDir, "checkpoint")); err == nil && fi.Sys().(*syscall.Stat_t).Uid != bobUID {
		t.Errorf("bob's checkpoint directory belongs to uid %d", fi.Sys().(*syscall.Stat_t).Uid)
	}
}

// TestSingleUserRefused: a server not run as root cannot isolate tenants,
// so it refuses a second tenant unless the operator says --single-user.
func TestSingleUserRefused(t *testing.T) {
	geteuid = func() int { return 1000 }
	defer func() { geteuid = os.Geteuid }()
	cfg := testConfig(t, t.TempDir())
	cfg.SingleUser = false
	ts := startServer(t, cfg)
	_, err := ts.admin.CreateTenant(context.Background(), "alice")
	if !isStatus(err, http.StatusForbidden) || !strings.Contains(err.Error(), "--single-user") || !strings.Contains(err.Error(), "root") {
		t.Fatalf("a second tenant on a server not run as root: %v", err)
	}
	ts.close(t)
	cfg.SingleUser = true
	ts = startServer(t, cfg)
	if _, err := ts.admin.CreateTenant(context.Background(), "alice"); err != nil {
		t.Fatalf("with --single-user: %v", err)
	}
	ts.close(t)
	cfg.SingleUser = false
	if _, err := New(cfg); err == nil || !strings.Contains(err.Error(), "2 tenants") {
		t.Errorf("restart without --single-user over 2 tenants: %v", err)
	}
}
