package localexec

import (
	"bytes"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
)

// GPU sharing (docs/sharing.md): jobs that hold part of a GPU run on it
// together. Each sees the GPU in CUDA_VISIBLE_DEVICES as a whole-GPU job
// would, plus limits for its part (Launch.Share, Launch.GPUMemGiB), and,
// where the machine has CUDA MPS, a connection to one MPS control daemon
// per shared GPU, which tide starts when the first job sharing the GPU
// launches and stops when the last one has ended (MPS).

// MPSControl is the name of CUDA MPS's control program.
const MPSControl = "nvidia-cuda-mps-control"

// MPS runs one CUDA MPS control daemon per GPU that fractional jobs share.
// The zero MPS (or a nil one) has MPS unavailable: Acquire returns no
// pipe directory and jobs share GPUs by time slicing, with their limits
// in the environment only. Its methods are safe for concurrent use.
type MPS struct {
	bin string // the control program; "" = unavailable
	dir string // root of the per-GPU pipe and log directories

	mu    sync.Mutex
	users map[int]int // CUDA index -> jobs holding a part of it
}

// NewMPS returns the daemon manager for a machine: with bin "" and real
// GPUs, the control program found in PATH (MPS unavailable when absent);
// with fake GPUs, unavailable unless bin names a program (tests pass a
// stand-in); "off" turns it off. Daemons keep their pipes and logs under
// dir/gpu<N>/.
func NewMPS(bin, dir string, gpus []GPU) *MPS {
	fake := len(gpus) > 0
	for _, g := range gpus {
		fake = fake && g.Fake
	}
	switch {
	case bin == "off":
		bin = ""
	case bin == "" && !fake:
		bin, _ = exec.LookPath(MPSControl)
	}
	return &MPS{bin: bin, dir: dir, users: map[int]int{}}
}

// Available reports whether tide runs MPS daemons here.
func (m *MPS) Available() bool { return m != nil && m.bin != "" }

// Program is the control program tide runs, "" when MPS is unavailable.
func (m *MPS) Program() string {
	if m == nil {
		return ""
	}
	return m.bin
}

// PipeDir is the pipe directory of GPU dev's daemon, which its clients
// name in CUDA_MPS_PIPE_DIRECTORY.
func (m *MPS) PipeDir(dev int) string { return filepath.Join(m.dir, "gpu"+strconv.Itoa(dev), "pipe") }

// Acquire counts one more job on GPU dev, starting its daemon first when
// it is the first, and returns the pipe directory the job must use; ""
// when MPS is unavailable.
func (m *MPS) Acquire(dev int) (string, error) {
	if !m.Available() {
		return "", nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.users[dev] == 0 {
		if err := m.control(dev, "-d", ""); err != nil {
			return "", fmt.Errorf("start the MPS daemon of GPU %d: %w", dev, err)
		}
	}
	m.users[dev]++
	return m.PipeDir(dev), nil
}

// Adopt counts one more job on GPU dev whose daemon already runs (a job
// a restarted server re-adopts, its daemon started by the server before).
func (m *MPS) Adopt(dev int) {
	if !m.Available() {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.users[dev]++
}

// Release counts one job fewer on GPU dev and stops its daemon when none
// is left. Releasing a GPU no job acquired does nothing.
func (m *MPS) Release(dev int) error {
	if !m.Available() {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.users[dev] == 0 {
		return nil
	}
	m.users[dev]--
	if m.users[dev] > 0 {
		return nil
	}
	delete(m.users, dev)
	if err := m.control(dev, "", "quit\n"); err != nil {
		return fmt.Errorf("stop the MPS daemon of GPU %d: %w", dev, err)
	}
	return nil
}

// control runs the control program for GPU dev with arg (if any) and
// input on its standard input.
func (m *MPS) control(dev int, arg, input string) error {
	pipe := m.PipeDir(dev)
	logs := filepath.Join(filepath.Dir(pipe), "log")
	for _, d := range []string{pipe, logs} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	var args []string
	if arg != "" {
		args = append(args, arg)
	}
	cmd := exec.Command(m.bin, args...)
	cmd.Env = append(os.Environ(), "CUDA_VISIBLE_DEVICES="+strconv.Itoa(dev),
		"CUDA_MPS_PIPE_DIRECTORY="+pipe, "CUDA_MPS_LOG_DIRECTORY="+logs)
	cmd.Stdin = strings.NewReader(input)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w: %s", m.bin, arg, err, bytes.TrimSpace(out.Bytes()))
	}
	return nil
}

// shareEnv is the environment of a job holding part of its GPUs
// (ShareEnv, for its devices and MPS pipe directory).
func (l *Launch) shareEnv() []string {
	return ShareEnv(l.Share, l.GPUMemGiB, len(l.Devices), l.MPSPipeDir)
}

// ShareEnv is the environment of a process holding part of each of its
// devices GPUs (share of the compute, memGiB of the memory; 0 when not
// given): its share as MPS's active thread percentage (rounded up, 1 to
// 100) and TIDE_GPU_SHARE; its memory as MPS's pinned memory limit on each
// of its devices (numbered as the process sees them, from 0) and
// TIDE_GPU_MEM_GIB; pipeDir, when a daemon serves it, as
// CUDA_MPS_PIPE_DIRECTORY. Frameworks without MPS can apply TIDE_GPU_SHARE
// or TIDE_GPU_MEM_GIB themselves (PyTorch:
// torch.cuda.set_per_process_memory_fraction). tide serve and tide kube
// (for TideJob workers) give it.
func ShareEnv(share, memGiB float64, devices int, pipeDir string) []string {
	var env []string
	if share > 0 {
		pct := min(100, max(1, int(math.Ceil(share*100-1e-9))))
		env = append(env, "CUDA_MPS_ACTIVE_THREAD_PERCENTAGE="+strconv.Itoa(pct),
			"TIDE_GPU_SHARE="+strconv.FormatFloat(share, 'g', 6, 64))
	}
	if memGiB > 0 {
		mib := int(math.Floor(memGiB * 1024))
		limits := make([]string, devices)
		for i := range limits {
			limits[i] = fmt.Sprintf("%d=%dM", i, mib)
		}
		env = append(env, "CUDA_MPS_PINNED_DEVICE_MEM_LIMIT="+strings.Join(limits, ","),
			"TIDE_GPU_MEM_GIB="+strconv.FormatFloat(memGiB, 'g', 6, 64))
	}
	if pipeDir != "" {
		env = append(env, "CUDA_MPS_PIPE_DIRECTORY="+pipeDir)
	}
	return env
}
