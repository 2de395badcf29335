package main

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/data"
)

// TestFlagsScenarioParity: the same run given as tide sim's flags and as a
// scenario file prints the same table. The trace is the first jobs of
// workload-6 with its first submission at 0 (a scenario counts time from
// its first job); the policies are those a difference in assembly would
// show: Pollux adapts batch sizes, DeepBoot and Optimus are capped by
// batch limits, tiresias-gittins reads the service estimate.
func TestFlagsScenarioParity(t *testing.T) {
	if testing.Short() {
		t.Skip("runs Pollux twice")
	}
	dir := t.TempDir()
	f, err := data.FS.Open(data.DefaultTrace)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	t0 := -1
	for n := 0; sc.Scan() && n <= 24; n++ {
		line := sc.Text()
		if n > 0 { // name,time,application,num_replicas,batch_size
			cols := strings.Split(line, ",")
			at, err := strconv.Atoi(cols[1])
			if err != nil {
				t.Fatalf("workload-6 line %d: %v", n+1, err)
			}
			if t0 < 0 {
				t0 = at
			}
			cols[1] = strconv.Itoa(at - t0)
			line = strings.Join(cols, ",")
		}
		fmt.Fprintln(&b, line)
	}
	tr := filepath.Join(dir, "w.csv")
	if err := os.WriteFile(tr, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	policies := "pollux,deepboot,optimus,tiresias-gittins"
	yaml := fmt.Sprintf("name: parity\ncluster: 8x4:t4\ntrace: {file: w.csv, format: pollux}\nmodel: {kind: pollux}\n"+
		"migration: {free: true}\nround: 60\nseed: 1\npolicies: [%s]\n", policies)
	path := filepath.Join(dir, "s.yaml")
	if err := os.WriteFile(path, []byte(yaml), 0o644); err != nil {
		t.Fatal(err)
	}
	code, flags, errs := tide(t, "sim", "--trace", tr, "--format", "pollux", "--cluster", "8x4:t4", "--model", "pollux",
		"--round", "60", "--seed", "1", "--policy", policies)
	if code != 0 {
		t.Fatalf("flags: exit %d: %s", code, errs)
	}
	code, file, errs := tide(t, "sim", "--scenario", path)
	if code != 0 {
		t.Fatalf("scenario: exit %d: %s", code, errs)
	}
	table := func(out string) string {
		_, after, ok := strings.Cut(out, "\n\nmetric ")
		if !ok {
			t.Fatalf("no table in\n%s", out)
		}
		return after
	}
	// A scenario also reports its sites; every row the flags print must
	// be the same.
	rows := map[string]string{}
	for _, l := range strings.Split(table(file), "\n") {
		rows[rowName(l)] = strings.Join(strings.Fields(l), " ")
	}
	for _, l := range strings.Split(table(flags), "\n") {
		if got, want := rows[rowName(l)], strings.Join(strings.Fields(l), " "); got != want {
			t.Errorf("row %q: flags print %q, the scenario %q", rowName(l), want, got)
		}
	}
}

// rowName is a table row's metric name: the text before the first run of
// two spaces.
func rowName(l string) string {
	name, _, _ := strings.Cut(strings.TrimSpace(l), "  ")
	return name
}
