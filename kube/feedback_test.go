package kube

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestFeedbackWritesOnStop: events recorded just before tide stops are
// written, even when the API server takes a while to answer. CI saw a
// TideJob declined in its status with no Declined event: the stop
// cancelled the write. The API server here answers each write after
// 300 ms and drops a write whose client gave up.
func TestFeedbackWritesOnStop(t *testing.T) {
	var mu sync.Mutex
	var written []string
	cs := apiServer(t, func(w http.ResponseWriter, r *http.Request) {
		var ev eventsv1.Event
		if r.Method != http.MethodPost || json.NewDecoder(r.Body).Decode(&ev) != nil {
			http.Error(w, "want a POST of an Event", http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(300 * time.Millisecond):
		case <-r.Context().Done():
			return // the client gave up: not written
		}
		mu.Lock()
		written = append(written, ev.Reason)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusCreated)
		_ = json.NewEncoder(w).Encode(&ev)
	})
	for _, tc := range []struct {
		name string
		wait time.Duration // between the recording and the stop
	}{{"at once", 0}, {"while in flight", 100 * time.Millisecond}} {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			written = nil
			mu.Unlock()
			ctx, cancel := context.WithCancel(context.Background())
			f := newFeedback(ctx, cs, "tide-test", -1)
			ref := &corev1.ObjectReference{APIVersion: Group + "/" + Version, Kind: "TideJob", Namespace: "ns", Name: "c", UID: "uid-c"}
			f.event(ref, corev1.EventTypeWarning, "Declined", "Admitted", "declined: misses its deadline")
			time.Sleep(tc.wait)
			cancel()
			start := time.Now()
			f.close()
			if d := time.Since(start); d > flushMax+time.Second {
				t.Errorf("close took %v, want at most flushMax (%v) and a little", d, flushMax)
			}
			mu.Lock()
			defer mu.Unlock()
			if len(written) != 1 || written[0] != "Declined" {
				t.Errorf("written after the stop: %q, want the Declined event recorded before it", written)
			}
		})
	}
}

// TestFeedbackCloseTwice: a second close, and an event recorded after
// close, neither panic nor write.
func TestFeedbackCloseTwice(t *testing.T) {
	cs := apiServer(t, func(w http.ResponseWriter, r *http.Request) {
		t.Errorf("a write after close: %s %s", r.Method, r.URL)
		http.Error(w, "closed", http.StatusServiceUnavailable)
	})
	f := newFeedback(context.Background(), cs, "tide-test", -1)
	f.close()
	f.close()
	f.event(&corev1.ObjectReference{Kind: "TideJob", Namespace: "ns", Name: "c"}, corev1.EventTypeNormal, "Held", "Admitted", "late")
	time.Sleep(100 * time.Millisecond) // the recorder hands an event on in a goroutine
}

// apiServer is a client of an API server that answers every request with
// handle, closed when the test ends.
func apiServer(t *testing.T, handle http.HandlerFunc) kubernetes.Interface {
	t.Helper()
	srv := httptest.NewServer(handle)
	t.Cleanup(srv.Close)
	cs, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	return cs
}

// TestWaitingSaysWhy: Scheduler.Waiting gives a driver the reason tide has
// now for each job it leaves waiting, which the pods' conditions carry
// only when it was last written: none for a job bound, the gang's missing
// pods, a job no node can host, and nothing for a key tide never saw.
func TestWaitingSaysWhy(t *testing.T) {
	h := newHarness(t, "fifo")
	h.node("n", 4)
	h.pod("one", 2)
	h.pod("big", 8)
	h.pod("g-0", 1, annotate(AnnotJob, "g", AnnotGangSize, "2"))
	h.round()
	for key, want := range map[string]string{
		"pods/ns/one":  "",
		"pods/ns/big":  "unschedulable: no node can ever host a worker of 8 GPUs",
		"pods/ns/g":    "gang g has 1 of its 2 pods",
		"pods/ns/none": "",
	} {
		got := h.s.Waiting(key)
		if (want == "") != (got == "") || !strings.Contains(got, want) {
			t.Errorf("Waiting(%s) = %q, want %q", key, got, want)
		}
	}
}
