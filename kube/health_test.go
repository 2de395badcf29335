package kube

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

// TestHandler: the probes follow the scheduler's state (caches synced,
// leading or standing by, a round running too long), and /metrics is in
// Prometheus' text format.
func TestHandler(t *testing.T) {
	s, err := New(Config{Client: &kubernetes.Clientset{}})
	if err != nil {
		t.Fatal(err)
	}
	h := s.Handler(time.Minute)
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		return rec.Code, rec.Body.String()
	}
	type want struct {
		path string
		code int
		body string
	}
	for _, c := range []struct {
		name  string
		setup func()
		want  []want
	}{
		{"starting", func() {}, []want{{"/healthz", 200, "ok"}, {"/readyz", 503, "not synced"}}},
		{"synced, no election", func() { s.health.synced.Store(true) },
			[]want{{"/readyz", 200, "ok: running"}, {"/metrics", 200, "tide_leader 1\n"}}},
		{"standing by", func() { s.health.elected.Store(true) },
			[]want{{"/readyz", 200, "ok: standing by"}, {"/metrics", 200, "tide_leader 0\n"}}},
		{"leading", func() { s.health.leading.Store(true) },
			[]want{{"/readyz", 200, "ok: leading"}, {"/metrics", 200, "tide_caches_synced 1\n"}}},
		{"round stuck", func() { s.health.roundAt.Store(time.Now().Add(-2 * time.Minute).UnixNano()) },
			[]want{{"/healthz", 503, "has run for 2m0s"}, {"/readyz", 200, "ok: leading"}}},
		{"round over", func() { s.health.end(Stats{Rounds: 7}) },
			[]want{{"/healthz", 200, "ok"}, {"/metrics", 200, "# TYPE tide_rounds_total counter\ntide_rounds_total 0\n"}}},
	} {
		c.setup()
		for _, w := range c.want {
			code, body := get(w.path)
			if code != w.code || !strings.Contains(body, w.body) {
				t.Errorf("%s: GET %s = %d %q, want %d with %q", c.name, w.path, code, body, w.code, w.body)
			}
		}
	}
	// During a round /metrics does not wait for it: it shows the counters
	// as of the last round that ended.
	s.mu.Lock()
	done := make(chan string)
	go func() { _, body := get("/metrics"); done <- body }()
	select {
	case body := <-done:
		if !strings.Contains(body, "tide_rounds_total 7\n") {
			t.Errorf("/metrics during a round: %q, want the last round's counters (7 rounds)", body)
		}
	case <-time.After(10 * time.Second):
		t.Error("/metrics waited for the round in progress")
	}
	s.mu.Unlock()
}
