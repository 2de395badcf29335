package server

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/tide-sched/tide/api"
)

// Failures that a retry cannot fix fail the job at once, whatever its
// retry limit:
//
//   - exit code api.ExitNoRetry (78, EX_CONFIG in sysexits.h): the job
//     says it is misconfigured (examples/pytorch/train.py exits so when
//     PyTorch cannot be imported);
//   - a Python import error: the last line the attempt wrote to its log is
//     "ModuleNotFoundError: ..." or "ImportError: ..." (what Python prints
//     when an uncaught import error ends it), and its exit code is not 0.
//
// A missing module does not appear on a retry; retrying only delays the
// news (five attempts with backoff, by default).

// logTailBytes is how much of a log's end noRetry reads.
const logTailBytes = 4096

// noRetry says why the attempt of job id that just ended with code
// (known) must not be retried, or "" when it may be. The last line of the
// log is the attempt's: localexec starts each attempt's output with a
// "=== tide: job ID attempt N" line.
func (s *Server) noRetry(id string, code int, known bool) string {
	if !known || code == 0 {
		return ""
	}
	if code == api.ExitNoRetry {
		return fmt.Sprintf("exit code %d (EX_CONFIG) means the job cannot run as configured", api.ExitNoRetry)
	}
	if line := lastLogLine(s.logFile(id)); bytes.HasPrefix(line, []byte("ModuleNotFoundError: ")) || bytes.HasPrefix(line, []byte("ImportError: ")) {
		return fmt.Sprintf("Python import error (%s)", line)
	}
	return ""
}

// lastLogLine returns the last non-empty line in the last logTailBytes of
// the log at path (at most 200 bytes of it).
func lastLogLine(path string) []byte {
	f, err := os.Open(path)
	if err != nil {
		return nil
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	off := max(fi.Size()-logTailBytes, 0)
	buf := make([]byte, fi.Size()-off)
	if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
		return nil
	}
	buf = bytes.TrimRight(buf, "\r\n\t ")
	i := bytes.LastIndexByte(buf, '\n')
	line := buf[i+1:]
	if len(line) > 200 {
		line = append(line[:200:200], "..."...)
	}
	return line
}
