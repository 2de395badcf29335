package kubetest

import (
	"context"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/tide-sched/tide/engine"
	"github.com/tide-sched/tide/kube"
	"github.com/tide-sched/tide/policy/flow"
)

// compressedClock is the engine's clock of a live scheduler whose days
// pass in minutes: from e0 (a midnight, Unix seconds, not before the wall
// clock so that pods' creation times are never in the engine's future) it
// runs scale engine seconds per wall second.
type compressedClock struct {
	t0    time.Time
	e0    float64
	scale float64
}

func (c compressedClock) Now() float64 { return c.e0 + time.Since(c.t0).Seconds()*c.scale }

// servingPattern is how many serving replicas the inference site runs at
// engine time t: 3 of its 4 GPUs from 08:00 to 20:00, none at night.
func servingPattern(t float64) int {
	if h := math.Mod(t, 86400) / 3600; h >= 8 && h < 20 {
		return 3
	}
	return 0
}

// TestKubeTidalLearns: tidal under tide kube learns the inference site's
// daily pattern from what the live scheduler observes. The inference
// node's free GPUs follow a daily wave (serving replicas of another
// scheduler come at 08:00 and leave at 20:00) over days compressed into
// minutes; tidal's policy state, read from the scheduler as the leader
// saves it on its Lease, holds a forecaster whose median for the next 12
// hours follows the wave far closer than its fallback did before it had
// seen a day ("same as now"), and a job tidal leaves waiting says it is
// the forecast that keeps it off the inference GPUs. With lead=1800 (five
// rounds of 360 engine seconds, a second of wall time, so a slow round
// under load does not miss it), once it has learned the wave tidal stops
// the job it lent the inference GPUs to at night before the serving
// replicas come back at 08:00 on days 2 and 3, so they take no GPU from
// it (no reclaim), where on day 1, before it had seen a morning, they did.
func TestKubeTidalLearns(t *testing.T) {
	e := startEnv(t)
	s := e.scenario(t, "tide-tidal-live", "tidal-live")
	s.siteNode("tl-c0", 1, "dc", "cloud")
	s.siteNode("tl-i0", 4, "serve", "inference")
	s.kubeletLoop("tidal-live", 0)
	s.otherScheduler("tidal-live", "tl-i0", 4)
	const scale = 1800 // an engine day in 48 wall seconds
	now := time.Now()
	clock := compressedClock{t0: now, e0: math.Ceil(float64(now.Unix())/86400) * 86400, scale: scale}
	sch, stop := s.start(kube.Config{Policy: "tidal:lead=1800", Clock: clock})
	// a holds the cloud's GPU; w needs 2 GPUs, which only the inference
	// node has, and only at night.
	s.tidejob("tidal-live", "a", 1, 1, 1)
	eventually(t, 20*time.Second, func() (bool, string) {
		return s.workers("tidal-live", "a") == 1, fmt.Sprintf("a: %v", s.where("tidal-live"))
	})
	s.tidejob("tidal-live", "w", 2, 2, 1)

	// The serving replicas follow the pattern in engine time; w's
	// messages are recorded as they change.
	var msgs []string
	serving := map[string]bool{}
	next := 0
	scaleTo := func(want int) {
		for len(serving) < want {
			name := fmt.Sprintf("inf-%d", next)
			next++
			s.servingPod("tidal-live", name, "serve")
			serving[name] = true
		}
		for name := range serving {
			if len(serving) <= want {
				break
			}
			zero := int64(0)
			if err := s.cs.CoreV1().Pods("tidal-live").Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
				t.Fatal(err)
			}
			delete(serving, name)
		}
	}
	// mae is the mean absolute error of the saved forecaster's median
	// over the next 12 hours against the pattern's free GPUs, and that
	// of "same as now".
	mae := func() (forecastMAE, nowMAE float64) {
		t.Helper()
		b, err := sch.PolicyState()
		if err != nil {
			t.Fatal(err)
		}
		var st struct {
			Policy string
			Rounds int
			State  []byte
		}
		if err := engine.DecodeState(b, &st); err != nil {
			t.Fatal(err)
		}
		var tl flow.Tidal
		if err := tl.LoadState(st.State); err != nil {
			t.Fatal(err)
		}
		f := tl.Forecaster("serve")
		if f == nil {
			t.Fatalf("policy %s's state (%d bytes, %d rounds) has no forecaster of the inference site serve", st.Policy, len(st.State), st.Rounds)
		}
		const bins = 72 // 12 h of 600 s bins
		start, path := f.Path(bins, 0.5)
		cur := f.Now()
		for k, p := range path {
			// The pattern's mean free GPUs over bin k.
			free := 0.0
			for i := 0; i < 10; i++ {
				free += float64(4-servingPattern(start+float64(k)*600+float64(i)*60+30)) / 10
			}
			forecastMAE += math.Abs(p-free) / bins
			nowMAE += math.Abs(cur-free) / bins
		}
		return forecastMAE, nowMAE
	}
	var early, late [2]float64
	sawEarly, sawLate := false, false
	day3 := clock.e0 + 2*86400
	end := day3 + 10*3600 // 10:00 on the third day
	// What each pass of the loop saw: engine time, reclaims so far, and
	// w's workers on the inference node.
	type sample struct {
		t             float64
		reclaims, inf int
	}
	var samples []sample
	for clock.Now() < end {
		now := clock.Now()
		inf := 0
		for _, p := range s.workerPods("tidal-live", "w") {
			if p.Spec.NodeName == "tl-i0" {
				inf++
			}
		}
		samples = append(samples, sample{now, sch.Stats().Reclaims, inf})
		scaleTo(servingPattern(now))
		if tj := s.getTideJob("tidal-live", "w"); tj.Status.Message != "" {
			if len(msgs) == 0 || msgs[len(msgs)-1] != tj.Status.Message {
				msgs = append(msgs, tj.Status.Message)
			}
		}
		if !sawEarly && clock.Now() >= clock.e0+4*3600 {
			early[0], early[1] = mae()
			sawEarly = true
		}
		if !sawLate && clock.Now() >= day3+4*3600 {
			late[0], late[1] = mae()
			sawLate = true
		}
		time.Sleep(50 * time.Millisecond)
	}
	stop()
	lateNow := late[1]
	t.Logf("forecast MAE over the next 12 h: %.2f GPUs at 04:00 on day 1 (same as now %.2f), %.2f at 04:00 on day 3 (same as now %.2f); reclaims %d",
		early[0], early[1], late[0], lateNow, sch.Stats().Reclaims)
	// The mornings: reclaims from 06:00 to 10:00, and when w last had
	// workers on the inference node before 08:00.
	morning := func(day float64) (reclaims int, ranAt, lastOn float64) {
		first, last := -1, -1
		ranAt, lastOn = math.NaN(), math.NaN()
		for _, x := range samples {
			switch h := (x.t - day) / 3600; {
			case h < 6 || h >= 10:
			default:
				if first < 0 {
					first = x.reclaims
				}
				last = x.reclaims
			}
			if h := (x.t - day) / 3600; h >= 0 && h < 8 && x.inf > 0 {
				if math.IsNaN(ranAt) {
					ranAt = h
				}
				lastOn = h
			}
		}
		return last - first, ranAt, lastOn
	}
	// Day 1, before a morning was seen: the replicas take the GPUs back
	// from w (a reclaim). Days 2 and 3: w ran on them in the night and
	// was stopped at least a few minutes before 08:00 (a round at most
	// lead ahead; lead=60, the default, stops it in the last minute or
	// not at all), and nothing was reclaimed.
	for d := 0; d < 3; d++ {
		r, ran, last := morning(clock.e0 + float64(d)*86400)
		t.Logf("day %d: %d reclaims 06:00-10:00; w on the inference GPUs from %.2f h to %.2f h", d+1, r, ran, last)
		switch {
		case d == 0 && r < 1:
			t.Errorf("day 1: no reclaim in the morning: w was stopped without a learned forecast, so the test shows nothing")
		case d > 0 && math.IsNaN(ran):
			t.Errorf("day %d: w never ran on the inference GPUs in the night: the morning tests nothing", d+1)
		case d > 0 && (r != 0 || !(last < 7.95)):
			t.Errorf("day %d: %d reclaims from 06:00 to 10:00, w last on the inference GPUs at %.2f h: want none, w stopped before 07:57 on the learned forecast", d+1, r, last)
			// What the loop saw from 06:00 to 10:00 each time the reclaims
			// or w's inference workers changed, so that a failure under
			// load shows whether the stop came a round late.
			day := clock.e0 + float64(d)*86400
			prev := sample{reclaims: -1, inf: -1}
			for _, x := range samples {
				if h := (x.t - day) / 3600; h >= 6 && h < 10 && (x.reclaims != prev.reclaims || x.inf != prev.inf) {
					t.Logf("  %.3f h: %d reclaims so far, %d workers of w on the inference node", h, x.reclaims, x.inf)
					prev = x
				}
			}
			t.Logf("  w's messages: %q", msgs)
		}
	}
	if !(late[0] < lateNow/2) {
		t.Errorf("after two days the forecast's median is off by %.2f GPUs over the next 12 h, same as now by %.2f: want under half", late[0], lateNow)
	}
	if !(late[0] < early[0]/2) {
		t.Errorf("the forecast's error %.2f after two days, %.2f before a day was seen: want under half", late[0], early[0])
	}
	said := false
	for _, m := range msgs {
		said = said || strings.Contains(m, "the forecast keeps idle")
	}
	if !said {
		t.Errorf("w's messages %q: none says the forecast keeps it off the inference GPUs", msgs)
	}
}
