package kube

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/flowcontrol"
)

// TestStatusWriteOutlivesStop: a TideJob's status write that tide kube
// began before it stopped runs to its answer, and the events that follow
// the write are recorded; a write not begun before the stop is not made.
// The API server here acts on the write, then answers 300 ms later, and
// the round's context ends in between, as in CI, where TestKubeTidalHolds
// saw c Declined in its status, stopped tide, and never got c's Declined
// event: tide had read no answer, so it recorded none, and the tide
// started next found the status already written. Before calls.run the
// write failed with "context canceled" and no event was recorded.
func TestStatusWriteOutlivesStop(t *testing.T) {
	var writes atomic.Int32
	got := make(chan struct{})
	var once sync.Once
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodPut || !strings.HasSuffix(r.URL.Path, "/tidejobs/c/status") {
			http.Error(w, "unexpected "+r.Method+" "+r.URL.Path, http.StatusBadRequest)
			return
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return
		}
		writes.Add(1) // the server has acted on it
		once.Do(func() { close(got) })
		time.Sleep(300 * time.Millisecond)
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write(body)
	}))
	t.Cleanup(srv.Close)
	dyn, err := dynamic.NewForConfig(&rest.Config{Host: srv.URL})
	if err != nil {
		t.Fatal(err)
	}
	h := newHarness(t, "fifo")
	rec := events.NewFakeRecorder(10)
	h.s.fb = recordTo(rec)
	h.s.cfg.Dynamic = dyn

	tj := &TideJob{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c", ResourceVersion: "1"}}
	tj.Status = TideJobStatus{Phase: PhasePending, Message: "held, not declined"}
	setCond(&tj.Status, tj, CondAdmitted, false, "Held", tj.Status.Message)
	declined := TideJobStatus{Phase: PhaseDeclined, Message: "declined: too late"}
	setCond(&declined, tj, CondAdmitted, false, "Declined", declined.Message)

	ctx, cancel := context.WithCancel(context.Background())
	calls := newCalls(ctx, 2)
	h.s.putStatus(calls, tj, declined)
	<-got
	cancel() // tide stops while the server's answer is on its way
	calls.wait()
	if n := len(rec.Events); n != 1 {
		t.Fatalf("%d events after a status write the server made, want 1 (Declined)", n)
	}
	if ev := <-rec.Events; ev != "Warning Declined declined: too late" {
		t.Errorf("event %q, want the Declined warning", ev)
	}

	// A round on the ended context makes no write and records nothing.
	later := newCalls(ctx, 2)
	again := declined
	again.Message = "declined: later"
	h.s.putStatus(later, tj, again)
	later.wait()
	if n := writes.Load(); n != 1 {
		t.Errorf("%d writes, want 1: a call begun after the stop ran", n)
	}
	if n := len(rec.Events); n != 0 {
		t.Errorf("%d events from a round after the stop, want none", n)
	}
}

// recordTo is a feedback that records to rec, with no rate limit.
func recordTo(rec events.EventRecorder) *feedback {
	return &feedback{rec: rec, limit: flowcontrol.NewFakeAlwaysRateLimiter(), said: map[types.UID]said{}, jobs: map[string]jobSaid{}}
}
