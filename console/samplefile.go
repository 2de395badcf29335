package console

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// SampleFile is a SampleStore in a file of its own: one sample a line,
// each a JSON object with its "time", oldest first. tide kube keeps its
// console's utilisation history in one (--ui-history) so that it survives
// a restart; tide serve keeps it in its database instead.
//
// Saving appends a line; once the lines to forget are as many as those to
// keep, the file is rewritten without them (to a temporary file renamed
// over it), so it holds at most about twice the history. A last line cut
// short (the process died while writing it) is dropped when the file is
// opened. It is safe for concurrent use.
type SampleFile struct {
	path string

	mu    sync.Mutex
	times []time.Time // the lines' times, oldest first
}

// OpenSampleFile opens the history in path, creating the file (not its
// directory) when it does not exist. A line that is not a sample is an
// error naming the file and line, except a last one cut short.
func OpenSampleFile(path string) (*SampleFile, error) {
	f := &SampleFile{path: path}
	data, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		if err := os.WriteFile(path, nil, 0o600); err != nil {
			return nil, fmt.Errorf("creating the console history %s: %w", path, err)
		}
		return f, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading the console history: %w", err)
	}
	good := 0 // bytes up to the end of the last whole sample
	for n := 1; good < len(data); n++ {
		line, _, whole := bytes.Cut(data[good:], []byte{'\n'})
		t, err := sampleTime(line)
		if err != nil && !whole { // cut short
			if err := os.Truncate(path, int64(good)); err != nil {
				return nil, fmt.Errorf("dropping the last line of the console history %s, cut short: %w", path, err)
			}
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s:%d: not a console sample: %w", path, n, err)
		}
		if k := len(f.times); k > 0 && t.Before(f.times[k-1]) {
			return nil, fmt.Errorf("%s:%d: sample of %s after one of %s: the samples must be oldest first", path, n, t.Format(time.RFC3339), f.times[k-1].Format(time.RFC3339))
		}
		f.times = append(f.times, t)
		if !whole { // a whole sample but for its newline
			if err := appendNewline(path); err != nil {
				return nil, err
			}
			break
		}
		good += len(line) + 1
	}
	return f, nil
}

func appendNewline(path string) error {
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("completing the last line of the console history: %w", err)
	}
	_, err = w.Write([]byte{'\n'})
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("completing the last line of the console history %s: %w", path, err)
	}
	return nil
}

// sampleTime reads the time of one line.
func sampleTime(line []byte) (time.Time, error) {
	var s struct {
		Time *time.Time `json:"time"`
	}
	if err := json.Unmarshal(line, &s); err != nil {
		return time.Time{}, err
	}
	if s.Time == nil {
		return time.Time{}, errors.New(`no "time"`)
	}
	return *s.Time, nil
}

// LoadSamples returns the samples at or after from, oldest first.
func (f *SampleFile) LoadSamples(from time.Time) ([][]byte, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	r, err := os.Open(f.path)
	if err != nil {
		return nil, fmt.Errorf("reading the console history: %w", err)
	}
	defer r.Close()
	var out [][]byte
	err = f.lines(r, func(t time.Time, line []byte) error {
		if !t.Before(from) {
			out = append(out, append([]byte(nil), line...))
		}
		return nil
	})
	return out, err
}

// lines calls fn with each whole line of r and its time (from f.times).
func (f *SampleFile) lines(r io.Reader, fn func(t time.Time, line []byte) error) error {
	sc := bufio.NewScanner(r)
	sc.Buffer(nil, 1<<20)
	for k := 0; k < len(f.times) && sc.Scan(); k++ {
		if err := fn(f.times[k], sc.Bytes()); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("reading the console history %s: %w", f.path, err)
	}
	return nil
}

// SaveSample appends data, a JSON object whose "time" is at, and forgets
// the samples before forget.
func (f *SampleFile) SaveSample(at time.Time, data []byte, forget time.Time) error {
	if bytes.ContainsRune(data, '\n') {
		return errors.New("a console sample must be one line")
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if k := len(f.times); k > 0 && at.Before(f.times[k-1]) {
		return fmt.Errorf("sample of %s after one of %s: the clock went back", at.Format(time.RFC3339), f.times[k-1].Format(time.RFC3339))
	}
	w, err := os.OpenFile(f.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return fmt.Errorf("saving to the console history: %w", err)
	}
	_, err = w.Write(append(data[:len(data):len(data)], '\n'))
	if cerr := w.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("saving to the console history %s: %w", f.path, err)
	}
	f.times = append(f.times, at)
	old := 0
	for old < len(f.times) && f.times[old].Before(forget) {
		old++
	}
	if old == 0 || old < len(f.times)-old {
		return nil
	}
	return f.rewrite(old)
}

// rewrite drops the first n lines. Under mu.
func (f *SampleFile) rewrite(n int) error {
	r, err := os.Open(f.path)
	if err != nil {
		return fmt.Errorf("compacting the console history: %w", err)
	}
	defer r.Close()
	tmp, err := os.CreateTemp(filepath.Dir(f.path), filepath.Base(f.path)+".*")
	if err != nil {
		return fmt.Errorf("compacting the console history: %w", err)
	}
	defer os.Remove(tmp.Name()) // after the rename, nothing there
	bw := bufio.NewWriter(tmp)
	k := 0
	err = f.lines(r, func(_ time.Time, line []byte) error {
		k++
		if k <= n {
			return nil
		}
		bw.Write(line)
		return bw.WriteByte('\n')
	})
	if err == nil {
		err = bw.Flush()
	}
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), f.path)
	}
	if err != nil {
		return fmt.Errorf("compacting the console history %s: %w", f.path, err)
	}
	f.times = append(f.times[:0], f.times[n:]...)
	return nil
}
