package server

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/cputime"
	"github.com/tide-sched/tide/store"
)

// BenchmarkSubmit5000 submits 5,000 jobs through the HTTP API from 32
// concurrent clients while the server schedules and runs them on 4 fake
// GPUs, and reports submissions per second and the p50 and p99 submission
// latency. It then checks that every job was recorded exactly once, in the
// server and in the store after it closed.
//
//   - countjob: the CPU stand-in job, counting 600 steps of 100 ms (a
//     minute): the first four run, the rest queue, as on a busy machine;
//   - instant: jobs that exit at once (true), so that jobs keep starting
//     and finishing (about 45 a second) while the submissions arrive.
//
// Run it with
//
//	go test ./server -run '^$' -bench Submit5000 -benchtime 1x
func BenchmarkSubmit5000(b *testing.B) {
	b.Run("countjob", func(b *testing.B) {
		benchSubmit(b, func() *api.JobSpec { return countSpec(1, 600, 100*time.Millisecond) })
	})
	b.Run("instant", func(b *testing.B) {
		benchSubmit(b, func() *api.JobSpec { return &api.JobSpec{Command: []string{"true"}, GPUs: 1} })
	})
}

func benchSubmit(b *testing.B, job func() *api.JobSpec) {
	const total, clients = 5000, 32
	for i := 0; i < b.N; i++ {
		dir := b.TempDir()
		cfg := testConfig(b, dir)
		cfg.Logger = nil
		cfg.Round = time.Second
		ts := startServer(b, cfg)
		b.ResetTimer()
		run := submitMany(b, ts, total, clients, func(n int) *api.JobSpec {
			spec := job()
			spec.Name = fmt.Sprintf("bench-%05d", n)
			return spec
		})
		b.StopTimer()
		lat, elapsed, cpu := run.lat, run.elapsed, run.cpu
		slices.Sort(lat)
		p := func(q float64) time.Duration { return lat[int(q*float64(total-1))] }
		b.ReportMetric(float64(total)/elapsed.Seconds(), "submissions/s")
		b.ReportMetric(float64(p(0.99).Microseconds())/1000, "p99-ms")
		b.ReportMetric(float64(p(0.50).Microseconds())/1000, "p50-ms")
		// CPU time (server and clients, not the jobs) does not depend on
		// what else the machine runs, as the rate and latency do.
		b.ReportMetric(float64(cpu.Microseconds())/total, "cpu-us/submission")
		b.Logf("%d submissions from %d clients in %s: %.0f/s, p50 %s, p99 %s, max %s; %s CPU (%.0f us a submission)",
			total, clients, elapsed.Round(time.Millisecond), float64(total)/elapsed.Seconds(), p(0.5), p(0.99), lat[total-1],
			cpu.Round(time.Millisecond), float64(cpu.Microseconds())/total)

		// Nothing lost, nothing duplicated: in the server...
		jobs, err := ts.admin.Jobs(context.Background(), "")
		if err != nil {
			b.Fatal(err)
		}
		finished := 0
		for _, j := range jobs {
			if j.State == api.StateFinished {
				finished++
			}
		}
		b.Logf("%d jobs finished by the end of the submissions", finished)
		checkOnce(b, "the server", len(jobs), func(yield func(id, name string)) {
			for _, j := range jobs {
				yield(j.ID, j.Name)
			}
		})
		ts.close(b)
		// ... and in the store.
		db, err := store.Open(dir)
		if err != nil {
			b.Fatal(err)
		}
		var recs []*store.Job
		if err := db.View(func(tx *store.Tx) error {
			return tx.Jobs(func(j *store.Job) error { recs = append(recs, j); return nil })
		}); err != nil {
			b.Fatal(err)
		}
		db.Close()
		checkOnce(b, "the store", len(recs), func(yield func(id, name string)) {
			for _, r := range recs {
				yield(r.ID, r.Spec.Name)
			}
		})
		b.StartTimer()
	}
}

// submitRun is what submitLoad measured: each submission's latency (by
// index), the wall time and the CPU time of this process (server and
// clients) over all of them.
type submitRun struct {
	lat          []time.Duration
	elapsed, cpu time.Duration
}

// submitMany submits total jobs (spec(n) for n in [0, total)) through the
// HTTP API from clients concurrent clients, each sending its next
// submission when the last is answered (a closed loop).
func submitMany(b *testing.B, ts *testServer, total, clients int, spec func(n int) *api.JobSpec) submitRun {
	return submitLoad(b, ts, total, clients, 0, spec)
}

// submitLoad submits total jobs (spec(n) for n in [0, total)) through the
// HTTP API over conns connections, failing b on any error: with rate 0,
// from conns clients in a closed loop; otherwise rate a second, each in
// its own request whatever the others' answers (an open loop; beyond
// conns in flight a request waits for a connection, as in a client's
// pool, and its latency counts the wait).
func submitLoad(b *testing.B, ts *testServer, total, conns int, rate float64, spec func(n int) *api.JobSpec) submitRun {
	b.Helper()
	transport := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	defer transport.CloseIdleConnections()
	cl := api.NewClient(ts.url, ts.token)
	cl.SetTransport(transport)
	lat := make([]time.Duration, total)
	errs := make(chan error, total)
	one := func(n int) bool {
		sp := spec(n)
		t0 := time.Now()
		_, err := cl.Submit(context.Background(), sp)
		lat[n] = time.Since(t0)
		if err != nil {
			errs <- err
		}
		return err == nil
	}
	var wg sync.WaitGroup
	cpu0 := cpuTime()
	start := time.Now()
	if rate <= 0 {
		var next atomic.Int64
		for c := 0; c < conns; c++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					if n := int(next.Add(1)) - 1; n >= total || !one(n) {
						return
					}
				}
			}()
		}
	} else {
		for n := 0; n < total; n++ {
			if wait := time.Until(start.Add(time.Duration(float64(n) / rate * float64(time.Second)))); wait > 0 {
				time.Sleep(wait)
			}
			wg.Add(1)
			go func() { defer wg.Done(); one(n) }()
		}
	}
	wg.Wait()
	run := submitRun{lat: lat, elapsed: time.Since(start), cpu: cpuTime() - cpu0}
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	return run
}

// cpuTime is the user and system CPU time this process has used (its
// children, the jobs, not included).
func cpuTime() time.Duration {
	return time.Duration(max(cputime.Process(), 0) * float64(time.Second))
}

func checkOnce(b *testing.B, where string, n int, each func(func(id, name string))) {
	b.Helper()
	ids, names := map[string]int{}, map[string]int{}
	each(func(id, name string) { ids[id]++; names[name]++ })
	if n != 5000 || len(ids) != 5000 || len(names) != 5000 {
		b.Fatalf("%s holds %d jobs, %d distinct IDs, %d distinct names; want 5000 of each", where, n, len(ids), len(names))
	}
	for i := 0; i < 5000; i++ {
		if names[fmt.Sprintf("bench-%05d", i)] != 1 {
			b.Fatalf("%s: job bench-%05d recorded %d times", where, i, names[fmt.Sprintf("bench-%05d", i)])
		}
	}
}
