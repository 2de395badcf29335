// Command countjob is tide's CPU-only stand-in for a training job, used by
// the tests and for demos on machines without GPUs. It "trains" by
// counting steps, and behaves as a well-written training script should
// under tide serve:
//
//   - it resumes from the step saved in $TIDE_CHECKPOINT_DIR/count;
//   - it saves a checkpoint every few steps and on SIGTERM (preemption,
//     resize or cancellation), then exits with 143;
//   - it reports its progress to $TIDE_REPORT_URL (with
//     $TIDE_REPORT_TOKEN), or appends it to $TIDE_REPORT_FILE when there is
//     no URL;
//   - it exits 0 when all steps are done.
//
// Usage:
//
//	countjob [-steps 50] [-step-time 100ms] [-checkpoint-every 5] [-fail-attempts 0]
//	         [-batch 0 -sample-time 1ms -sync-time 0 -noise-scale 0]
//
// With -batch N it plays a data-parallel job with global batch N on its
// $TIDE_GPUS GPUs: a forward/backward pass takes -step-time plus
// -sample-time for each of its ceil(N/GPUs) samples per GPU, and a step
// adds -sync-time on more than one GPU (the gradient all-reduce). Each
// report carries the step time, its compute part, the local batch and the
// replica count: the observations tide fits the goodput model to.
// -noise-scale S adds gradient statistics with noise scale S. When tide
// gives a batch ($TIDE_LOCAL_BSZ per GPU, $TIDE_ACCUM_STEPS accumulation
// passes), the job uses it: its work is -steps x N samples, so a larger
// batch needs fewer iterations.
//
// -fail-attempts N makes attempts 1..N (from $TIDE_ATTEMPT) exit with code
// 3 after two steps, to exercise tide's retries.
package main

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	steps := flag.Int("steps", 50, "steps to count")
	stepTime := flag.Duration("step-time", 100*time.Millisecond, "time one step takes")
	every := flag.Int("checkpoint-every", 5, "save a checkpoint every this many steps")
	failAttempts := flag.Int("fail-attempts", 0, "exit 3 after two steps on attempts 1..N")
	batch := flag.Int("batch", 0, "global batch size: play a data-parallel job and report step times (0: don't)")
	sampleTime := flag.Duration("sample-time", time.Millisecond, "with -batch: compute time per sample on one GPU")
	syncTime := flag.Duration("sync-time", 0, "with -batch: time a step spends synchronising on more than one GPU")
	noise := flag.Float64("noise-scale", 0, "with -batch: report gradient statistics of this noise scale (samples)")
	flag.Parse()
	if *steps <= 0 || *stepTime < 0 || *every <= 0 || *batch < 0 || *sampleTime < 0 || *syncTime < 0 || *noise < 0 {
		fmt.Fprintln(os.Stderr, "countjob: -steps and -checkpoint-every must be > 0, the times, -batch and -noise-scale >= 0")
		os.Exit(2)
	}
	p := perf{batch: *batch, noise: *noise, compute: *stepTime, step: *stepTime, iter: *stepTime}
	if p.batch > 0 {
		p.gpus = gpus()
		// The batch tide gives (a policy may adapt it), else our own.
		p.local, p.accum = envInt("TIDE_LOCAL_BSZ"), envInt("TIDE_ACCUM_STEPS")
		if p.local <= 0 {
			p.local, p.accum = (p.batch+p.gpus-1)/p.gpus, 0
		}
		p.global = p.gpus * p.local * (p.accum + 1)
		p.compute = *stepTime + time.Duration(p.local)*(*sampleTime)
		p.step = p.compute
		if p.gpus > 1 {
			p.step += *syncTime
		}
		p.iter = time.Duration(p.accum)*p.compute + p.step
	}
	// Work is counted in samples: -steps steps of -batch samples (of one
	// when there is no batch), so a larger batch takes fewer iterations.
	unit := max(p.batch, 1)
	perIter := max(p.global, unit)
	if p.batch == 0 {
		perIter = 1
	}
	total := *steps * unit
	ckpt := os.Getenv("TIDE_CHECKPOINT_DIR")
	if ckpt == "" {
		ckpt = "."
	}
	attempt, _ := strconv.Atoi(os.Getenv("TIDE_ATTEMPT"))
	r := &reporter{url: os.Getenv("TIDE_REPORT_URL"), token: os.Getenv("TIDE_REPORT_TOKEN"), file: os.Getenv("TIDE_REPORT_FILE")}

	done := min(load(ckpt), total)
	fmt.Printf("countjob: resuming at step %d of %d (attempt %s, restarts %s, GPUs %q)\n", done/unit, *steps,
		os.Getenv("TIDE_ATTEMPT"), os.Getenv("TIDE_RESTARTS"), os.Getenv("CUDA_VISIBLE_DEVICES"))
	if p.batch > 0 {
		fmt.Printf("countjob: batch %d (%d per GPU on %d GPUs, %d accumulation steps), %s per iteration\n", p.global, p.local, p.gpus, p.accum, p.iter)
	}
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(max(p.iter, time.Microsecond))
	defer tick.Stop()
	iters := 0
	for done < total {
		select {
		case s := <-sig:
			save(ckpt, done)
			fmt.Printf("countjob: %s at step %d: checkpointed, exiting\n", s, done/unit)
			os.Exit(143)
		case <-tick.C:
		}
		done = min(done+perIter, total)
		iters++
		fmt.Printf("step %d/%d\n", done/unit, *steps)
		if iters%*every == 0 {
			save(ckpt, done)
		}
		r.send(float64(done)/float64(unit), *steps, p)
		if attempt > 0 && attempt <= *failAttempts && iters >= 2 {
			save(ckpt, done)
			fmt.Printf("countjob: failing on purpose (attempt %d of %d failing ones)\n", attempt, *failAttempts)
			os.Exit(3)
		}
	}
	save(ckpt, done)
	r.send(float64(done)/float64(unit), *steps, p)
	fmt.Println("countjob: done")
}

func envInt(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return 0
	}
	return n
}

func load(dir string) int {
	data, err := os.ReadFile(filepath.Join(dir, "count"))
	if err != nil {
		return 0
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(data)))
	if err != nil || n < 0 {
		return 0
	}
	return n
}

// save writes the checkpoint atomically.
func save(dir string, step int) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "countjob: checkpoint:", err)
		return
	}
	tmp := filepath.Join(dir, "count.tmp")
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(step)+"\n"), 0o644); err != nil {
		fmt.Fprintln(os.Stderr, "countjob: checkpoint:", err)
		return
	}
	if err := os.Rename(tmp, filepath.Join(dir, "count")); err != nil {
		fmt.Fprintln(os.Stderr, "countjob: checkpoint:", err)
	}
}

type reporter struct {
	url, token, file string
	client           http.Client
	failed           bool
}

// perf is how fast the job runs: the time of an iteration, of its
// synchronising step and of one forward/backward pass, and with a batch
// size, the data-parallel configuration it reports.
type perf struct {
	iter, step, compute  time.Duration
	batch, global, local int
	accum, gpus          int
	noise                float64
}

// gpus is the number of GPUs tide gave the job ($TIDE_GPUS), at least 1.
func gpus() int {
	n, err := strconv.Atoi(os.Getenv("TIDE_GPUS"))
	if err != nil || n < 1 {
		if devs := os.Getenv("CUDA_VISIBLE_DEVICES"); devs != "" {
			return len(strings.Split(devs, ","))
		}
		return 1
	}
	return n
}

// send reports progress; a failed report is not an error for the job.
func (r *reporter) send(step float64, steps int, p perf) {
	rep := map[string]any{"step": step, "total_steps": steps, "message": fmt.Sprintf("step %d/%d", int(step), steps)}
	if p.iter > 0 {
		rep["throughput"] = float64(time.Second) / float64(p.iter)
	}
	if p.batch > 0 && p.iter > 0 {
		rep["throughput"] = float64(p.global) * float64(time.Second) / float64(p.iter)
		rep["step_time"], rep["compute_time"] = p.step.Seconds(), p.compute.Seconds()
		rep["local_bsz"], rep["replicas"], rep["nodes"] = p.local, p.gpus, 1
		if p.noise > 0 {
			// Noise scale = grad_var/grad_sqr x the initial batch.
			rep["grad_sqr"], rep["grad_var"] = 1.0, p.noise/float64(p.batch)
		}
	}
	body, _ := json.Marshal(rep)
	switch {
	case r.url != "":
		r.client.Timeout = 2 * time.Second
		req, err := http.NewRequest(http.MethodPost, r.url, bytes.NewReader(body))
		if err != nil {
			return
		}
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Authorization", "Bearer "+r.token)
		resp, err := r.client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		if (err != nil || resp.StatusCode >= 300) && !r.failed {
			r.failed = true // say it once
			fmt.Fprintf(os.Stderr, "countjob: progress report failed: %v\n", statusOrErr(resp, err))
		}
	case r.file != "":
		f, err := os.OpenFile(r.file, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return
		}
		f.Write(append(body, '\n'))
		f.Close()
	}
}

func statusOrErr(resp *http.Response, err error) any {
	if err != nil {
		return err
	}
	return resp.Status
}
