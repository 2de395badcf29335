package report

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"math"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// synthRun builds a deterministic run of nJobs jobs and about nSamples
// timeline samples on 64 GPUs, spanning about two days.
func synthRun(policy string, seed int64, nJobs, nSamples int) *Run {
	rng := rand.New(rand.NewSource(seed))
	const gpus = 64
	r := &Run{Policy: policy, Trace: "synthetic", Cluster: "8x8", TotalGPUs: gpus, Seed: seed,
		Events: nSamples * 3, Rounds: nSamples / 2}
	horizon := 2 * 86400.0
	for i := 0; i < nJobs; i++ {
		submit := horizon * 0.6 * float64(i) / float64(max(nJobs, 1))
		wait := rng.ExpFloat64() * 600 * (1 + float64(seed%3))
		run := math.Exp(rng.Float64()*9 + 2) // ~7 s to ~2 days, log-uniform
		g := 1 << rng.Intn(4)
		j := JobRecord{ID: fmt.Sprintf("job-%d", i), Tenant: "t", Model: "m", GPUs: g, Submit: submit,
			Start: submit + wait, Finish: submit + wait + run, State: "finished",
			GPUSeconds: run * float64(g), UsefulGPUSeconds: run * float64(g) * 0.9, LowerBound: run * 0.8,
			Preemptions: rng.Intn(2), Restarts: rng.Intn(2)}
		if i%10 == 0 {
			j.Deadline = submit + run*1.5
		}
		if i%37 == 0 {
			j.Start, j.Finish, j.State, j.GPUSeconds, j.UsefulGPUSeconds = -1, -1, "declined", 0, 0
		}
		r.Jobs = append(r.Jobs, j)
	}
	alloc, queued := 0, 0
	for k := 0; k < nSamples; k++ {
		alloc = max(0, min(gpus, alloc+rng.Intn(9)-4))
		queued = max(0, queued+rng.Intn(5)-2)
		r.Timeline = append(r.Timeline, Sample{T: horizon * float64(k) / float64(nSamples),
			Allocated: int32(alloc), Useful: int32(alloc * 9 / 10), Queued: int32(queued), Running: int32(alloc / 2)})
	}
	return r
}

func TestWriteTable(t *testing.T) {
	sums := []Summary{Summarize(handRun()), Summarize(synthRun("other", 1, 50, 100))}
	var b bytes.Buffer
	if err := WriteTable(&b, sums); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	lines := strings.Split(strings.TrimRight(out, "\n"), "\n")
	if want := len(metricRows) + len(fairnessRows(sums)) + 1; len(lines) != want {
		t.Fatalf("got %d lines, want %d:\n%s", len(lines), want, out)
	}
	for _, want := range []string{"hand", "other", "avg JCT (s)", "116.7 (1m57s)", "lower-bound avg JCT (s)",
		"93.3 (1m33s)", "avg JCT / lower bound (x)", "1.25", "53.0", "33.3", "p99 wait before first start (s)", "avg time waiting, total (s)"} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	// Columns line up: the second column starts at the same offset on every line.
	col := strings.Index(lines[0], "hand")
	for _, l := range lines[1:] {
		if len(l) <= col || l[col-1] != ' ' || l[col] == ' ' {
			t.Errorf("misaligned line %q (column at %d)", l, col)
		}
	}
}

func TestWriteJSON(t *testing.T) {
	meta := Meta{Trace: "philly", Cluster: "64xV100", TotalGPUs: 64, Seed: 7, Jobs: 5}
	noDeadline := Summarize(&Run{Policy: "fifo", Jobs: []JobRecord{{ID: "a", Start: 0, Finish: 1}}})
	bad := Summarize(handRun())
	bad.AvgJCT = math.NaN()
	bad.P99JCT = math.Inf(1)
	bad.DeadlineMetFrac = fptr(math.NaN())
	sums := []Summary{Summarize(handRun()), noDeadline, bad}

	var b bytes.Buffer
	if err := WriteJSON(&b, meta, sums); err != nil {
		t.Fatal(err)
	}
	if !json.Valid(b.Bytes()) {
		t.Fatalf("invalid JSON:\n%s", b.String())
	}
	// Deterministic bytes.
	var b2 bytes.Buffer
	if err := WriteJSON(&b2, meta, sums); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b.Bytes(), b2.Bytes()) {
		t.Error("two writes differ")
	}
	if !strings.HasPrefix(b.String(), "{\n  \"trace\": \"philly\",\n") {
		t.Errorf("want two-space indentation starting with trace, got:\n%.80s", b.String())
	}

	var raw map[string]any
	if err := json.Unmarshal(b.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"trace", "cluster", "total_gpus", "seed", "jobs", "policies"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("top level lacks %q", k)
		}
	}
	pols := raw["policies"].([]any)
	if len(pols) != 3 {
		t.Fatalf("got %d policies, want 3", len(pols))
	}
	required := []string{"name", "jobs", "finished", "avg_jct_s", "median_jct_s", "p95_jct_s", "p99_jct_s",
		"avg_queue_s", "p99_queue_s", "makespan_s", "utilization", "useful_utilization",
		"preemptions_per_job", "restarts_per_job", "deadline_met_frac", "lower_bound_avg_jct_s", "jct_over_lower_bound"}
	for i, p := range pols {
		m := p.(map[string]any)
		for _, k := range required {
			if _, ok := m[k]; !ok {
				t.Errorf("policy %d lacks %q", i, k)
			}
		}
	}
	if v := pols[1].(map[string]any)["deadline_met_frac"]; v != nil {
		t.Errorf("deadline_met_frac without deadlines = %v, want null", v)
	}
	if v := pols[2].(map[string]any); v["avg_jct_s"] != 0.0 || v["p99_jct_s"] != 0.0 || v["deadline_met_frac"] != nil {
		t.Errorf("non-finite values not guarded: %v %v %v", v["avg_jct_s"], v["p99_jct_s"], v["deadline_met_frac"])
	}

	// Round trip into the Go types.
	var back struct {
		Meta
		Policies []Summary `json:"policies"`
	}
	if err := json.Unmarshal(b.Bytes(), &back); err != nil {
		t.Fatal(err)
	}
	if back.Meta != meta {
		t.Errorf("meta round trip: got %+v, want %+v", back.Meta, meta)
	}
	if !summariesClose(back.Policies[0], sums[0]) || !summariesClose(back.Policies[1], sums[1]) {
		t.Errorf("summaries do not round-trip:\n got %+v\nwant %+v", show(back.Policies[0]), show(sums[0]))
	}
	if bad.DeadlineMetFrac == nil || !math.IsNaN(*bad.DeadlineMetFrac) {
		t.Error("WriteJSON modified its argument")
	}
}

func TestWriteDir(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "out")
	evil := handRun()
	evil.Policy = "<b>x</b>"
	runs := []*Run{handRun(), evil, handRun()} // the third clashes with the first
	runs[2].Window = [2]int{1, 4}
	if err := WriteDir(dir, Meta{Trace: "tr<a>ce"}, runs); err != nil {
		t.Fatal(err)
	}

	for _, name := range []string{"jobs-hand.csv", "jobs-_b_x__b_.csv", "jobs-hand-2.csv"} {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		recs, err := csv.NewReader(f).ReadAll()
		f.Close()
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if len(recs) != 1+len(handRun().Jobs) {
			t.Errorf("%s: %d rows, want header + %d", name, len(recs), len(handRun().Jobs))
		}
		if strings.Join(recs[0], ",") != strings.Join(jobsCSVHeader, ",") {
			t.Errorf("%s: header %v", name, recs[0])
		}
		// j1: jct 210-10 = 200, queue 30-10 = 20; j4 never started: both empty.
		col := func(row []string, name string) string {
			for i, h := range jobsCSVHeader {
				if h == name {
					return row[i]
				}
			}
			t.Fatalf("no column %s", name)
			return ""
		}
		if got := col(recs[2], "jct") + "/" + col(recs[2], "queue"); got != "200/20" {
			t.Errorf("%s: j1 jct/queue = %s, want 200/20", name, got)
		}
		if got := col(recs[5], "jct") + "/" + col(recs[5], "queue") + "/" + col(recs[5], "start"); got != "//-1" {
			t.Errorf("%s: j4 jct/queue/start = %s, want //-1", name, got)
		}
		wantCounted := "1"
		if name == "jobs-hand-2.csv" {
			wantCounted = "0" // j0 is outside window [1, 4)
		}
		if got := col(recs[1], "counted"); got != wantCounted {
			t.Errorf("%s: j0 counted = %s, want %s", name, got, wantCounted)
		}
	}

	js, err := os.ReadFile(filepath.Join(dir, "summary.json"))
	if err != nil {
		t.Fatal(err)
	}
	var sj jsonReport
	if err := json.Unmarshal(js, &sj); err != nil {
		t.Fatal(err)
	}
	if sj.Trace != "tr<a>ce" || sj.Cluster != "c" || sj.TotalGPUs != 4 || sj.Jobs != 5 || len(sj.Policies) != 3 {
		t.Errorf("summary.json meta %+v with %d policies", sj.Meta, len(sj.Policies))
	}
	var direct bytes.Buffer
	if err := WriteJSON(&direct, sj.Meta, SummarizeAll(runs)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(js, direct.Bytes()) {
		t.Error("summary.json differs from WriteJSON")
	}

	page, err := os.ReadFile(filepath.Join(dir, "report.html"))
	if err != nil {
		t.Fatal(err)
	}
	checkHTML(t, string(page))
	h := string(page)
	if strings.Contains(h, "<b>x</b>") || strings.Contains(h, "tr<a>ce") {
		t.Error("policy name or trace not escaped")
	}
	if !strings.Contains(h, "&lt;b&gt;x&lt;/b&gt;") {
		t.Error("escaped policy name missing")
	}
	if n := strings.Count(h, "<svg"); n != 4 { // JCT, utilisation, queue, fragmentation
		t.Errorf("%d plots, want 4", n)
	}
}

// checkHTML checks that page is self-contained and well formed enough.
func checkHTML(t *testing.T, page string) {
	t.Helper()
	if !strings.HasPrefix(page, "<!DOCTYPE html>") || !strings.Contains(page, "</html>") {
		t.Error("not a complete HTML document")
	}
	if !strings.Contains(page, "<svg") {
		t.Error("no <svg")
	}
	rest := strings.ReplaceAll(page, `xmlns="http://www.w3.org/2000/svg"`, "")
	// Self-contained: the one inline script (legend clicks) loads nothing.
	for _, bad := range []string{"http://", "https://", "<script src", "<link", "@import", "url("} {
		if strings.Contains(strings.ToLower(rest), bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	// Each SVG is well-formed XML on its own.
	for s := page; ; {
		i := strings.Index(s, "<svg")
		if i < 0 {
			break
		}
		j := strings.Index(s[i:], "</svg>")
		if j < 0 {
			t.Fatal("unterminated <svg>")
		}
		frag := s[i : i+j+len("</svg>")]
		d := xml.NewDecoder(strings.NewReader(frag))
		for {
			_, err := d.Token()
			if err == io.EOF {
				break
			}
			if err != nil {
				t.Fatalf("svg is not well-formed XML: %v", err)
			}
		}
		s = s[i+j:]
	}
	// Tags balance for the elements the page writes.
	for _, tag := range []string{"html", "head", "body", "table", "thead", "tbody", "tr", "svg", "g", "dl"} {
		open := strings.Count(page, "<"+tag+">") + strings.Count(page, "<"+tag+" ")
		if c := strings.Count(page, "</"+tag+">"); open != c {
			t.Errorf("<%s>: %d opened, %d closed", tag, open, c)
		}
	}
}

// TestHTMLSize checks the worst case the page is meant for: 10 policies with
// 100k timeline samples and 10k jobs each stay under 2 MB, and every
// polyline has at most maxSeriesPoints points.
func TestHTMLSize(t *testing.T) {
	if testing.Short() {
		t.Skip("large synthetic runs")
	}
	var runs []*Run
	for i := 0; i < 10; i++ {
		runs = append(runs, synthRun(fmt.Sprintf("policy-%d", i), int64(i), 10000, 100000))
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, MetaOf(runs), runs); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	t.Logf("HTML: %d bytes", len(page))
	if len(page) > 2<<20 {
		t.Errorf("HTML is %d bytes, want < 2 MiB", len(page))
	}
	checkHTML(t, page)
	for _, pl := range strings.Split(page, `points="`)[1:] {
		pts := strings.Count(pl[:strings.IndexByte(pl, '"')], ",")
		if pts > maxSeriesPoints+1 || pts < 2 {
			t.Errorf("polyline with %d points", pts)
		}
	}
}

func TestStepPoints(t *testing.T) {
	tl := []Sample{{T: 0, Allocated: 2}, {T: 10, Allocated: 4}, {T: 30, Allocated: 0}}
	alloc := func(s *Sample) float64 { return float64(s.Allocated) }

	// Few samples: the exact steps, the last one held until end = 40.
	xs, ys := stepPoints(tl, 40, 0, 40, alloc, false, 100)
	wantX := []float64{0, 10, 10, 30, 30, 40}
	wantY := []float64{2, 2, 4, 4, 0, 0}
	if fmt.Sprint(xs, ys) != fmt.Sprint(wantX, wantY) {
		t.Errorf("exact: got %v %v, want %v %v", xs, ys, wantX, wantY)
	}

	// Two buckets over [0, 40): [0, 20) holds 2 for 10 s and 4 for 10 s
	// (mean 3, max 4); [20, 40) holds 4 for 10 s and 0 for 10 s (mean 2, max 4).
	xs, ys = stepPoints(tl, 40, 0, 40, alloc, false, 4)
	if fmt.Sprint(xs, ys) != fmt.Sprint([]float64{0, 20, 20, 40}, []float64{3, 3, 2, 2}) {
		t.Errorf("mean buckets: got %v %v", xs, ys)
	}
	xs, ys = stepPoints(tl, 40, 0, 40, alloc, true, 4)
	if fmt.Sprint(xs, ys) != fmt.Sprint([]float64{0, 20, 20, 40}, []float64{4, 4, 4, 4}) {
		t.Errorf("max buckets: got %v %v", xs, ys)
	}
}

func TestCDFPoints(t *testing.T) {
	// Three finished of four counted jobs: steps up to 3/4.
	xs, ys := cdfPoints([]float64{1, 2, 5}, 4, 100)
	if fmt.Sprint(xs, ys) != fmt.Sprint([]float64{1, 1, 2, 2, 5, 5}, []float64{0, 0.25, 0.25, 0.5, 0.5, 0.75}) {
		t.Errorf("got %v %v", xs, ys)
	}
	v := make([]float64, 10000)
	for i := range v {
		v[i] = float64(i)
	}
	xs, ys = cdfPoints(v, len(v), 100)
	if len(xs) != 100 || xs[0] != 0 || xs[99] != 9999 || ys[99] != 1 {
		t.Errorf("thinned: %d points from %v to %v, last y %v", len(xs), xs[0], xs[len(xs)-1], ys[len(ys)-1])
	}
}

func TestThin(t *testing.T) {
	in := []point{{0, 5}, {1, 5}, {2, 5}, {2, 5}, {2, 1}, {2, 3}, {3, 3}, {4, 3}}
	// (1,5) lies inside a horizontal run; the repeated (2,5) is dropped;
	// (2,1) is a vertical extreme and stays; (3,3) lies inside a run.
	want := []point{{0, 5}, {2, 5}, {2, 1}, {2, 3}, {4, 3}}
	if got := thin(in); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("thin = %v, want %v", got, want)
	}
}

func TestTicks(t *testing.T) {
	tests := []struct {
		name string
		got  []float64
		want []float64
	}{
		{"nice 0..1", niceTicks(0, 1, 5), []float64{0, 0.2, 0.4, 0.6000000000000001, 0.8, 1}},
		{"nice 0..37", niceTicks(0, 37, 5), []float64{0, 10, 20, 30, 40}},
		{"time 0..2d", timeTicks(0, 2*86400, 8), []float64{0, 21600, 43200, 64800, 86400, 108000, 129600, 151200, 172800}},
		{"time 0..100s", timeTicks(0, 100, 8), []float64{0, 15, 30, 45, 60, 75, 90, 105}},
	}
	for _, tc := range tests {
		if fmt.Sprint(tc.got) != fmt.Sprint(tc.want) {
			t.Errorf("%s: got %v, want %v", tc.name, tc.got, tc.want)
		}
	}
	lo, hi, ticks := logTimeRange(7, 90000)
	if lo != 1 || hi != 7*86400 || fmt.Sprint(ticks) != fmt.Sprint([]float64{1, 10, 60, 600, 3600, 36000, 86400, 604800}) {
		t.Errorf("logTimeRange(7, 90000) = %v %v %v", lo, hi, ticks)
	}
	for v, want := range map[float64]string{0: "0", 0.5: "500ms", 30: "30s", 600: "10m", 129600: "1d12h"} {
		if got := durationTick(v); got != want {
			t.Errorf("durationTick(%v) = %q, want %q", v, got, want)
		}
	}
}

func BenchmarkWriteDir(b *testing.B) {
	runs := []*Run{synthRun("bench", 1, 10000, 100000)}
	dir := b.TempDir()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if err := WriteDir(dir, Meta{}, runs); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHTMLManyPolicies: with 24 policies the summary table scrolls in its
// own box, every series has its own colour and dash pair, and every legend
// entry names the series a click hides.
func TestHTMLManyPolicies(t *testing.T) {
	var runs []*Run
	for i := 0; i < 24; i++ {
		runs = append(runs, synthRun(fmt.Sprintf("policy-%d", i), int64(i), 50, 200))
	}
	var b bytes.Buffer
	if err := WriteHTML(&b, MetaOf(runs), runs); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	checkHTML(t, page)
	if i, j := strings.Index(page, `<div class="scroll">`), strings.Index(page, "<table>"); i < 0 || j < i {
		t.Error("the summary table is not inside its scroll box")
	}
	styles := map[string]int{}
	for i := range runs {
		if k, dup := styles[seriesStyle(i)]; dup {
			t.Errorf("series %d and %d are drawn alike: %s", k, i, seriesStyle(i))
		}
		styles[seriesStyle(i)] = i
		if !strings.Contains(page, fmt.Sprintf(`class="legend" data-series="%d"`, i)) ||
			!strings.Contains(page, fmt.Sprintf(`<polyline data-series="%d"`, i)) {
			t.Errorf("series %d: no legend entry or line to hide", i)
		}
	}
}
