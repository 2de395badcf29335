package console

import (
	"fmt"
	"math/rand"
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/tide-sched/tide/cputime"
)

// cpuSeconds is the process's user+system CPU time.
func cpuSeconds() float64 { return max(cputime.Process(), 0) }

// bigSource is nodes x 8 GPUs and jobs of 1 to 8 GPUs from 20 tenants,
// after one FIFO round.
func bigSource(b *testing.B, nodes, jobs int) *engineSource {
	src := newEngineSource(b, fmt.Sprintf("%dx8:a100", nodes), "fifo")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < jobs; i++ {
		src.submit(b, fmt.Sprintf("job-%05d", i), fmt.Sprintf("team-%02d", rng.Intn(20)), 1<<rng.Intn(4), 600+rng.Float64()*36000, 0)
	}
	src.round(b)
	return src
}

// serveAll answers the requests of one view.
func serveAll(b *testing.B, h http.Handler, tok string, paths ...string) {
	for _, p := range paths {
		req := httptest.NewRequest("GET", p, nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 200 {
			b.Fatalf("%s: %d %s", p, rec.Code, rec.Body)
		}
	}
}

// BenchmarkConsole measures the server's cost of the console at 1,000 nodes
// x 8 GPUs and 10,000 jobs:
//
//   - first-view: a console with nothing cached answers what the page asks
//     for when it opens (summary, the first page of nodes, the first page
//     of the queue): one snapshot of the source, prepared, and three
//     pages of JSON;
//   - first-view-tenant: the same for a tenant (filtered on the server);
//   - update: what one change costs: a new snapshot, its digest (the live
//     stream compares it) and the page a viewer then fetches;
//   - forecast-2000: the background replay of the queue under the running
//     policy that predicts starts the policy does not give (FIFO gives
//     none), at its limit of 2,000 jobs (on 200 nodes); it runs at most
//     every 5 s while the queue changes, and never more than a tenth of
//     the time.
//
// Each reports CPU-seconds per operation beside the wall time. Run it with
//
//	go test ./console -run '^$' -bench Console -benchtime 10x
func BenchmarkConsole(b *testing.B) {
	big := bigSource(b, 1000, 10000)
	// The views' cost alone: the forecast (a background replay, below)
	// is left out by hiding the source's Replay.
	src := struct{ Source }{big}
	views := []string{"/ui/api/summary", "/ui/api/cluster?offset=0&limit=100", "/ui/api/queue?offset=0&limit=100"}
	run := func(name string, f func(b *testing.B)) {
		b.Run(name, func(b *testing.B) {
			cpu0 := cpuSeconds()
			b.ResetTimer()
			f(b)
			b.StopTimer()
			b.ReportMetric((cpuSeconds()-cpu0)/float64(b.N), "cpu-s/op")
		})
	}
	run("first-view", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c := New(src, Options{})
			serveAll(b, c.Handler(), "admin-token", views...)
		}
	})
	run("first-view-tenant", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c := New(src, Options{})
			serveAll(b, c.Handler(), "team-07-token", views...)
		}
	})
	c := New(src, Options{})
	h := c.Handler()
	run("update", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			c.mu.Lock()
			c.cur = nil
			c.mu.Unlock()
			if _, err := c.snapshot(); err != nil {
				b.Fatal(err)
			}
			serveAll(b, h, "admin-token", "/ui/api/queue?offset=0&limit=100")
		}
	})
	// The forecast replays queues of at most MaxForecastJobs: 2,000 jobs on
	// 200 nodes here.
	small := bigSource(b, 200, MaxForecastJobs)
	run("forecast-2000", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if c.forecast(small) == nil {
				b.Fatal("no forecast")
			}
		}
	})
}
