package report

import (
	"math"
	"reflect"
	"testing"
	"unsafe"
)

func fptr(x float64) *float64 { return &x }

// handRun is a five-job run on 4 GPUs whose metrics are worked out by hand
// in TestSummarize.
//
//	job  submit start finish  deadline  gpu-s useful restart-s  lb   preempt restarts resizes state
//	j0     0     0    100       -        100    90     10       80      0       0       0    finished
//	j1    10    30    210      200       300   280     20      150      1       1       0    finished  (misses deadline)
//	j2    20    20     70      100        50    50      0       50      0       0       2    finished  (meets deadline)
//	j3    30   130     -1      300        80    80      0        0      1       2       0    running   (unfinished: misses)
//	j4    40    -1     -1       -          0     0      0        0      0       0       0    declined  (never started)
//
// The last timeline sample is at t=250. Total time waiting (WaitSeconds):
// j0 0, j1 50 (20 before its start, 30 preempted), j2 0, j3 170 (100 before
// its start, 70 preempted), j4 10 (declined at 50).
func handRun() *Run {
	return &Run{
		Policy: "hand", Trace: "t", Cluster: "c", TotalGPUs: 4, Events: 17, Rounds: 5,
		Jobs: []JobRecord{
			{ID: "j0", GPUs: 1, Submit: 0, Start: 0, Finish: 100, State: "finished",
				GPUSeconds: 100, UsefulGPUSeconds: 90, RestartSeconds: 10, LowerBound: 80},
			{ID: "j1", GPUs: 2, Submit: 10, Start: 30, Finish: 210, Deadline: 200, State: "finished",
				Preemptions: 1, Restarts: 1, GPUSeconds: 300, UsefulGPUSeconds: 280, RestartSeconds: 20, LowerBound: 150, WaitSeconds: 50},
			{ID: "j2", GPUs: 1, Submit: 20, Start: 20, Finish: 70, Deadline: 100, State: "finished",
				Resizes: 2, GPUSeconds: 50, UsefulGPUSeconds: 50, LowerBound: 50},
			{ID: "j3", GPUs: 1, Submit: 30, Start: 130, Finish: -1, Deadline: 300, State: "running",
				Preemptions: 1, Restarts: 2, GPUSeconds: 80, UsefulGPUSeconds: 80, WaitSeconds: 170},
			{ID: "j4", GPUs: 8, Submit: 40, Start: -1, Finish: -1, State: "declined", WaitSeconds: 10},
		},
		Timeline: []Sample{
			{T: 0, Allocated: 1, Useful: 1, Running: 1},
			{T: 250, Allocated: 1, Useful: 1, Running: 1},
		},
	}
}

func TestSummarize(t *testing.T) {
	windowed := handRun()
	windowed.Window = [2]int{1, 4}

	tests := []struct {
		name string
		run  *Run
		want Summary
	}{
		{
			// All five jobs count.
			//   JCTs: j0 100, j1 200, j2 50 -> sorted [50 100 200], mean 350/3.
			//   median: h = 2*0.50 = 1    -> 100
			//   p95:    h = 2*0.95 = 1.9  -> 100 + 0.9*(200-100)  = 190
			//   p99:    h = 2*0.99 = 1.98 -> 100 + 0.98*(200-100) = 198
			//   queue (started j0..j3): 0, 20, 0, 100 -> mean 120/4 = 30;
			//     sorted [0 0 20 100], p99: h = 3*0.99 = 2.97 -> 20 + 0.97*80 = 97.6
			//   makespan: 210 - 0 = 210
			//   span: first submit 0 to max(last finish 210, last sample 250) = 250
			//   utilisation: (100+300+50+80+0) / (4*250) = 530/1000 = 0.53;
			//     GPU-hours charged 530/3600
			//   useful:      (90+280+50+80+0)  / 1000    = 0.5
			//   per job (5): preemptions 2/5, restarts 3/5, resizes 2/5, restart s 30/5 = 6
			//   deadlines: j1, j2, j3; met only j2 -> 1/3
			//   lower bound: j0 80, j1 150, j2 50 -> 280/3; ratio (350/3)/(280/3) = 1.25
			//   total waiting: (0+50+0+170+10)/5 = 46
			name: "all jobs",
			run:  handRun(),
			want: Summary{
				Name: "hand", Jobs: 5, Finished: 3,
				AvgJCT: 350.0 / 3, MedianJCT: 100, P95JCT: 190, P99JCT: 198,
				Unfinished: 2, NeverStarted: 1, Declined: 1,
				AvgQueue: 30, P99Queue: 97.6, AvgWait: 46,
				LowerBoundAvgJCT: fptr(280.0 / 3), JCTOverLowerBound: fptr(1.25),
				Makespan: 210, Utilization: 0.53, UsefulUtilization: 0.5, GPUHours: 530.0 / 3600,
				PreemptionsPerJob: 0.4, RestartsPerJob: 0.6, ResizesPerJob: 0.4, RestartSecondsPerJob: 6,
				JobsWithDeadline: 3, DeadlineMetFrac: fptr(1.0 / 3),
				Events: 17, Rounds: 5,
			},
		},
		{
			// Window [1, 4): j1, j2, j3 count.
			//   JCTs: j1 200, j2 50 -> sorted [50 200], mean 125.
			//   median: h = 0.5  -> 50 + 0.5*150  = 125
			//   p95:    h = 0.95 -> 50 + 0.95*150 = 192.5
			//   p99:    h = 0.99 -> 50 + 0.99*150 = 198.5
			//   queue: 20, 0, 100 -> mean 40; sorted [0 20 100],
			//     p99: h = 2*0.99 = 1.98 -> 20 + 0.98*80 = 98.4
			//   makespan and utilisation use the whole run: 210, 0.53, 0.5
			//   per job (3): preemptions 2/3, restarts 3/3, resizes 2/3, restart s 20/3
			//   deadlines: j1, j2, j3; met j2 -> 1/3
			//   lower bound: j1 150, j2 50 -> 100; ratio 125/100 = 1.25
			//   total waiting: (50+0+170)/3
			name: "window",
			run:  windowed,
			want: Summary{
				Name: "hand", Jobs: 3, Finished: 2,
				AvgJCT: 125, MedianJCT: 125, P95JCT: 192.5, P99JCT: 198.5,
				Unfinished: 1, NeverStarted: 0, Declined: 0,
				AvgQueue: 40, P99Queue: 98.4, AvgWait: 220.0 / 3,
				LowerBoundAvgJCT: fptr(100), JCTOverLowerBound: fptr(1.25),
				Makespan: 210, Utilization: 0.53, UsefulUtilization: 0.5, GPUHours: 530.0 / 3600,
				PreemptionsPerJob: 2.0 / 3, RestartsPerJob: 1, ResizesPerJob: 2.0 / 3, RestartSecondsPerJob: 20.0 / 3,
				JobsWithDeadline: 3, DeadlineMetFrac: fptr(1.0 / 3),
				Events: 17, Rounds: 5, Window: []int{1, 4},
			},
		},
		{
			// Window [3, 99) is clamped to [3, 5): j3 (unfinished) and j4
			// (never started). No JCTs -> 0; queue: j3 only, 100.
			// Deadline: j3 has one and misses it -> 0. No lower bound: nil.
			// Per job (2): preemptions 1/2, restarts 2/2. Waiting (170+10)/2.
			name: "window clamped, nothing finished",
			run: func() *Run {
				r := handRun()
				r.Window = [2]int{3, 99}
				return r
			}(),
			want: Summary{
				Name: "hand", Jobs: 2, Finished: 0,
				Unfinished: 2, NeverStarted: 1, Declined: 1,
				AvgQueue: 100, P99Queue: 100, AvgWait: 90,
				Makespan: 210, Utilization: 0.53, UsefulUtilization: 0.5, GPUHours: 530.0 / 3600,
				PreemptionsPerJob: 0.5, RestartsPerJob: 1,
				JobsWithDeadline: 1, DeadlineMetFrac: fptr(0),
				Events: 17, Rounds: 5, Window: []int{3, 5},
			},
		},
		{
			// Two jobs on 2 GPUs, no deadlines, no lower bounds, no
			// timeline. j0: submit 5, start 5, finish 15 (JCT 10), 20 GPU-s.
			// j1: submit 5, start 15, finish 45 (JCT 40, queue 10), 30 GPU-s.
			//   mean JCT 25; median h = 0.5 -> 25; p95 h = 0.95 -> 10+0.95*30 = 38.5;
			//   p99 -> 10+0.99*30 = 39.7. queue [0 10]: mean 5, p99 9.9.
			//   makespan 45-5 = 40; span 5..45 = 40; utilisation 50/(2*40) = 0.625.
			name: "no deadlines, no bounds",
			run: &Run{Policy: "p", TotalGPUs: 2, Jobs: []JobRecord{
				{ID: "a", Submit: 5, Start: 5, Finish: 15, GPUSeconds: 20, UsefulGPUSeconds: 20},
				{ID: "b", Submit: 5, Start: 15, Finish: 45, GPUSeconds: 30, UsefulGPUSeconds: 15},
			}},
			want: Summary{
				Name: "p", Jobs: 2, Finished: 2,
				AvgJCT: 25, MedianJCT: 25, P95JCT: 38.5, P99JCT: 39.7,
				AvgQueue: 5, P99Queue: 9.9,
				Makespan: 40, Utilization: 0.625, UsefulUtilization: 35.0 / 80, GPUHours: 50.0 / 3600,
			},
		},
		{
			name: "empty run",
			run:  &Run{Policy: "empty", TotalGPUs: 8},
			want: Summary{Name: "empty"},
		},
		{
			// No GPUs: utilisation would divide by zero and is 0.
			name: "zero GPUs",
			run: &Run{Policy: "z", Jobs: []JobRecord{
				{ID: "a", Submit: 0, Start: 0, Finish: 10, GPUSeconds: 10},
			}},
			want: Summary{Name: "z", Jobs: 1, Finished: 1, AvgJCT: 10, MedianJCT: 10, P95JCT: 10, P99JCT: 10, Makespan: 10, GPUHours: 10.0 / 3600},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := Summarize(tc.run)
			got.Fairness = nil // fairness_test.go checks it
			if !summariesClose(got, tc.want) {
				t.Errorf("Summarize:\n got %+v\nwant %+v", show(got), show(tc.want))
			}
		})
	}
}

// summariesClose compares summaries field by field, floats to 1e-9.
func summariesClose(a, b Summary) bool {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	for i := 0; i < va.NumField(); i++ {
		fa, fb := va.Field(i), vb.Field(i)
		switch fa.Kind() {
		case reflect.Float64:
			if math.Abs(fa.Float()-fb.Float()) > 1e-9 {
				return false
			}
		case reflect.Pointer:
			if fa.IsNil() != fb.IsNil() {
				return false
			}
			if fa.IsNil() {
				continue
			}
			if fa.Elem().Kind() != reflect.Float64 {
				if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
					return false
				}
			} else if math.Abs(fa.Elem().Float()-fb.Elem().Float()) > 1e-9 {
				return false
			}
		default:
			if !reflect.DeepEqual(fa.Interface(), fb.Interface()) {
				return false
			}
		}
	}
	return true
}

// show makes pointer fields readable in failure messages.
func show(s Summary) map[string]any {
	m := map[string]any{}
	v := reflect.ValueOf(s)
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		if f.Kind() == reflect.Pointer && !f.IsNil() {
			m[v.Type().Field(i).Name] = f.Elem().Interface()
			continue
		}
		m[v.Type().Field(i).Name] = f.Interface()
	}
	return m
}

func TestPercentile(t *testing.T) {
	tests := []struct {
		xs   []float64
		p    float64
		want float64
	}{
		{nil, 50, 0},         // no values
		{[]float64{7}, 0, 7}, // one value: every percentile is it
		{[]float64{7}, 99, 7},
		{[]float64{1, 2, 3, 4}, 0, 1},
		{[]float64{1, 2, 3, 4}, 100, 4},
		{[]float64{1, 2, 3, 4}, 50, 2.5},                               // h = 3*0.5 = 1.5   -> 2 + 0.5*1
		{[]float64{1, 2, 3, 4}, 25, 1.75},                              // h = 0.75          -> 1 + 0.75*1
		{[]float64{1, 2, 3, 4}, 90, 3.7},                               // h = 2.7           -> 3 + 0.7*1
		{[]float64{15, 20, 35, 40, 50}, 40, 29},                        // h = 4*0.4 = 1.6   -> 20 + 0.6*15
		{[]float64{15, 20, 35, 40, 50}, 50, 35},                        // h = 2             -> 35 exactly
		{[]float64{10, 20, 30, 40, 50, 60, 70, 80, 90, 100}, 99, 99.1}, // h = 8.91 -> 90 + 0.91*10
	}
	for _, tc := range tests {
		if got := percentile(tc.xs, tc.p); math.Abs(got-tc.want) > 1e-9 {
			t.Errorf("percentile(%v, %v) = %v, want %v", tc.xs, tc.p, got, tc.want)
		}
	}
}

func TestHumanDuration(t *testing.T) {
	tests := []struct {
		in   float64
		want string
	}{
		{0, "0s"},
		{1.5, "1.5s"},
		{45, "45s"},
		{59.97, "60s"},
		{60, "1m"},
		{1235, "20m35s"},
		{3599.7, "1h"},
		{5400, "1h30m"},
		{12300, "3h25m"},
		{86400 * 2.125, "2d3h"},
		{86399, "1d"},
		{-90, "-1m30s"},
	}
	for _, tc := range tests {
		if got := humanDuration(tc.in); got != tc.want {
			t.Errorf("humanDuration(%v) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestSampleSize: a timeline sample stays 32 bytes (a run of millions of
// jobs keeps millions of them; with int counts it was 56).
func TestSampleSize(t *testing.T) {
	if n := unsafe.Sizeof(Sample{}); n > 32 {
		t.Errorf("Sample is %d bytes, want <= 32", n)
	}
}
