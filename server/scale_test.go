package server

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// BenchmarkQueue10000 is the scale check of docs/api.md ("Scale"): a
// server on 4 fake GPUs whose jobs never end (sleep 3600), so that 4 run
// and the rest queue.
//
//  1. fill: 10,000 submissions from 32 concurrent clients;
//  2. submit: 2,000 more, with 10,000 jobs queued, as fast as 32 clients
//     go (each waits for its answer before it sends the next: the latency
//     is the queueing of 32 requests at that rate); paced: 2,000 more sent
//     at 1,000 a second whatever the answers (an open loop: the latency
//     at that load);
//  3. list: GET /v1/jobs?limit=50 through the API client, 50 times, and
//     the tide binary's 'tide jobs --limit 50', 10 times (a process each);
//  4. restart: the server is closed (its jobs keep running) and a new one
//     started on the data directory: the time from New to the first 200
//     of GET /healthz, with 12,000 jobs to recover and 4 to re-adopt.
//
// Each phase reports wall time and the CPU time it cost (this process: the
// server and the clients; the tide processes' own for step 3), with the
// load average, since on a shared machine wall times are inflated and CPU
// times are not. Run it with
//
//	go test ./server -run '^$' -bench Queue10000 -benchtime 1x -v
func BenchmarkQueue10000(b *testing.B) {
	const queued, more, clients, paceRate = 10000, 2000, 32, 1000
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		cfg := testConfig(b, dir)
		cfg.Logger, cfg.Round, cfg.StopJobsOnExit = nil, 10*time.Second, false
		ts := startServer(b, cfg)
		b.Logf("load average at the start: %s; %s", loadAvg(), syncLatency(b, dir))
		spec := func(n int) *api.JobSpec {
			return &api.JobSpec{Name: fmt.Sprintf("q%05d", n), GPUs: 1, Command: []string{"sleep", "3600"}}
		}
		fill := submitMany(b, ts, queued, clients, spec)
		reportSubmissions(b, "fill", fill)
		rounds0, roundSecs0 := ts.roundStats()
		sub := submitMany(b, ts, more, clients, func(n int) *api.JobSpec { return spec(queued + n) })
		reportSubmissions(b, "submit", sub)
		rounds1, roundSecs1 := ts.roundStats()
		b.Logf("submit: %d scheduling rounds during it, %.1f ms each on average (%.2f s in all)",
			rounds1-rounds0, 1000*(roundSecs1-roundSecs0)/float64(max(rounds1-rounds0, 1)), roundSecs1-roundSecs0)
		paced := submitLoad(b, ts, more, 64, paceRate, func(n int) *api.JobSpec { return spec(queued + more + n) })
		reportSubmissions(b, "paced", paced)

		// 3. Listing the first page.
		q := url.Values{"limit": {"50"}}
		var lat []time.Duration
		cpu0 := cpuTime()
		for k := 0; k < 50; k++ {
			t0 := time.Now()
			l, err := ts.admin.ListJobs(context.Background(), q)
			lat = append(lat, time.Since(t0))
			if err != nil || len(l.Jobs) != 50 || l.Next == "" {
				b.Fatalf("list: %v, %d jobs, next %q", err, len(l.Jobs), l.Next)
			}
		}
		cpu := cpuTime() - cpu0
		slices.Sort(lat)
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "list-p50-ms")
		b.Logf("list (API client): GET /v1/jobs?limit=50 of %d jobs: p50 %s, max %s; %s CPU a request",
			queued+2*more, lat[len(lat)/2], lat[len(lat)-1], (cpu / time.Duration(len(lat))).Round(time.Microsecond))
		if bin := buildTide(b); bin != "" {
			var wall, pcpu []time.Duration
			for k := 0; k < 10; k++ {
				cmd := exec.Command(bin, "jobs", "--limit", "50", "--server", ts.url, "--token", ts.token)
				t0 := time.Now()
				out, err := cmd.Output()
				wall = append(wall, time.Since(t0))
				pcpu = append(pcpu, cmd.ProcessState.UserTime()+cmd.ProcessState.SystemTime())
				if err != nil || strings.Count(string(out), "\n") != 51 {
					b.Fatalf("tide jobs --limit 50: %v\n%s", err, out)
				}
			}
			slices.Sort(wall)
			slices.Sort(pcpu)
			b.ReportMetric(float64(wall[len(wall)/2].Microseconds())/1000, "cli-jobs-p50-ms")
			b.Logf("list (CLI): tide jobs --limit 50: p50 %s, max %s wall; the tide process's CPU p50 %s",
				wall[len(wall)/2], wall[len(wall)-1], pcpu[len(pcpu)/2])
		}

		// 4. Restart.
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		if err := ts.Close(ctx); err != nil {
			b.Fatal(err)
		}
		cancel()
		cfg.StopJobsOnExit = true // the last server stops the jobs
		cpu0 = cpuTime()
		t0 := time.Now()
		ts2 := startServer(b, cfg) // New, then Start on a new port
		for {
			resp, err := http.Get(ts2.url + "/healthz")
			if err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					break
				}
			}
			if time.Since(t0) > time.Minute {
				b.Fatalf("no /healthz a minute after the restart: %v", err)
			}
			time.Sleep(time.Millisecond)
		}
		restart, rcpu := time.Since(t0), cpuTime()-cpu0
		b.ReportMetric(restart.Seconds(), "restart-s")
		b.Logf("restart: New to the first 200 of /healthz with %d jobs in the store: %s wall, %s CPU",
			queued+2*more, restart.Round(time.Millisecond), rcpu.Round(time.Millisecond))
		jobs, err := ts2.admin.ListJobs(context.Background(), url.Values{"state": {"running"}})
		if err != nil || len(jobs.Jobs) != 4 {
			b.Errorf("after the restart: %v, %d running jobs, want the 4 re-adopted", err, len(jobs.Jobs))
		}
		b.Logf("load average at the end: %s", loadAvg())
	}
}

// reportSubmissions reports a submitLoad run: rate, p50 and p99 latency
// and CPU per submission.
func reportSubmissions(b *testing.B, phase string, r submitRun) {
	lat := slices.Clone(r.lat)
	slices.Sort(lat)
	n := len(lat)
	p := func(q float64) time.Duration { return lat[int(q*float64(n-1))] }
	b.ReportMetric(float64(n)/r.elapsed.Seconds(), phase+"-submissions/s")
	b.ReportMetric(float64(p(0.99).Microseconds())/1000, phase+"-p99-ms")
	b.ReportMetric(float64(r.cpu.Microseconds())/float64(n), phase+"-cpu-us/submission")
	b.Logf("%s: %d submissions in %s: %.0f/s, p50 %s, p99 %s, max %s; %s CPU (%.0f us a submission)",
		phase, n, r.elapsed.Round(time.Millisecond), float64(n)/r.elapsed.Seconds(), p(0.5), p(0.99), lat[n-1],
		r.cpu.Round(time.Millisecond), float64(r.cpu.Microseconds())/float64(n))
}

// roundStats returns the scheduling rounds run so far and their total
// duration, seconds.
func (ts *testServer) roundStats() (uint64, float64) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	return ts.metrics.rounds, ts.metrics.roundSum
}

// buildTide builds cmd/tide into a temporary directory, or returns "" (and
// logs why) when it cannot.
func buildTide(b *testing.B) string {
	bin := filepath.Join(b.TempDir(), "tide")
	if out, err := exec.Command("go", "build", "-o", bin, "../cmd/tide").CombinedOutput(); err != nil {
		b.Logf("tide jobs not measured: go build ../cmd/tide: %v\n%s", err, out)
		return ""
	}
	return bin
}

// syncLatency measures fdatasync of a 4 KiB write in dir, 50 times: every
// submission waits for a bbolt commit, which syncs twice (data, then
// meta), so the disk's sync time bounds the submission latency.
func syncLatency(b *testing.B, dir string) string {
	f, err := os.CreateTemp(dir, "sync")
	if err != nil {
		b.Fatal(err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	var ts []time.Duration
	buf := make([]byte, 4096)
	for i := 0; i < 50; i++ {
		if _, err := f.WriteAt(buf, int64(i)*4096); err != nil {
			b.Fatal(err)
		}
		t0 := time.Now()
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
		ts = append(ts, time.Since(t0))
	}
	slices.Sort(ts)
	return fmt.Sprintf("fdatasync of 4 KiB here: p50 %s, p90 %s, max %s", ts[25].Round(10*time.Microsecond), ts[45].Round(10*time.Microsecond), ts[49].Round(10*time.Microsecond))
}

func loadAvg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:min(3, len(f))], " ")
}

// TestSubmitDuringRound: a submission does not wait for the server's lock,
// which a scheduling round holds for milliseconds with a long queue (the
// policy orders and explains every waiting job); the job is in the job
// table for whoever takes the lock next.
func TestSubmitDuringRound(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ts.mu.Lock() // a long round
	done := make(chan *api.Job, 1)
	go func() {
		j, err := ts.admin.Submit(context.Background(), &api.JobSpec{GPUs: 1, Hold: true, Command: []string{"true"}})
		if err != nil {
			t.Error(err)
		}
		done <- j
	}()
	var j *api.Job
	select {
	case j = <-done:
	case <-time.After(30 * time.Second):
		ts.mu.Unlock()
		t.Fatal("the submission waited for the lock")
	}
	ts.mu.Unlock()
	if j == nil {
		return
	}
	if j.State != api.StatePending || !j.Held || !strings.Contains(j.Waiting, "held") {
		t.Errorf("submitted job: %+v", j)
	}
	got, err := ts.admin.Job(context.Background(), j.ID)
	if err != nil || got.ID != j.ID || !got.Held {
		t.Errorf("the job after the lock: %v %+v", err, got)
	}
}
