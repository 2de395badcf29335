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
	flag.Parse()
	if *steps <= 0 || *stepTime < 0 || *every <= 0 {
		fmt.Fprintln(os.Stderr, "countjob: -steps and -checkpoint-every must be > 0, -step-time >= 0")
		os.Exit(2)
	}
	ckpt := os.Getenv("TIDE_CHECKPOINT_DIR")
	if ckpt == "" {
		ckpt = "."
	}
	attempt, _ := strconv.Atoi(os.Getenv("TIDE_ATTEMPT"))
	r := &reporter{url: os.Getenv("TIDE_REPORT_URL"), token: os.Getenv("TIDE_REPORT_TOKEN"), file: os.Getenv("TIDE_REPORT_FILE")}

	step := load(ckpt)
	fmt.Printf("countjob: resuming at step %d of %d (attempt %s, restarts %s, GPUs %q)\n", step, *steps,
		os.Getenv("TIDE_ATTEMPT"), os.Getenv("TIDE_RESTARTS"), os.Getenv("CUDA_VISIBLE_DEVICES"))
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGTERM, syscall.SIGINT)
	tick := time.NewTicker(max(*stepTime, time.Microsecond))
	defer tick.Stop()
	start := step
	for step < *steps {
		select {
		case s := <-sig:
			save(ckpt, step)
			fmt.Printf("countjob: %s at step %d: checkpointed, exiting\n", s, step)
			os.Exit(143)
		case <-tick.C:
		}
		step++
		fmt.Printf("step %d/%d\n", step, *steps)
		if step%*every == 0 {
			save(ckpt, step)
		}
		r.send(step, *steps, *stepTime)
		if attempt > 0 && attempt <= *failAttempts && step-start >= 2 {
			save(ckpt, step)
			fmt.Printf("countjob: failing on purpose (attempt %d of %d failing ones)\n", attempt, *failAttempts)
			os.Exit(3)
		}
	}
	save(ckpt, step)
	r.send(step, *steps, *stepTime)
	fmt.Println("countjob: done")
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

// send reports progress; a failed report is not an error for the job.
func (r *reporter) send(step, steps int, stepTime time.Duration) {
	rep := map[string]any{"step": step, "total_steps": steps, "message": fmt.Sprintf("step %d/%d", step, steps)}
	if stepTime > 0 {
		rep["throughput"] = float64(time.Second) / float64(stepTime)
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
