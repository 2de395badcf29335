package localexec

import (
	"bytes"
	"context"
	"encoding/csv"
	"errors"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/tide-sched/tide/cluster"
)

// GPU is one device of this machine.
type GPU struct {
	Index  int     // CUDA index (CUDA_VISIBLE_DEVICES)
	Name   string  // as the driver names it, e.g. "Tesla T4"
	Type   string  // tide's GPU type, e.g. "t4"
	MemGiB float64 // memory, GiB
	Fake   bool    // a pretend GPU (fake:N): nothing runs on it
}

// ErrNoGPUs is returned by Discover when the machine shows no NVIDIA GPU.
var ErrNoGPUs = errors.New("no NVIDIA GPUs found")

// Discover returns the GPUs named by spec:
//
//   - "fake:N[:TYPE]" gives N pretend GPUs of TYPE (default t4), for tests
//     and demos on machines without GPUs: jobs see CUDA_VISIBLE_DEVICES
//     but nothing checks it;
//   - "", "auto" or "nvidia" asks nvidia-smi; ErrNoGPUs (wrapped) when it
//     is missing, fails, lists none or prints what it should not.
func Discover(spec string) ([]GPU, error) {
	switch {
	case spec == "" || spec == "nvidia" || spec == "auto":
		return nvidiaSMI()
	case strings.HasPrefix(spec, "fake:"):
		return fake(spec)
	}
	return nil, fmt.Errorf("--gpus %q: want fake:N[:TYPE] (e.g. fake:4:t4) or nvidia", spec)
}

func fake(spec string) ([]GPU, error) {
	parts := strings.Split(spec, ":")
	if len(parts) > 3 {
		return nil, fmt.Errorf("--gpus %q: want fake:N[:TYPE]", spec)
	}
	n, err := strconv.Atoi(parts[1])
	if err != nil || n <= 0 || n > 1024 {
		return nil, fmt.Errorf("--gpus %q: the count %q is not an integer in [1, 1024]", spec, parts[1])
	}
	typ := "t4"
	if len(parts) == 3 {
		typ = strings.ToLower(strings.TrimSpace(parts[2]))
		if typ == "" || strings.ContainsAny(typ, " ,:/") {
			return nil, fmt.Errorf("--gpus %q: bad GPU type %q", spec, parts[2])
		}
	}
	mem := cluster.DefaultGPUMemGiB[typ]
	if mem == 0 {
		mem = 16
	}
	gpus := make([]GPU, n)
	for i := range gpus {
		gpus[i] = GPU{Index: i, Name: "fake " + typ, Type: typ, MemGiB: mem, Fake: true}
	}
	return gpus, nil
}

func nvidiaSMI() ([]GPU, error) {
	path, err := exec.LookPath("nvidia-smi")
	if err != nil {
		return nil, fmt.Errorf("%w: nvidia-smi is not in PATH (use --gpus fake:N:TYPE to run without GPUs)", ErrNoGPUs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, path, "--query-gpu=index,name,memory.total", "--format=csv,noheader,nounits")
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%w: nvidia-smi: %v: %s", ErrNoGPUs, err, strings.TrimSpace(stderr.String()))
	}
	gpus, err := ParseNvidiaSMI(out)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoGPUs, err)
	}
	if len(gpus) == 0 {
		return nil, fmt.Errorf("%w: nvidia-smi lists none", ErrNoGPUs)
	}
	return gpus, nil
}

// ParseNvidiaSMI reads the output of
// nvidia-smi --query-gpu=index,name,memory.total --format=csv,noheader[,nounits]:
// one "INDEX, NAME, MEMORY" line per GPU, memory in MiB (with or without
// the " MiB" unit).
func ParseNvidiaSMI(out []byte) ([]GPU, error) {
	r := csv.NewReader(bytes.NewReader(out))
	r.TrimLeadingSpace = true
	r.FieldsPerRecord = 3
	rows, err := r.ReadAll()
	if err != nil {
		return nil, fmt.Errorf("nvidia-smi output: %w", err)
	}
	var gpus []GPU
	for i, row := range rows {
		idx, err := strconv.Atoi(strings.TrimSpace(row[0]))
		if err != nil || idx < 0 {
			return nil, fmt.Errorf("nvidia-smi output line %d: index %q is not an integer", i+1, row[0])
		}
		mem := strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(row[2]), "MiB"))
		mib, err := strconv.ParseFloat(mem, 64)
		if err != nil || mib < 0 {
			return nil, fmt.Errorf("nvidia-smi output line %d: memory %q is not a number of MiB", i+1, row[2])
		}
		name := strings.TrimSpace(row[1])
		gpus = append(gpus, GPU{Index: idx, Name: name, Type: GPUType(name, mib), MemGiB: mib / 1024})
	}
	return gpus, nil
}

// GPUType maps a driver's GPU name to tide's type names (those of cluster
// specs and throughput tables): "Tesla T4" -> t4, "NVIDIA A100-SXM4-80GB"
// -> a100-80, "NVIDIA H100 80GB HBM3" -> h100, "NVIDIA GeForce RTX 3090" ->
// rtx3090. Unknown names keep their first word, lower-cased.
func GPUType(name string, memMiB float64) string {
	n := strings.ToLower(strings.TrimSpace(name))
	for changed := true; changed; {
		changed = false
		for _, p := range []string{"nvidia ", "tesla ", "geforce ", "quadro "} {
			if s, ok := strings.CutPrefix(n, p); ok {
				n, changed = s, true
			}
		}
	}
	words := strings.FieldsFunc(n, func(r rune) bool { return r == ' ' || r == '-' || r == '_' })
	if len(words) == 0 {
		return "gpu"
	}
	t := words[0]
	if (t == "rtx" || t == "gtx") && len(words) > 1 {
		t += words[1]
	}
	if t == "a100" && memMiB > 60*1024 {
		t = "a100-80"
	}
	var b strings.Builder
	for _, r := range t {
		if (r >= 'a' && r <= 'z') || (r >= '0' && r <= '9') || r == '-' {
			b.WriteRune(r)
		}
	}
	if b.Len() == 0 {
		return "gpu"
	}
	return b.String()
}

// Cluster describes the machine as a tide cluster: one node per GPU type
// (all of one machine), and devices[g] is the CUDA index of cluster GPU g.
func Cluster(gpus []GPU) (c *cluster.Cluster, devices []int, err error) {
	if len(gpus) == 0 {
		return nil, nil, ErrNoGPUs
	}
	var types []string
	byType := map[string][]GPU{}
	seen := map[int]bool{}
	for _, g := range gpus {
		if seen[g.Index] {
			return nil, nil, fmt.Errorf("GPU index %d listed twice", g.Index)
		}
		seen[g.Index] = true
		if _, ok := byType[g.Type]; !ok {
			types = append(types, g.Type)
		}
		byType[g.Type] = append(byType[g.Type], g)
	}
	var nodes []cluster.Node
	for _, t := range types {
		name := "local"
		if len(types) > 1 {
			name = "local-" + t
		}
		gs := byType[t]
		nodes = append(nodes, cluster.Node{Name: name, GPUType: t, GPUs: len(gs), GPUMem: gs[0].MemGiB})
		for _, g := range gs {
			devices = append(devices, g.Index)
		}
	}
	c, err = cluster.New(nodes)
	if err != nil {
		return nil, nil, fmt.Errorf("local cluster: %w", err)
	}
	return c, devices, nil
}
