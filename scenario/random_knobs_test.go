package scenario

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/tide-sched/tide/assemble"
	"github.com/tide-sched/tide/policy"
	"github.com/tide-sched/tide/policy/contract"
	"github.com/tide-sched/tide/solver"
)

// TestRandomKnobs: a policy with a few of its knobs set together, each to
// a value a user might give (the default, another of the values the knob
// names, a number scaled or of another sign, a boolean flipped), on
// TestRandomClusters' random clusters (half of them rich) or on Pollux's
// model and workload (randomPollux, a fifth of the draws), with any of
// the placers (pack, most-free, HiveD with or without virtual clusters)
// and sometimes tenants' quotas (with borrowing or not), another round
// length or rounds only at their times, either fails to build with an error
// that names the policy's knob (or a job it cannot run, or the placer or
// quotas) or runs to a result that holds (resultHolds), twice the same
// (a simulation is a pure function of its inputs).
// TestKnobExtremes sets one knob at a time on one cluster; users set
// several (`tidal:swap=off:hold=false`), and knobs that switch a path on
// reach code the defaults never run.
//
// TIDE_RANDOM_KNOBS sets the draws: "N" for draws 1..N, "A-B" for A..B
// (default 1-60).
func TestRandomKnobs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs policies with random knobs on random clusters")
	}
	lo, hi := draws(t, "TIDE_RANDOM_KNOBS", 60)
	var infos []contract.Info
	for _, info := range policy.All() {
		if info.NeedsSolver && solver.Available() != nil {
			continue
		}
		infos = append(infos, info)
	}
	for draw := lo; draw <= hi; draw++ {
		r := rand.New(rand.NewPCG(draw, 11))
		var y, tr string
		var ins *assemble.Inputs
		var ok bool
		if r.IntN(5) == 0 {
			y, tr, ins, ok = randomPollux(t, 1+r.Uint64N(1000))
		} else {
			y, tr, ins, ok = randomCluster(t, 1+r.Uint64N(1000), r.IntN(2) == 0)
		}
		if !ok {
			continue
		}
		rich := strings.Contains(tr, "tenant")
		switch r.IntN(6) {
		case 0:
			ins.Placer = "most-free"
		case 1:
			ins.Placer = "hived"
		case 2:
			if rich {
				ins.Placer = fmt.Sprintf("hived:vc=vision@%d/nlp@%d", 1<<r.IntN(3), 1<<r.IntN(3))
			}
		}
		if rich && r.IntN(3) == 0 {
			ins.Quotas = map[string]int{"vision": 1 + r.IntN(4), "ops": 1 + r.IntN(8)}
			if r.IntN(2) == 0 {
				ins.Quotas["nlp"] = 1 + r.IntN(8)
			}
			ins.Borrow = r.IntN(2) == 0
		}
		if r.IntN(4) == 0 {
			ins.Round = []float64{1, 10, 37, 600, 3600}[r.IntN(5)]
			if ins.Round == 1 && strings.Contains(y, "pollux") {
				ins.Round = 10 // Pollux's model and agents cost a minute a run at 1 s
			}
		}
		if r.IntN(4) == 0 {
			ins.OnEvents = !ins.OnEvents
		}
		info := infos[r.IntN(len(infos))]
		spec, keys := randomKnobs(t, r, info)
		if strings.Contains(spec, ":search=ga") {
			// The artifact's genetic search costs pop x generations
			// fitness evaluations a round by design (minutes here).
			spec += ":pop=8:generations=4"
		}
		t.Run(fmt.Sprintf("draw%d/%s/placer=%s/quotas=%v,borrow=%v/round=%v,events=%v", draw, spec, ins.Placer, ins.Quotas, ins.Borrow, ins.Round, ins.OnEvents), func(t *testing.T) {
			run, err := ins.Build(spec)
			if err != nil {
				// A policy may refuse the knobs, or a job it cannot run
				// (a part of a GPU under an elastic policy), naming it;
				// a placer or quotas the cluster cannot take are refused
				// as such.
				names := slices.ContainsFunc(keys, func(k string) bool { return strings.Contains(err.Error(), k) })
				var ae *assemble.Error
				if errors.As(err, &ae) && (ae.Field == "placer" || ae.Field == "quota") {
					names = true
				}
				if !names && !jobNamed.MatchString(err.Error()) {
					t.Errorf("build error %q names none of the knobs set (%s) and no job", err, strings.Join(keys, ", "))
				}
				t.Logf("refused: %v", err)
				return
			}
			res, msg := runResult(run)
			if strings.Contains(msg, "re-plans more often than a job can restart") {
				// Rounds shorter than a restart (Gavel's round=1 on
				// restarts of 5 s): the simulator stops such a run,
				// saying why (docs/simulator.md).
				t.Logf("stopped: %s", msg)
				return
			}
			if msg == "" {
				msg = resultHolds(res)
			}
			if msg != "" {
				t.Fatalf("%s\n%s\n%s", msg, y, tr)
			}
			a, b := summary(t, ins.Build, spec), summary(t, ins.Build, spec)
			if !bytes.Equal(a, b) {
				t.Errorf("two runs of the same inputs differ:\n%s\n%s\n%s\n%s", a, b, y, tr)
			}
		})
	}
}

// jobNamed finds a job of randomCluster's traces named in an error.
var jobNamed = regexp.MustCompile(`\bjob j[0-9]+\b`)

// randomKnobs draws one to four of info's knobs and a value for each:
// spec is the policy spec (name:key=value:...), keys the knobs set.
func randomKnobs(t *testing.T, r *rand.Rand, info contract.Info) (spec string, keys []string) {
	t.Helper()
	knobs := info.KnobList()
	spec = info.Name
	if len(knobs) == 0 {
		return spec, nil
	}
	n := 1 + r.IntN(min(4, len(knobs)))
	for _, i := range r.Perm(len(knobs))[:n] {
		k := knobs[i]
		v, ok := knobValue(t, r, info, k)
		if !ok {
			continue
		}
		spec += ":" + k.Key + "=" + v
		keys = append(keys, k.Key)
	}
	return spec, keys
}

// knobValue draws a value for knob k: for a boolean the other one or the
// default; for a number the default, 0, 1, -1, or the default halved,
// doubled or times ten (not above the default for costKnobs); for a word
// one of those the policy names when it refuses another (its "want a, b
// or c"). ok is false for a knob whose values cannot be drawn (a
// free-form word, such as a job ID prefix).
func knobValue(t *testing.T, r *rand.Rand, info contract.Info, k contract.Knob) (string, bool) {
	t.Helper()
	switch k.Default {
	case "true", "false":
		return []string{"true", "false"}[r.IntN(2)], true
	}
	if d, err := strconv.ParseFloat(k.Default, 64); err == nil {
		vs := []float64{d, 0, 1, -1, d / 2, d * 2, d * 10}
		if costKnobs[info.Name+":"+k.Key] {
			vs = vs[:5]
		}
		return strconv.FormatFloat(vs[r.IntN(len(vs))], 'g', -1, 64), true
	}
	alts := knobWords(info, k.Key)
	if len(alts) == 0 {
		return "", false
	}
	return alts[r.IntN(len(alts))], true
}

// costKnobs are knobs that size a search a round runs (Chronus' MILP
// horizon, Pollux's genetic search): drawn no larger than their defaults,
// since larger ones cost minutes a run by design (chronus:horizon=60 took
// 24 s on 14 jobs, against 0.06 s at its default 30).
var costKnobs = map[string]bool{
	"chronus:horizon": true, "chronus:maxjobs": true,
	"pollux:pop": true, "pollux:generations": true, "pollux:tries": true,
}

// wantWords finds an enumeration in an error: "want a, b or c".
var wantWords = regexp.MustCompile(`want ((?:[a-z0-9_.-]+, )*[a-z0-9_.-]+,? or [a-z0-9_.-]+)`)

// knobWords is the words the policy's builder names when key is given a
// value it does not take, or nil.
func knobWords(info contract.Info, key string) []string {
	_, err := info.Build(contract.Context{}, contract.NewOptions(info.Name, map[string]string{key: "no-such-value"}))
	if err == nil {
		return nil
	}
	m := wantWords.FindStringSubmatch(err.Error())
	if m == nil {
		return nil
	}
	return strings.FieldsFunc(strings.ReplaceAll(m[1], " or ", ", "), func(c rune) bool { return c == ',' || c == ' ' })
}

// summary runs spec from build and returns its result as JSON.
func summary(t *testing.T, build func(string) (*assemble.Run, error), spec string) []byte {
	t.Helper()
	run, err := build(spec)
	if err != nil {
		t.Fatal(err)
	}
	res, err := run.Simulate()
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// draws reads the draws a random search runs from the environment
// variable env: "N" for 1..N, "A-B" for A..B; unset, 1..n.
func draws(t *testing.T, env string, n uint64) (lo, hi uint64) {
	t.Helper()
	s := os.Getenv(env)
	if s == "" {
		return 1, n
	}
	a, b, found := strings.Cut(s, "-")
	lo, err := strconv.ParseUint(a, 10, 64)
	hi = lo
	if err == nil && found {
		hi, err = strconv.ParseUint(b, 10, 64)
	} else if err == nil {
		lo = 1
	}
	if err != nil || lo < 1 || hi < lo {
		t.Fatalf("%s=%q: want N or A-B (draws, from 1)", env, s)
	}
	return lo, hi
}
