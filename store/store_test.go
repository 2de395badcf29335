package store

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
)

// TestRoundTrip writes jobs, events and tenants, reopens the store and
// reads them back.
func TestRoundTrip(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	code := 0
	var ids []string
	err = db.Update(func(tx *Tx) error {
		for i := 0; i < 3; i++ {
			id, seq, err := tx.NewJobID()
			if err != nil {
				return err
			}
			ids = append(ids, id)
			j := &Job{ID: id, Seq: seq, Tenant: "alice", State: api.StatePending, Submitted: 100 + float64(i),
				Spec:     api.JobSpec{Command: []string{"python", "train.py"}, GPUs: 2, Env: map[string]string{"A": "b"}},
				Engine:   EngineStats{Attained: 12.5, Memo: [4]float64{1, 2, 3, 4}},
				Attempts: []Attempt{{N: 1, GPUs: []int{0, 1}, Devices: []int{0, 1}, Phase: PhaseEnded, PID: 42, StartTicks: 7, ExitCode: &code, Outcome: "finished"}}}
			if err := tx.PutJob(j); err != nil {
				return err
			}
			for _, k := range []string{"submitted", "start", "finished"} {
				if err := tx.AddEvent(&Event{Job: id, Kind: k, Time: 100}); err != nil {
					return err
				}
			}
		}
		if err := tx.AddEvent(&Event{Kind: "server-start"}); err != nil {
			return err
		}
		return tx.PutTenant(&Tenant{Name: "alice", TokenHash: HashToken("tok-a"), Created: 1})
	})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(ids, ",") != "j000001,j000002,j000003" {
		t.Errorf("ids %v", ids)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	db, err = Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.View(func(tx *Tx) error {
		j, err := tx.Job("j000002")
		if err != nil {
			return err
		}
		if j.Seq != 2 || j.Spec.Env["A"] != "b" || j.Engine.Memo[3] != 4 || *j.Last().ExitCode != 0 || j.Last().StartTicks != 7 {
			t.Errorf("job read back: %+v", j)
		}
		c := j.Clone()
		c.Attempts[0].GPUs[0] = 9
		c.Spec.Env["A"] = "z"
		if j.Attempts[0].GPUs[0] != 0 || j.Spec.Env["A"] != "b" {
			t.Error("Clone shares memory with the original")
		}
		n := 0
		if err := tx.Jobs(func(*Job) error { n++; return nil }); err != nil || n != 3 {
			t.Errorf("Jobs: %d %v", n, err)
		}
		if _, err := tx.Job("nope"); !errors.Is(err, ErrNotFound) {
			t.Errorf("missing job: %v", err)
		}
		evs, err := tx.Events("j000003")
		if err != nil || len(evs) != 3 || evs[0].Kind != "submitted" || evs[2].Kind != "finished" || evs[0].Seq >= evs[1].Seq {
			t.Errorf("events %+v %v", evs, err)
		}
		if evs, _ := tx.Events(""); len(evs) != 1 || evs[0].Kind != "server-start" {
			t.Errorf("server events %+v", evs)
		}
		tn, err := tx.TenantByTokenHash(HashToken("tok-a"))
		if err != nil || tn.Name != "alice" {
			t.Errorf("tenant by token: %+v %v", tn, err)
		}
		if _, err := tx.TenantByTokenHash(HashToken("tok-b")); !errors.Is(err, ErrNotFound) {
			t.Errorf("unknown token: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The next ID continues after a reopen.
	err = db.Update(func(tx *Tx) error {
		id, _, err := tx.NewJobID()
		if id != "j000004" {
			t.Errorf("id after reopen: %s", id)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTenantTokens: replacing a tenant's token retires the old one, and
// one token cannot serve two tenants.
func TestTenantTokens(t *testing.T) {
	db, err := Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutTenant(&Tenant{Name: "a", TokenHash: HashToken("1")}); err != nil {
			return err
		}
		if err := tx.PutTenant(&Tenant{Name: "a", TokenHash: HashToken("2")}); err != nil {
			return err
		}
		if _, err := tx.TenantByTokenHash(HashToken("1")); !errors.Is(err, ErrNotFound) {
			t.Errorf("the old token still works: %v", err)
		}
		if err := tx.PutTenant(&Tenant{Name: "b", TokenHash: HashToken("2")}); err == nil {
			t.Error("a token shared by two tenants")
		}
		if err := tx.PutTenant(&Tenant{Name: "bad name", TokenHash: HashToken("3")}); err == nil {
			t.Error("an invalid tenant name accepted")
		}
		ts, err := tx.Tenants()
		if len(ts) != 1 {
			t.Errorf("tenants %+v", ts)
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	a, _ := NewToken()
	b, _ := NewToken()
	if a == b || !strings.HasPrefix(a, "tide_") || len(a) != 69 || HashToken(a) == a {
		t.Errorf("tokens %q %q", a, b)
	}
}

// TestLocked: one data directory, one server.
func TestLocked(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Errorf("second open: %v", err)
	}
}

// TestSamples: samples come back in time order from a given time, survive
// a reopen, and those before the cut-off given with a new one are gone.
func TestSamples(t *testing.T) {
	dir := t.TempDir()
	db, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s int) time.Time { return t0.Add(time.Duration(s) * time.Second) }
	// Out of order on purpose; the last put forgets those before 2 s.
	for _, c := range []struct{ s, forget int }{{3, 0}, {1, 0}, {0, 0}, {4, 0}, {5, 2}} {
		if err := db.Update(func(tx *Tx) error { return tx.PutSample(at(c.s), []byte(fmt.Sprint(c.s)), at(c.forget)) }); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if db, err = Open(dir); err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, c := range []struct {
		from int
		want string
	}{{0, "3,4,5"}, {4, "4,5"}, {6, ""}} {
		var got []string
		if err := db.View(func(tx *Tx) error {
			return tx.Samples(at(c.from), func(b []byte) error { got = append(got, string(b)); return nil })
		}); err != nil {
			t.Fatal(err)
		}
		if s := strings.Join(got, ","); s != c.want {
			t.Errorf("samples from %d s: %q, want %q", c.from, s, c.want)
		}
	}
}
