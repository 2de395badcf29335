package server

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/localexec"
)

// do sends a raw request and returns the status and the decoded error body.
func do(t *testing.T, method, url, token, body string) (int, *api.Error, []byte) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	var e api.Error
	_ = json.Unmarshal(data, &e)
	return resp.StatusCode, &e, data
}

// TestTenants: without a token nothing is reachable; a tenant sees and
// changes only its own jobs; the admin sees all and alone manages tenants.
// Tokens are stored hashed.
func TestTenants(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	ctx := context.Background()
	alice, err := ts.admin.CreateTenant(ctx, "alice")
	if err != nil {
		t.Fatal(err)
	}
	bob, err := ts.admin.CreateTenant(ctx, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ts.admin.CreateTenant(ctx, "bob"); !isStatus(err, 409) {
		t.Errorf("duplicate tenant: %v", err)
	}
	ca, cb := api.NewClient(ts.url, alice.Token), api.NewClient(ts.url, bob.Token)
	ja := submit(t, ca, &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1})
	jb := submit(t, cb, &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1})
	if ja.Tenant != "alice" || jb.Tenant != "bob" {
		t.Fatalf("tenants %q %q", ja.Tenant, jb.Tenant)
	}

	for _, path := range []string{"/v1/jobs", "/v1/jobs/" + ja.ID, "/v1/cluster", "/v1/tenants", "/v1/jobs/" + ja.ID + "/logs"} {
		if code, _, _ := do(t, "GET", ts.url+path, "", ""); code != 401 {
			t.Errorf("GET %s without a token: %d, want 401", path, code)
		}
		if code, _, _ := do(t, "GET", ts.url+path, "tide_wrong", ""); code != 401 {
			t.Errorf("GET %s with a wrong token: %d, want 401", path, code)
		}
	}
	if code, _, _ := do(t, "POST", ts.url+"/v1/jobs", "", `{"command":["true"],"gpus":1}`); code != 401 {
		t.Errorf("submit without a token: %d", code)
	}

	list, err := ca.Jobs(ctx, "")
	if err != nil || len(list) != 1 || list[0].ID != ja.ID {
		t.Errorf("alice lists %v (%v), want only %s", list, err, ja.ID)
	}
	for _, call := range []func() error{
		func() error { _, err := ca.Job(ctx, jb.ID); return err },
		func() error { _, err := ca.Cancel(ctx, jb.ID); return err },
		func() error { _, _, _, err := ca.Logs(ctx, jb.ID, 0); return err },
		func() error { _, err := ca.Events(ctx, jb.ID); return err },
		func() error { return ca.Report(ctx, jb.ID, &api.Report{Message: "x"}) },
	} {
		if err := call(); !isStatus(err, 404) {
			t.Errorf("alice on bob's job: %v, want 404", err)
		}
	}
	if _, err := ca.CreateTenant(ctx, "mallory"); !isStatus(err, 403) {
		t.Errorf("tenant creating a tenant: %v, want 403", err)
	}
	if _, err := ca.Tenants(ctx); !isStatus(err, 403) {
		t.Errorf("tenant listing tenants: %v, want 403", err)
	}
	if _, err := ca.Submit(ctx, &api.JobSpec{Command: []string{"true"}, GPUs: 1, Tenant: "bob"}); !isStatus(err, 403) {
		t.Errorf("alice submitting as bob: %v, want 403", err)
	}
	cl, err := ca.Cluster(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range cl.GPUs {
		if g.Job == jb.ID {
			t.Errorf("alice sees bob's job on GPU %d", g.Index)
		}
	}
	all, err := ts.admin.Jobs(ctx, "")
	if err != nil || len(all) != 2 {
		t.Errorf("admin lists %d jobs (%v), want 2", len(all), err)
	}
	if j, err := ts.admin.Submit(ctx, &api.JobSpec{Command: []string{"true"}, GPUs: 1, Tenant: "bob"}); err != nil || j.Tenant != "bob" {
		t.Errorf("admin submitting for bob: %v %+v", err, j)
	}
	if _, err := cb.Cancel(ctx, jb.ID); err != nil {
		t.Errorf("bob cancelling his job: %v", err)
	}
	if _, err := ts.admin.Cancel(ctx, ja.ID); err != nil {
		t.Errorf("admin cancelling alice's job: %v", err)
	}
	// No token in the clear at rest.
	data, err := os.ReadFile(filepath.Join(ts.dir, "tide.db"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{alice.Token, bob.Token, ts.token} {
		if bytes.Contains(data, []byte(tok)) {
			t.Errorf("the database holds a token in the clear")
		}
	}
}

// TestBadInput: malformed and invalid specs get 400 naming the field,
// oversized bodies 413, and nothing is accepted.
func TestBadInput(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	dir := t.TempDir()
	tests := []struct {
		name, body string
		code       int
		field, msg string
	}{
		{"empty body", ``, 400, "", "empty body"},
		{"not json", `{"command": [`, 400, "", "truncated"},
		{"syntax", `{"command": ["a"],}`, 400, "", "malformed JSON"},
		{"unknown field", `{"command": ["true"], "gpus": 1, "gpu": 2}`, 400, "gpu", "unknown field"},
		{"wrong type", `{"command": "true", "gpus": 1}`, 400, "command", "array of strings"},
		{"float gpus", `{"command": ["true"], "gpus": 1.5}`, 400, "gpus", "want a number"},
		{"trailing data", `{"command": ["true"], "gpus": 1} {}`, 400, "", "after the JSON value"},
		{"array", `[1]`, 400, "", "want a JSON"},
		{"no command", `{"gpus": 1}`, 400, "command", "missing"},
		{"no gpus", `{"command": ["true"]}`, 400, "gpus", "missing"},
		{"negative gpus", `{"command": ["true"], "gpus": -1}`, 400, "gpus", "at least 1"},
		{"min over max", `{"command": ["true"], "min_gpus": 3, "max_gpus": 2}`, 400, "min_gpus", "min gpus 3 > max gpus 2"},
		{"gpus outside range", `{"command": ["true"], "gpus": 4, "min_gpus": 1, "max_gpus": 2}`, 400, "gpus", "gpus 4 outside [min 1, max 2]"},
		{"too many gpus", `{"command": ["true"], "gpus": 8}`, 400, "gpus", "this server has 4"},
		{"unknown type", `{"command": ["true"], "gpus": 1, "gpu_type": "a100"}`, 400, "gpu_type", "no a100 GPUs"},
		{"relative workdir", `{"command": ["true"], "gpus": 1, "workdir": "rel"}`, 400, "workdir", "absolute"},
		{"missing workdir", `{"command": ["true"], "gpus": 1, "workdir": "` + dir + `/nope"}`, 400, "workdir", "not a directory"},
		{"missing program", `{"command": ["no-such-program-xyz"], "gpus": 1}`, 400, "command", "not in the server's PATH"},
		{"missing path", `{"command": ["/no/such/prog"], "gpus": 1}`, 400, "command", "not an executable"},
		{"tide env", `{"command": ["true"], "gpus": 1, "env": {"TIDE_JOB_ID": "x"}}`, 400, "env", "set by tide"},
		{"bad env name", `{"command": ["true"], "gpus": 1, "env": {"A=B": "x"}}`, 400, "env", "not a variable name"},
		{"bad deadline", `{"command": ["true"], "gpus": 1, "deadline": "tomorrow"}`, 400, "deadline", "RFC 3339"},
		{"negative estimate", `{"command": ["true"], "gpus": 1, "estimate_s": -5}`, 400, "estimate_s", "finite number"},
		{"retries", `{"command": ["true"], "gpus": 1, "max_retries": 1000}`, 400, "max_retries", "0 to 100"},
		{"nul in arg", `{"command": ["true", "a\u0000b"], "gpus": 1}`, 400, "command", "NUL"},
		{"huge number", `{"command": ["true"], "gpus": 1e40}`, 400, "gpus", "want a number"},
		{"max batch without batch", `{"command": ["true"], "gpus": 1, "max_batch_size": 512}`, 400, "max_batch_size", "needs batch_size"},
		{"max batch below batch", `{"command": ["true"], "gpus": 1, "batch_size": 256, "max_batch_size": 128}`, 400, "max_batch_size", "at least batch_size (256)"},
		{"negative local batch", `{"command": ["true"], "gpus": 1, "max_local_bsz": -1}`, 400, "max_local_bsz", ">= 0"},
		{"oversized", `{"command": ["true"], "gpus": 1, "name": "` + strings.Repeat("x", api.MaxBodyBytes) + `"}`, 413, "", "over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, e, raw := do(t, "POST", ts.url+"/v1/jobs", ts.token, tc.body)
			if code != tc.code {
				t.Fatalf("status %d, want %d: %s", code, tc.code, raw)
			}
			if !strings.Contains(string(raw), tc.msg) {
				t.Errorf("response %s lacks %q", raw, tc.msg)
			}
			if tc.field != "" {
				found := false
				for _, f := range e.Fields {
					found = found || f.Field == tc.field
				}
				if !found {
					t.Errorf("no message for field %q: %s", tc.field, raw)
				}
			}
		})
	}
	// Every bad field gets its own message.
	code, e, raw := do(t, "POST", ts.url+"/v1/jobs", ts.token, `{"command": [], "gpus": -1, "deadline": "tomorrow", "env": {"TIDE_X": "1"}, "max_retries": -1}`)
	var fields []string
	for _, f := range e.Fields {
		fields = append(fields, f.Field)
	}
	if code != 400 || strings.Join(fields, ",") != "command,env,gpus,deadline,max_retries" {
		t.Errorf("several bad fields: %d %s", code, raw)
	}
	if jobs, _ := ts.admin.Jobs(context.Background(), ""); len(jobs) != 0 {
		t.Errorf("bad input created %d jobs", len(jobs))
	}
	// Reports are checked as strictly.
	j := submit(t, ts.admin, &api.JobSpec{Command: []string{"sleep", "30"}, GPUs: 1})
	for body, field := range map[string]string{`{"progress": 2}`: "progress", `{"progress": -1}`: "progress", `{"steps": 1}`: "steps", `{"step": 5}`: "total_steps"} {
		code, e, raw := do(t, "POST", ts.url+"/v1/jobs/"+j.ID+"/report", ts.token, body)
		if code != 400 || len(e.Fields) == 0 || e.Fields[0].Field != field {
			t.Errorf("report %s: %d %s, want 400 on field %s", body, code, raw, field)
		}
	}
	if code, _, _ := do(t, "GET", ts.url+"/v1/jobs/"+j.ID+"/logs?offset=-3", ts.token, ""); code != 400 {
		t.Errorf("negative log offset: %d", code)
	}
	if code, _, _ := do(t, "GET", ts.url+"/v1/nope", ts.token, ""); code != 404 {
		t.Errorf("unknown endpoint: %d", code)
	}
	if _, err := ts.admin.Cancel(context.Background(), j.ID); err != nil {
		t.Fatal(err)
	}
	if code, _, _ := do(t, "GET", ts.url+"/healthz", "", ""); code != 200 {
		t.Errorf("healthz: %d", code)
	}
}

// TestLogsFollow reads a running job's log in pieces, as tide logs -f does.
func TestLogsFollow(t *testing.T) {
	ts := startServer(t, testConfig(t, t.TempDir()))
	j := submit(t, ts.admin, countSpec(1, 20, 10*time.Millisecond))
	var all []byte
	var off int64
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		data, next, state, err := ts.admin.Logs(context.Background(), j.ID, off)
		if err != nil {
			t.Fatal(err)
		}
		if next != off+int64(len(data)) {
			t.Fatalf("next offset %d after %d bytes from %d", next, len(data), off)
		}
		all, off = append(all, data...), next
		if api.Terminal(state) && len(data) == 0 {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := string(all); !strings.Contains(got, "step 1/20\nstep 2/20\n") || !strings.HasSuffix(got, "countjob: done\n") {
		t.Errorf("followed log:\n%s", got)
	}
}

// TestMixedTypesTooMany: on a machine of two GPU types, a job of more GPUs
// than either type has is refused at submission, saying why (a job never
// mixes types); it would have waited for ever.
func TestMixedTypesTooMany(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.GPUs = []localexec.GPU{{Index: 0, Name: "fake t4", Type: "t4", MemGiB: 16, Fake: true}, {Index: 1, Name: "fake t4", Type: "t4", MemGiB: 16, Fake: true},
		{Index: 2, Name: "fake a100", Type: "a100", MemGiB: 80, Fake: true}, {Index: 3, Name: "fake a100", Type: "a100", MemGiB: 80, Fake: true}}
	ts := startServer(t, cfg)
	code, e, raw := do(t, "POST", ts.url+"/v1/jobs", ts.token, `{"command": ["true"], "gpus": 3}`)
	if code != 400 || len(e.Fields) != 1 || e.Fields[0].Field != "gpus" ||
		!strings.Contains(e.Fields[0].Message, "needs at least 3 GPUs of one type, this server has at most 2 of one type (4 in all") {
		t.Errorf("status %d: %s", code, raw)
	}
	if code, _, raw := do(t, "POST", ts.url+"/v1/jobs", ts.token, `{"command": ["true"], "gpus": 2}`); code != 201 && code != 200 {
		t.Errorf("a job of 2 GPUs: status %d: %s", code, raw)
	}
}

// TestPartTooBigRefused: a job asking for more GPU memory on each GPU than
// any GPU here has is refused at submission, naming the field and the
// GPUs' memory; it was accepted (201) and failed by the first round.
func TestPartTooBigRefused(t *testing.T) {
	cfg := testConfig(t, t.TempDir())
	cfg.GPUs = []localexec.GPU{{Index: 0, Name: "fake t4", Type: "t4", MemGiB: 16, Fake: true}, {Index: 1, Name: "fake t4", Type: "t4", MemGiB: 16, Fake: true},
		{Index: 2, Name: "fake a100", Type: "a100", MemGiB: 80, Fake: true}}
	ts := startServer(t, cfg)
	for _, tc := range []struct{ body, field, msg string }{
		{`{"command": ["true"], "gpus": 1, "gpu_mem_gib": 90}`, "gpu_mem_gib", "needs 90 GiB of GPU memory, which 0 of this server's GPUs hold (t4 16 GiB, a100 80 GiB), it needs 1"},
		{`{"command": ["true"], "gpus": 2, "gpu_mem_gib": 40}`, "gpu_mem_gib", "needs 40 GiB of GPU memory, which 1 of this server's GPUs hold"},
		{`{"command": ["true"], "gpus": 1, "gpu_type": "t4", "mig": "3g.40gb"}`, "mig", "needs 40 GiB of GPU memory, which 0 of this server's GPUs hold"},
	} {
		code, e, raw := do(t, "POST", ts.url+"/v1/jobs", ts.token, tc.body)
		if code != 400 || len(e.Fields) != 1 || e.Fields[0].Field != tc.field || !strings.Contains(e.Fields[0].Message, tc.msg) {
			t.Errorf("%s: status %d: %s\nwant 400 on %s saying %q", tc.body, code, raw, tc.field, tc.msg)
		}
	}
	for _, body := range []string{`{"command": ["true"], "gpus": 1, "gpu_mem_gib": 40}`, `{"command": ["true"], "gpus": 2, "gpu_mem_gib": 8}`, `{"command": ["true"], "gpus": 2, "gpu_share": 0.5}`} {
		if code, _, raw := do(t, "POST", ts.url+"/v1/jobs", ts.token, body); code != 201 {
			t.Errorf("%s: status %d: %s", body, code, raw)
		}
	}
}
