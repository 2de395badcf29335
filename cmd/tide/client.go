package main

import (
	"bytes"
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/tide-sched/tide/api"
)

// The client commands talk to tide serve through package api. The server
// and token come from --server/--token, else $TIDE_SERVER/$TIDE_TOKEN,
// else the config file ($TIDE_CONFIG, default ~/.config/tide/config.yaml):
//
//	server: http://127.0.0.1:7450
//	token: tide_...            # or token_file: /path/to/token

const clientHelp = `
Server and token: --server and --token, else $TIDE_SERVER and $TIDE_TOKEN,
else the config file ($TIDE_CONFIG, default ~/.config/tide/config.yaml) with
'server:' and 'token:' (or 'token_file:') keys. The admin token of a server
is in its DATA_DIR/admin.token.

Flags:
`

type clientFlags struct {
	server, token, config, caCert string
	json                          bool
}

func (c *clientFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&c.server, "server", "", "tide serve `URL` (default $TIDE_SERVER, the config file, or "+api.DefaultServer+")")
	fs.StringVar(&c.token, "token", "", "API `TOKEN` (default $TIDE_TOKEN or the config file)")
	fs.StringVar(&c.config, "config", "", "config `FILE` (default $TIDE_CONFIG or ~/.config/tide/config.yaml)")
	fs.BoolVar(&c.json, "json", false, "print JSON instead of tables")
	fs.StringVar(&c.caCert, "ca-cert", "", "PEM `FILE` of the CA (or self-signed certificate) an https server's certificate is verified against (default $TIDE_CA_CERT, the config file's ca_cert, or the system's roots)")
}

type clientConfig struct {
	Server    string `yaml:"server"`
	Token     string `yaml:"token"`
	TokenFile string `yaml:"token_file"`
	CACert    string `yaml:"ca_cert"`
}

func (c *clientFlags) client() (*api.Client, error) {
	path, explicit := c.config, c.config != ""
	if path == "" {
		path, explicit = os.Getenv("TIDE_CONFIG"), os.Getenv("TIDE_CONFIG") != ""
	}
	if path == "" {
		if dir, err := os.UserConfigDir(); err == nil {
			path = filepath.Join(dir, "tide", "config.yaml")
		}
	}
	var cfg clientConfig
	if path != "" {
		data, err := os.ReadFile(path)
		switch {
		case err == nil:
			dec := yaml.NewDecoder(bytes.NewReader(data))
			dec.KnownFields(true)
			if err := dec.Decode(&cfg); err != nil && !errors.Is(err, io.EOF) {
				return nil, fmt.Errorf("config %s: %w", path, err)
			}
		case explicit || !errors.Is(err, os.ErrNotExist):
			return nil, fmt.Errorf("config: %w", err)
		}
	}
	server := first(c.server, os.Getenv("TIDE_SERVER"), cfg.Server, api.DefaultServer)
	token := first(c.token, os.Getenv("TIDE_TOKEN"), cfg.Token)
	if token == "" && cfg.TokenFile != "" {
		data, err := os.ReadFile(cfg.TokenFile)
		if err != nil {
			return nil, fmt.Errorf("config %s: token_file: %w", path, err)
		}
		token = strings.TrimSpace(string(data))
	}
	if token == "" {
		return nil, usageError{errors.New("no API token: pass --token, set TIDE_TOKEN or put 'token:' in the config file (a server's admin token is in its DATA_DIR/admin.token)")}
	}
	cl := api.NewClient(server, token)
	if ca := first(c.caCert, os.Getenv("TIDE_CA_CERT"), cfg.CACert); ca != "" {
		pem, err := os.ReadFile(ca)
		if err != nil {
			return nil, fmt.Errorf("--ca-cert: %w", err)
		}
		if err := cl.TrustCA(pem); err != nil {
			return nil, fmt.Errorf("--ca-cert %s: %w", ca, err)
		}
	}
	return cl, nil
}

func first(vals ...string) string {
	for _, v := range vals {
		if v != "" {
			return v
		}
	}
	return ""
}

func newClientFlagSet(name, help string, stderr io.Writer, c *clientFlags) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.register(fs)
	fs.Usage = func() {
		fmt.Fprint(stderr, help, clientHelp)
		fs.PrintDefaults()
	}
	return fs
}

// oneJob parses the arguments of a command about one job: its ID.
func (c *clientFlags) oneJob(fs *flag.FlagSet, args []string) (*api.Client, string, error) {
	if err := parseFlags(fs, args); err != nil {
		return nil, "", err
	}
	if fs.NArg() != 1 {
		return nil, "", usageError{errors.New("want one job ID")}
	}
	cl, err := c.client()
	return cl, fs.Arg(0), err
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

const submitHelp = `Usage: tide submit [flags] [-f FILE | -- COMMAND [ARGS...]]

Submits a job: a YAML or JSON job file (-f FILE, or a single argument
ending in .yaml, .yml or .json; '-' reads standard input), and/or flags;
flags override the file. The command is the arguments after --, or
--cmd 'shell command line' (run with sh -c). The working directory
defaults to the current one. Fields: docs/api.md.

Examples:
  tide submit --gpus 2 --estimate 2h -- python train.py --lr 0.1
  tide submit -f job.yaml --gpus 4
`

// absoluteDeadline turns a deadline given as a duration from now ("2h",
// "+90m") into the RFC 3339 time the API takes, so that a job file or
// --deadline can say how long the job may take rather than when it must
// end. The time is fixed here, once, so that retries of the submission
// keep it.
func absoluteDeadline(v string, now time.Time) (string, error) {
	if v == "" {
		return v, nil
	}
	if _, err := time.Parse(time.RFC3339, v); err == nil {
		return v, nil
	}
	d, err := time.ParseDuration(strings.TrimPrefix(strings.TrimSpace(v), "+"))
	if err != nil {
		return "", fmt.Errorf("deadline %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z or a duration from now such as 2h30m", v)
	}
	if d <= 0 {
		return "", fmt.Errorf("deadline %q: a duration from now must be positive (or give an RFC 3339 time)", v)
	}
	return now.Add(d).UTC().Format(time.RFC3339), nil
}

// plural is "1 job", "2 jobs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

type envFlags []string

func (e *envFlags) String() string     { return strings.Join(*e, ",") }
func (e *envFlags) Set(v string) error { *e = append(*e, v); return nil }

func cmdSubmit(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("submit", submitHelp, stderr, &c)
	file := fs.String("f", "", "job `FILE` (YAML or JSON; - for standard input)")
	// Flags that override a field of the job file when given.
	override := map[string]func(*api.JobSpec){}
	intFlag := func(name, usage string, set func(*api.JobSpec, int)) {
		v := fs.Int(name, 0, usage)
		override[name] = func(s *api.JobSpec) { set(s, *v) }
	}
	stringFlag := func(name, usage string, set func(*api.JobSpec, string)) {
		v := fs.String(name, "", usage)
		override[name] = func(s *api.JobSpec) { set(s, *v) }
	}
	stringFlag("name", "job name", func(s *api.JobSpec, v string) { s.Name = v })
	intFlag("gpus", "GPUs (the count a non-elastic policy gives)", func(s *api.JobSpec, v int) { s.GPUs = v })
	intFlag("min-gpus", "fewest GPUs an elastic job runs on", func(s *api.JobSpec, v int) { s.MinGPUs = v })
	intFlag("max-gpus", "most GPUs an elastic job runs on", func(s *api.JobSpec, v int) { s.MaxGPUs = v })
	stringFlag("gpu-type", "GPU type (default any)", func(s *api.JobSpec, v string) { s.GPUType = v })
	floatFlag := func(name, usage string, set func(*api.JobSpec, float64)) {
		v := fs.Float64(name, 0, usage)
		override[name] = func(s *api.JobSpec) { set(s, *v) }
	}
	floatFlag("gpu-share", "part of each GPU's compute, in (0, 1): jobs share GPUs (docs/sharing.md)", func(s *api.JobSpec, v float64) { s.GPUShare = v })
	floatFlag("gpu-mem", "GPU memory the job needs on each GPU, GiB (GPU sharing)", func(s *api.JobSpec, v float64) { s.GPUMemGiB = v })
	stringFlag("mig", "MIG profile such as 1g.10gb (GPU sharing)", func(s *api.JobSpec, v string) { s.MIG = v })
	stringFlag("job-type", "what the job trains, as named in the server's --pair-throughputs (packing; docs/sharing.md)", func(s *api.JobSpec, v string) { s.JobType = v })
	shell := fs.String("cmd", "", "command line, run with sh -c")
	workdir := fs.String("workdir", "", "working directory (default: the current one)")
	var env envFlags
	fs.Var(&env, "env", "`NAME=VALUE` to add to the job's environment (repeatable)")
	estimate := fs.Duration("estimate", 0, "expected run time on --gpus GPUs (default 1h)")
	override["estimate"] = func(s *api.JobSpec) { s.EstimateS = estimate.Seconds() }
	intFlag("priority", "priority (larger is more important)", func(s *api.JobSpec, v int) { s.Priority = v })
	intFlag("max-retries", "retry limit (default: the server's)", func(s *api.JobSpec, v int) { s.MaxRetries = &v })
	stringFlag("deadline", "`TIME` the job should finish by: RFC 3339 (2026-01-02T15:04:05Z) or a duration from now (90m, 2h30m)", func(s *api.JobSpec, v string) { s.Deadline = v })
	intFlag("batch-size", "global batch size the job starts with (for goodput fitting; tide passes it on as $TIDE_BATCH_SIZE)",
		func(s *api.JobSpec, v int) { s.BatchSize = v })
	intFlag("max-batch-size", "largest global batch a policy that adapts batch sizes (pollux) may give the job",
		func(s *api.JobSpec, v int) { s.MaxBatchSize = v })
	intFlag("max-local-bsz", "largest per-GPU batch that fits a GPU (larger ones use gradient accumulation)",
		func(s *api.JobSpec, v int) { s.MaxLocalBsz = v })
	stringFlag("tenant", "submit for this tenant (admin only)", func(s *api.JobSpec, v string) { s.Tenant = v })
	after := fs.String("after", "", "`ID[,ID...]`: start after these jobs finish (exit 0); if one fails or is cancelled, this job fails without running")
	array := fs.String("array", "", "`SPEC`: submit an array of jobs, one per index (0-99, 1,3,5 or 0-9,20), each with $TIDE_ARRAY_INDEX")
	timeLimit := fs.Duration("time-limit", 0, "wall-clock limit (e.g. 2h): past it the job is stopped and fails")
	hold := fs.Bool("hold", false, "submit held: the job starts only after 'tide release ID'")
	wait := fs.Bool("wait", false, "wait for the job (every task of an array) to end; exit 0 if it finished, else its exit code (1 when it has none)")
	idemKey := fs.String("idempotency-key", "", "`KEY` making the submission safe to retry: the server creates one job per key (a UUID, say); "+
		"with it, tide submit retries by itself when the connection fails")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	rest := fs.Args()
	jobFile := len(rest) > 0 && (strings.HasSuffix(rest[0], ".yaml") || strings.HasSuffix(rest[0], ".yml") || strings.HasSuffix(rest[0], ".json"))
	if *file == "" && len(rest) == 1 && jobFile {
		*file, rest = rest[0], nil
	}
	if dashes := len(args) > len(rest) && args[len(args)-len(rest)-1] == "--"; *file == "" && len(rest) > 1 && jobFile && !dashes {
		// tide submit job.yaml --gpus 2: the flags after the file were
		// taken for the command's arguments, and the server said the
		// file is not a program.
		return usageError{fmt.Errorf("%s looks like a job file, followed by %q: flags come before arguments (tide submit -f %[1]s %[2]s); to run it as a command, give it after --", rest[0], strings.Join(rest[1:], " "))}
	}
	spec := &api.JobSpec{}
	if *file != "" {
		var err error
		if spec, err = readJobFile(*file); err != nil {
			return err
		}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) {
		set[f.Name] = true
		if o := override[f.Name]; o != nil {
			o(spec)
		}
	})
	switch {
	case *shell != "" && len(rest) > 0:
		return usageError{errors.New("give the command either with --cmd or after --, not both")}
	case *shell != "":
		spec.Command = []string{"sh", "-c", *shell}
	case len(rest) > 0:
		spec.Command = rest
	}
	if len(spec.Command) == 0 {
		return usageError{errors.New("no command: give a job file, --cmd, or the command after --")}
	}
	if spec.GPUs == 0 && spec.MaxGPUs == 0 {
		spec.GPUs = 1
	}
	deadline, err := absoluteDeadline(spec.Deadline, time.Now())
	if err != nil {
		return usageError{err}
	}
	spec.Deadline = deadline
	for _, kv := range env {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return usageError{fmt.Errorf("--env %q: want NAME=VALUE", kv)}
		}
		if spec.Env == nil {
			spec.Env = map[string]string{}
		}
		spec.Env[k] = v
	}
	if set["workdir"] {
		spec.Workdir = *workdir
	}
	if spec.Workdir == "" {
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		spec.Workdir = wd
	}
	if !filepath.IsAbs(spec.Workdir) {
		abs, err := filepath.Abs(spec.Workdir)
		if err != nil {
			return err
		}
		spec.Workdir = abs
	}
	if msg := api.CheckIdempotencyKey(*idemKey); msg != "" {
		return usageError{fmt.Errorf("--idempotency-key: %s", msg)}
	}
	if *after != "" {
		spec.After = strings.Split(*after, ",")
	}
	if set["time-limit"] {
		if *timeLimit <= 0 {
			return usageError{fmt.Errorf("--time-limit %s: want a positive duration such as 2h", *timeLimit)}
		}
		spec.TimeLimitS = timeLimit.Seconds()
	}
	if *hold {
		spec.Hold = true
	}
	indices := []int{-1}
	if *array != "" {
		var err error
		if indices, err = parseArray(*array); err != nil {
			return usageError{fmt.Errorf("--array %q: %w", *array, err)}
		}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var jobs []*api.Job
	for _, i := range indices {
		task, key := spec, *idemKey
		if i >= 0 {
			cp := *spec
			cp.ArrayIndex = &i
			if spec.Name != "" {
				cp.Name = fmt.Sprintf("%s[%d]", spec.Name, i)
			}
			if key != "" {
				key = fmt.Sprintf("%s-%d", key, i)
			}
			task = &cp
		}
		j, err := submitJob(cl, task, key, stderr)
		if err != nil {
			if len(jobs) > 0 {
				return fmt.Errorf("array task %d (after %d submitted, %s to %s): %w", i, len(jobs), jobs[0].ID, jobs[len(jobs)-1].ID, err)
			}
			return err
		}
		jobs = append(jobs, j)
	}
	switch {
	case c.json && len(jobs) == 1:
		if err := printJSON(stdout, jobs[0]); err != nil {
			return err
		}
	case c.json:
		list := api.JobList{}
		for _, j := range jobs {
			list.Jobs = append(list.Jobs, *j)
		}
		if err := printJSON(stdout, list); err != nil {
			return err
		}
	case len(jobs) == 1:
		fmt.Fprintf(stdout, "%s submitted (%s)\n", jobs[0].ID, jobs[0].State)
	default:
		fmt.Fprintf(stdout, "%d array tasks submitted: %s to %s\n", len(jobs), jobs[0].ID, jobs[len(jobs)-1].ID)
	}
	if *wait {
		return waitJobs(cl, jobs, stderr)
	}
	return nil
}

// parseArray reads --array: comma-separated indices and ranges A-B.
func parseArray(spec string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, part := range strings.Split(spec, ",") {
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := strconv.Atoi(lo)
		if err != nil || a < 0 {
			return nil, fmt.Errorf("%q is not an index >= 0 or a range A-B", part)
		}
		b := a
		if isRange {
			if b, err = strconv.Atoi(hi); err != nil || b < a {
				return nil, fmt.Errorf("%q is not a range A-B with A <= B", part)
			}
		}
		if b > api.MaxArrayIndex || len(out)+(b-a+1) > 10000 {
			return nil, fmt.Errorf("at most 10000 tasks, indices up to %d", api.MaxArrayIndex)
		}
		for i := a; i <= b; i++ {
			if !seen[i] {
				seen[i] = true
				out = append(out, i)
			}
		}
	}
	return out, nil
}

// exitCodeError makes tide exit with code, having said msg.
type exitCodeError struct {
	code int
	msg  string
}

func (e exitCodeError) Error() string { return e.msg }

// waitJobs polls jobs until each has ended. It returns nil when all
// finished, else an exitCodeError with the exit code of the first that did
// not (1 when it has none: cancelled, declined, lost).
func waitJobs(cl *api.Client, jobs []*api.Job, stderr io.Writer) error {
	var bad *api.Job
	delay := 200 * time.Millisecond
	for _, j := range jobs {
		for !api.Terminal(j.State) {
			time.Sleep(delay)
			delay = min(2*delay, 2*time.Second)
			got, err := cl.Job(context.Background(), j.ID)
			if err != nil {
				return err
			}
			*j = *got
		}
		if j.State != api.StateFinished && bad == nil {
			bad = j
		}
	}
	if bad == nil {
		return nil
	}
	code := 1
	if n := len(bad.Attempts); n > 0 && bad.Attempts[n-1].ExitCode != nil && *bad.Attempts[n-1].ExitCode != 0 {
		code = *bad.Attempts[n-1].ExitCode
	}
	return exitCodeError{code: code, msg: fmt.Sprintf("job %s %s: %s (exit %d)", bad.ID, bad.State, bad.Reason, code)}
}

// submitJob submits spec; with an idempotency key it retries, up to five
// times, when the server could not be reached or answered 503 (the key
// makes a retry of a request that did arrive return the same job).
func submitJob(cl *api.Client, spec *api.JobSpec, key string, stderr io.Writer) (*api.Job, error) {
	if key == "" {
		return cl.Submit(context.Background(), spec)
	}
	delay := 200 * time.Millisecond
	for try := 1; ; try++ {
		j, err := cl.SubmitIdempotent(context.Background(), spec, key)
		var ae *api.Error
		if err == nil || try == 5 || (errors.As(err, &ae) && ae.Status != 503) {
			return j, err
		}
		fmt.Fprintf(stderr, "tide submit: %v; retrying in %s (idempotency key %s)\n", err, delay, key)
		time.Sleep(delay)
		delay *= 2
	}
}

// readJobFile reads a job spec in YAML or JSON, strictly (unknown fields
// are errors).
func readJobFile(path string) (*api.JobSpec, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(io.LimitReader(os.Stdin, api.MaxBodyBytes+1))
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, fmt.Errorf("job file: %w", err)
	}
	if len(data) > api.MaxBodyBytes {
		return nil, fmt.Errorf("job file %s: over %d bytes", path, api.MaxBodyBytes)
	}
	var spec api.JobSpec
	if strings.HasSuffix(path, ".json") || bytes.HasPrefix(bytes.TrimSpace(data), []byte("{")) {
		if err := api.DecodeStrict(bytes.NewReader(data), &spec); err != nil {
			return nil, fmt.Errorf("job file %s: %w", path, err)
		}
		return &spec, nil
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	if err := dec.Decode(&spec); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("job file %s: empty", path)
		}
		return nil, fmt.Errorf("job file %s: %w", path, err)
	}
	return &spec, nil
}

const jobsHelp = `Usage: tide jobs [flags]

Lists the jobs the token may see (all of them for the admin), oldest
first. --limit N shows a page of N; the next page is --after the last ID
shown (tide prints the command).
`

func cmdJobs(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("jobs", jobsHelp, stderr, &c)
	state := fs.String("state", "", "only jobs in these states, comma-separated (pending, running, preempted, finished, failed, cancelled, declined)")
	tenant := fs.String("tenant", "", "only this tenant's jobs (admin)")
	limit := fs.Int("limit", 0, "show at most `N` jobs (1 to 10000; 0: all)")
	after := fs.String("after", "", "start after job `ID` (the next page)")
	if err := parseOnlyFlags(fs, args); err != nil {
		return err
	}
	if *limit < 0 || *limit > 10000 {
		return usageError{fmt.Errorf("--limit %d: want 1 to 10000 (0: all)", *limit)}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	q := url.Values{}
	for k, v := range map[string]string{"state": *state, "tenant": *tenant, "after": *after} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if *limit > 0 {
		q.Set("limit", strconv.Itoa(*limit))
	}
	list, err := cl.ListJobs(context.Background(), q)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, list)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tTENANT\tSTATE\tGPUS\tPROGRESS\tRESTARTS\tAGE")
	now := time.Now()
	for _, j := range list.Jobs {
		st := j.State
		if j.Held {
			st += " (held)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%d\t%s\n", j.ID, dash(j.Name), j.Tenant, st, gpuColumn(&j),
			fmt.Sprintf("%.0f%%", 100*j.Progress), j.Restarts, age(now.Sub(j.Submitted)))
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if list.Next != "" {
		fmt.Fprintf(stderr, "more jobs: tide jobs --limit %d --after %s\n", *limit, list.Next)
	}
	return nil
}

const holdHelp = `Usage: tide hold [flags] ID... | tide release [flags] ID...

hold keeps waiting jobs from starting (a running job cannot be held);
release lets them start.
`

func cmdHold(hold bool) func(args []string, stdout, stderr io.Writer) error {
	return func(args []string, stdout, stderr io.Writer) error {
		var c clientFlags
		name := map[bool]string{true: "hold", false: "release"}[hold]
		fs := newClientFlagSet(name, holdHelp, stderr, &c)
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		return eachJob(fs.Args(), &c, stdout, func(cl *api.Client, id string) (*api.Job, error) {
			if hold {
				return cl.Hold(context.Background(), id)
			}
			return cl.Release(context.Background(), id)
		}, func(j *api.Job) string {
			what := "released"
			if j.Held {
				what = "held"
			}
			return fmt.Sprintf("%s %s (%s)", j.ID, what, j.State)
		})
	}
}

// eachJob calls do for every job ID of ids, printing each job it returns:
// JSON with --json, else line(job). A failure names its job and does not
// stop the others; they are all returned.
func eachJob(ids []string, c *clientFlags, stdout io.Writer, do func(cl *api.Client, id string) (*api.Job, error), line func(*api.Job) string) error {
	if len(ids) == 0 {
		return usageError{errors.New("want at least one job ID")}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	var errs []error
	for _, id := range ids {
		j, err := do(cl, id)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", id, err))
			continue
		}
		if c.json {
			if err := printJSON(stdout, j); err != nil {
				return err
			}
			continue
		}
		fmt.Fprintln(stdout, line(j))
	}
	return errors.Join(errs...)
}

const requeueHelp = `Usage: tide requeue [flags] ID...

Puts jobs back in the queue as a new run of the same job (same ID), as
Slurm's scontrol requeue: a finished, failed, cancelled or declined job
queues again; a running one is stopped first (SIGTERM, the grace period,
SIGKILL). The new run queues behind the jobs already waiting; its attempts
go on numbering, its failures and time limit count from 0, and it resumes
from the job's checkpoint directory if the previous run left one.
`

func cmdRequeue(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("requeue", requeueHelp, stderr, &c)
	hold := fs.Bool("hold", false, "requeue held: the job starts only after 'tide release ID'")
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return eachJob(fs.Args(), &c, stdout, func(cl *api.Client, id string) (*api.Job, error) {
		return cl.Requeue(context.Background(), id, *hold)
	}, func(j *api.Job) string {
		held := ""
		if j.Held {
			held = ", held"
		}
		return fmt.Sprintf("%s requeued (%s%s, run %d)", j.ID, j.State, held, j.Requeues+1)
	})
}

const usageHelp = `Usage: tide usage [flags]

GPU-hours used per tenant, or per job with --by job, over a period (GPUs
held x hours each attempt ran, counted inside the period). Admin sees every
tenant; a tenant its own.
`

func cmdUsage(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("usage", usageHelp, stderr, &c)
	since := fs.Duration("since", 0, "period: the last `D` (e.g. 24h, 720h; default: since the beginning)")
	fromS := fs.String("from", "", "period start, RFC 3339 (instead of --since)")
	toS := fs.String("to", "", "period end, RFC 3339 (default now)")
	by := fs.String("by", "tenant", "rows per tenant or per job")
	csvOut := fs.Bool("csv", false, "print CSV")
	if err := parseOnlyFlags(fs, args); err != nil {
		return err
	}
	if *by != "tenant" && *by != "job" {
		return usageError{fmt.Errorf("--by %q: want tenant or job", *by)}
	}
	var from, to time.Time
	var err error
	if *since > 0 && *fromS != "" {
		return usageError{errors.New("give --since or --from, not both")}
	}
	if *since > 0 {
		from = time.Now().Add(-*since)
	}
	if *fromS != "" {
		if from, err = time.Parse(time.RFC3339, *fromS); err != nil {
			return usageError{fmt.Errorf("--from %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", *fromS)}
		}
	}
	if *toS != "" {
		if to, err = time.Parse(time.RFC3339, *toS); err != nil {
			return usageError{fmt.Errorf("--to %q: want an RFC 3339 time such as 2026-01-02T15:04:05Z", *toS)}
		}
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	u, err := cl.Usage(context.Background(), from, to)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, u)
	}
	header := []string{"tenant", "jobs", "gpu_hours"}
	var rows [][]string
	if *by == "job" {
		header = []string{"job", "name", "tenant", "state", "gpu_hours"}
		for _, j := range u.Jobs {
			rows = append(rows, []string{j.Job, j.Name, j.Tenant, j.State, strconv.FormatFloat(j.GPUHours, 'f', 4, 64)})
		}
	} else {
		hours, count := map[string]float64{}, map[string]int{}
		var names []string
		for _, j := range u.Jobs {
			if count[j.Tenant] == 0 {
				names = append(names, j.Tenant)
			}
			hours[j.Tenant] += j.GPUHours
			count[j.Tenant]++
		}
		slices.Sort(names)
		for _, n := range names {
			rows = append(rows, []string{n, strconv.Itoa(count[n]), strconv.FormatFloat(hours[n], 'f', 4, 64)})
		}
	}
	if *csvOut {
		w := csv.NewWriter(stdout)
		_ = w.Write(header)
		_ = w.WriteAll(rows)
		return w.Error()
	}
	fmt.Fprintf(stdout, "GPU-hours from %s to %s\n", u.From.Local().Format(time.RFC3339), u.To.Local().Format(time.RFC3339))
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, strings.ToUpper(strings.Join(header, "\t")))
	for _, r := range rows {
		fmt.Fprintln(tw, strings.Join(r, "\t"))
	}
	return tw.Flush()
}

// shellQuote writes argv as a shell would need it.
func shellQuote(argv []string) string {
	out := make([]string, len(argv))
	for i, a := range argv {
		if a != "" && strings.Trim(a, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./=:,+@%") == "" {
			out[i] = a
		} else {
			out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(out, " ")
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// gpuColumn shows the GPUs held ("0,1") or the request ("2", "1-4").
func gpuColumn(j *api.Job) string {
	if len(j.GPUs) > 0 {
		return strings.Trim(strings.Join(strings.Fields(fmt.Sprint(j.GPUs)), ","), "[]")
	}
	s := j.Spec
	n := s.GPUs
	if n == 0 {
		n = s.MaxGPUs
	}
	if s.MinGPUs != 0 && s.MaxGPUs != 0 && s.MinGPUs != s.MaxGPUs {
		return fmt.Sprintf("(%d-%d)", s.MinGPUs, s.MaxGPUs)
	}
	return fmt.Sprintf("(%d)", n)
}

func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh%02dm", int(d.Hours()), int(d.Minutes())%60)
	}
	return fmt.Sprintf("%dd", int(d.Hours()/24))
}

func stamp(t *time.Time) string {
	if t == nil {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04:05")
}

// deadlineStatus is a job's deadline with where the job stands against it:
// met or missed once it ended, otherwise the time left or past.
func deadlineStatus(j *api.Job, now time.Time) string {
	d, err := time.Parse(time.RFC3339, j.Spec.Deadline)
	if err != nil {
		return j.Spec.Deadline
	}
	s := stamp(&d)
	switch {
	case j.Ended != nil && j.State == api.StateFinished && !j.Ended.After(d):
		return s + " (met)"
	case j.Ended != nil && j.State == api.StateFinished:
		return s + " (missed by " + age(j.Ended.Sub(d)) + ")"
	case j.Ended != nil:
		return s
	case now.After(d):
		return s + " (passed " + age(now.Sub(d)) + " ago)"
	}
	return s + " (in " + age(d.Sub(now)) + ")"
}

const jobHelp = `Usage: tide job [flags] ID

Shows one job: its spec, state, progress and every attempt.
`

func cmdJob(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("job", jobHelp, stderr, &c)
	cl, id, err := c.oneJob(fs, args)
	if err != nil {
		return err
	}
	j, err := cl.Job(context.Background(), id)
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, j)
	}
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	state := j.State
	if j.Reason != "" && api.Terminal(j.State) {
		state += " (" + j.Reason + ")"
	}
	row := func(k, v string) { fmt.Fprintf(tw, "%s:\t%s\n", k, v) }
	row("ID", j.ID)
	row("Name", dash(j.Name))
	row("Tenant", j.Tenant)
	row("State", state)
	if !api.Terminal(j.State) && j.Reason != "" {
		// The policy's explanation of its last decision about the job.
		row("Policy says", j.Reason)
		if j.QueuePosition > 0 {
			row("Queue position", strconv.Itoa(j.QueuePosition))
		}
		if j.PredictedStart != nil {
			row("Predicted start", stamp(j.PredictedStart))
		}
	}
	row("Command", shellQuote(j.Spec.Command))
	row("Workdir", dash(j.Spec.Workdir))
	req := gpuColumn(&api.Job{Spec: j.Spec})
	if j.Spec.GPUType != "" {
		req += " " + j.Spec.GPUType
	}
	held := "none"
	if len(j.GPUs) > 0 {
		held = fmt.Sprint(j.GPUs)
	}
	row("GPUs", "asks "+strings.Trim(req, "()")+", holds "+held)
	if j.Spec.Priority != 0 {
		row("Priority", strconv.Itoa(j.Spec.Priority))
	}
	if j.Spec.Deadline != "" {
		row("Deadline", deadlineStatus(j, time.Now()))
	}
	if j.Spec.TimeLimitS > 0 {
		row("Time limit", (time.Duration(j.Spec.TimeLimitS) * time.Second).String())
	}
	row("Submitted", stamp(&j.Submitted))
	row("Started", stamp(j.Started))
	row("Ended", stamp(j.Ended))
	prog := fmt.Sprintf("%.1f%%", 100*j.Progress)
	if j.Throughput > 0 {
		prog += fmt.Sprintf(", %.4g/s", j.Throughput)
	}
	if j.Message != "" {
		prog += fmt.Sprintf(", %q", j.Message)
	}
	if j.ReportedAt != nil {
		prog += fmt.Sprintf(" (reported %s ago)", age(time.Since(*j.ReportedAt)))
	}
	row("Progress", prog)
	row("Restarts", fmt.Sprintf("%d (preemptions %d, failures %d)", j.Restarts, j.Preemptions, j.Failures))
	if j.Requeues > 0 {
		row("Requeues", fmt.Sprintf("%d (run %d; failures count this run's)", j.Requeues, j.Requeues+1))
	}
	if p := j.Perf; p != nil {
		if p.NoiseScale > 0 {
			row("Gradients", fmt.Sprintf("noise scale %.4g samples (grad_sqr %.4g, grad_var %.4g)", p.NoiseScale, p.GradSqr, p.GradVar))
		} else if p.GradSqr > 0 || p.GradVar > 0 {
			row("Gradients", fmt.Sprintf("grad_sqr %.4g, grad_var %.4g", p.GradSqr, p.GradVar))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	if err := printPerf(stdout, j.Perf); err != nil {
		return err
	}
	if len(j.Attempts) == 0 {
		return nil
	}
	fmt.Fprintln(stdout, "\nAttempts:")
	tw = tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	batches := false
	for _, a := range j.Attempts {
		batches = batches || a.BatchSize > 0
	}
	if batches {
		fmt.Fprintln(tw, "  #\tGPUS\tBATCH\tPID\tSTARTED\tENDED\tEXIT\tOUTCOME")
	} else {
		fmt.Fprintln(tw, "  #\tGPUS\tPID\tSTARTED\tENDED\tEXIT\tOUTCOME")
	}
	for _, a := range j.Attempts {
		exit := "-"
		if a.ExitCode != nil {
			exit = strconv.Itoa(*a.ExitCode)
		}
		pid := "-"
		if a.PID > 0 {
			pid = strconv.Itoa(a.PID)
		}
		gpus := fmt.Sprint(a.GPUs)
		if batches {
			gpus += "\t" + batchString(a.BatchSize, a.LocalBsz, a.AccumSteps)
		}
		fmt.Fprintf(tw, "  %d\t%s\t%s\t%s\t%s\t%s\t%s\n", a.N, gpus, pid, stamp(a.Started), stamp(a.Ended), exit, a.Outcome)
	}
	return tw.Flush()
}

// batchString shows a batch configuration: "256 (64/GPU x 2 passes)".
func batchString(global, local, accum int) string {
	switch {
	case global == 0:
		return "-"
	case accum > 0:
		return fmt.Sprintf("%d (%d/GPU x %d passes)", global, local, accum+1)
	}
	return fmt.Sprintf("%d (%d/GPU)", global, local)
}

// printPerf shows the goodput model fitted to a job's step-time reports:
// what it predicts per GPU count, next to what was observed.
func printPerf(w io.Writer, p *api.JobPerf) error {
	if p == nil || len(p.Observations) == 0 {
		return nil
	}
	// The observed step of each GPU count on one node, preferring the
	// observation at the predicted per-GPU batch.
	type key struct{ gpus, local int }
	seen := map[key]string{}
	var counts []int
	for _, o := range p.Observations {
		if o.Nodes == 1 {
			s := fmt.Sprintf("%.4g s (%d/GPU)", o.StepTime, o.LocalBsz)
			seen[key{o.Replicas, o.LocalBsz}] = s
			if _, ok := seen[key{o.Replicas, 0}]; !ok {
				seen[key{o.Replicas, 0}] = s
			}
		}
		counts = append(counts, o.Replicas)
	}
	slices.Sort(counts)
	counts = slices.Compact(counts)
	fmt.Fprintf(w, "\nPerformance (goodput model fitted to %d observed configurations, on %s GPUs; predictions for one node):\n",
		len(p.Observations), strings.Trim(strings.Join(strings.Fields(fmt.Sprint(counts)), ", "), "[]"))
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  GPUS\tBATCH\tSTEP\tSAMPLES/S\tSPEEDUP\tOBSERVED STEP")
	for _, pt := range p.Predicted {
		obs, ok := seen[key{pt.GPUs, pt.LocalBsz}]
		if !ok {
			obs = seen[key{pt.GPUs, 0}]
		}
		fmt.Fprintf(tw, "  %d\t%s\t%.4g s\t%.4g\t%.2fx\t%s\n", pt.GPUs, batchString(pt.BatchSize, pt.LocalBsz, pt.AccumSteps),
			pt.StepTime, pt.Throughput, pt.Speedup, dash(obs))
	}
	return tw.Flush()
}

const cancelHelp = `Usage: tide cancel [flags] ID...

Cancels jobs: a running job gets SIGTERM, then SIGKILL after the server's
grace period.
`

func cmdCancel(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("cancel", cancelHelp, stderr, &c)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	return eachJob(fs.Args(), &c, stdout, func(cl *api.Client, id string) (*api.Job, error) {
		return cl.Cancel(context.Background(), id)
	}, func(j *api.Job) string { return fmt.Sprintf("%s %s", j.ID, j.State) })
}

const logsHelp = `Usage: tide logs [flags] ID

Prints a job's output (standard output and error of every attempt, with a
line from tide before each). -f follows it until the job ends.
`

func cmdLogs(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("logs", logsHelp, stderr, &c)
	follow := fs.Bool("f", false, "follow the log until the job ends")
	interval := fs.Duration("interval", 500*time.Millisecond, "polling interval with -f")
	cl, id, err := c.oneJob(fs, args)
	if err != nil {
		return err
	}
	var off int64
	for {
		data, next, state, err := cl.Logs(context.Background(), id, off)
		if err != nil {
			return err
		}
		if _, err := stdout.Write(data); err != nil {
			return err
		}
		off = next
		switch {
		case len(data) > 0:
			// The server sends at most 1 MiB at a time: ask for more.
		case !*follow || api.Terminal(state):
			return nil
		default:
			time.Sleep(*interval)
		}
	}
}

const clusterHelp = `Usage: tide cluster [flags]

Shows the server's GPUs, who holds them, and the queue.
`

func cmdCluster(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("cluster", clusterHelp, stderr, &c)
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	cl, err := c.client()
	if err != nil {
		return err
	}
	info, err := cl.Cluster(context.Background())
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, info)
	}
	fmt.Fprintf(stdout, "policy %s, placer %s: %d of %d GPUs allocated; %s running, %d queued\n\n",
		info.Policy, info.Placer, info.Allocated, info.Total, plural(info.Running, "job"), info.Queued)
	tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "GPU\tTYPE\tNAME\tMEMORY\tJOB")
	for _, g := range info.GPUs {
		job := g.Job
		if len(g.Jobs) > 0 {
			job = strings.Join(g.Jobs, ",")
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%.0f GiB\t%s\n", g.Index, g.Type, g.Name, g.MemoryGiB, dash(job))
	}
	return tw.Flush()
}

const tenantHelp = `Usage: tide tenant COMMAND [flags] ...

Manages tenants (admin only):

  tide tenant add NAME [--user USER] [limits]   create; prints its token (shown only now)
  tide tenant set NAME [--user USER] [limits]   change its Unix user or limits
  tide tenant list                              list tenants, users and limits
  tide tenant rotate NAME                       new token (printed); the old one stops working
  tide tenant revoke NAME                       no token works until the next rotate
  tide tenant delete NAME [--cancel-jobs]       delete (its unfinished jobs must be cancelled)

--user is the Unix user (NAME, UID or UID:GID) the tenant's jobs run as when
tide serve runs as root. Limits (0: none): --max-gpus (a quota of GPUs in
use), --max-queued (jobs waiting), --submit-rate (submissions a second per
token), --max-log-bytes (per job; default the server's --max-log-bytes).
`

func cmdTenant(args []string, stdout, stderr io.Writer) error {
	var c clientFlags
	fs := newClientFlagSet("tenant", tenantHelp, stderr, &c)
	user := fs.String("user", "", "Unix `USER` (NAME, UID or UID:GID) the tenant's jobs run as when tide serve runs as root")
	var lim api.Limits
	fs.IntVar(&lim.MaxGPUs, "max-gpus", 0, "quota: most GPUs the tenant's jobs hold at once (0: no limit)")
	fs.IntVar(&lim.MaxQueued, "max-queued", 0, "most jobs the tenant may have waiting to run (0: no limit)")
	fs.Float64Var(&lim.SubmitRate, "submit-rate", 0, "most submissions a second per token (0: no limit)")
	fs.Int64Var(&lim.MaxLogBytes, "max-log-bytes", 0, "size a job's log may reach (0: the server's default)")
	cancelJobs := fs.Bool("cancel-jobs", false, "with delete: cancel the tenant's unfinished jobs")
	// Flags may come before or after the subcommand and name.
	var rest []string
	for len(args) > 0 {
		if err := parseFlags(fs, args); err != nil {
			return err
		}
		if fs.NArg() == 0 {
			break
		}
		rest = append(rest, fs.Arg(0))
		args = fs.Args()[1:]
	}
	want := map[string]int{"add": 2, "set": 2, "list": 1, "rotate": 2, "revoke": 2, "delete": 2}
	if len(rest) == 0 || want[rest[0]] != len(rest) {
		return usageError{errors.New("want 'add NAME', 'set NAME', 'list', 'rotate NAME', 'revoke NAME' or 'delete NAME'")}
	}
	set := map[string]bool{}
	fs.Visit(func(f *flag.Flag) { set[f.Name] = true })
	limitsSet := set["max-gpus"] || set["max-queued"] || set["submit-rate"] || set["max-log-bytes"]
	cl, err := c.client()
	if err != nil {
		return err
	}
	ctx := context.Background()
	var t *api.Tenant
	switch rest[0] {
	case "add":
		req := &api.NewTenant{Name: rest[1], User: *user}
		if limitsSet {
			req.Limits = &lim
		}
		t, err = cl.CreateTenantWith(ctx, req)
	case "set":
		u := &api.TenantUpdate{}
		if set["user"] {
			u.User = user
		}
		if limitsSet {
			// Limits are replaced whole: start from the current ones.
			ts, err := cl.Tenants(ctx)
			if err != nil {
				return err
			}
			cur := api.Limits{}
			for _, x := range ts {
				if x.Name == rest[1] {
					cur = x.Limits
				}
			}
			fs.Visit(func(f *flag.Flag) {
				switch f.Name {
				case "max-gpus":
					cur.MaxGPUs = lim.MaxGPUs
				case "max-queued":
					cur.MaxQueued = lim.MaxQueued
				case "submit-rate":
					cur.SubmitRate = lim.SubmitRate
				case "max-log-bytes":
					cur.MaxLogBytes = lim.MaxLogBytes
				}
			})
			u.Limits = &cur
		}
		if u.User == nil && u.Limits == nil {
			return usageError{errors.New("tenant set: nothing to change: give --user or a limit")}
		}
		t, err = cl.UpdateTenant(ctx, rest[1], u)
	case "rotate":
		t, err = cl.RotateToken(ctx, rest[1])
	case "revoke":
		t, err = cl.RevokeToken(ctx, rest[1])
	case "delete":
		ids, err := cl.DeleteTenant(ctx, rest[1], *cancelJobs)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(stdout, map[string]any{"deleted": rest[1], "cancelled": ids})
		}
		fmt.Fprintf(stdout, "tenant %s deleted", rest[1])
		if len(ids) > 0 {
			fmt.Fprintf(stdout, "; cancelled %s", strings.Join(ids, " "))
		}
		fmt.Fprintln(stdout)
		return nil
	case "list":
		ts, err := cl.Tenants(ctx)
		if err != nil {
			return err
		}
		if c.json {
			return printJSON(stdout, map[string]any{"tenants": ts})
		}
		tw := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "NAME\tADMIN\tUSER\tMAX GPUS\tMAX QUEUED\tSUBMIT/S\tMAX LOG\tTOKEN\tCREATED")
		for _, t := range ts {
			tok := "valid"
			if t.Revoked {
				tok = "revoked"
			}
			l := t.Limits
			fmt.Fprintf(tw, "%s\t%v\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.Name, t.Admin, dash(t.User), limitCol(float64(l.MaxGPUs)),
				limitCol(float64(l.MaxQueued)), limitCol(l.SubmitRate), limitCol(float64(l.MaxLogBytes)), tok, stamp(&t.Created))
		}
		return tw.Flush()
	}
	if err != nil {
		return err
	}
	if c.json {
		return printJSON(stdout, t)
	}
	switch {
	case rest[0] == "add":
		fmt.Fprintf(stdout, "tenant %s created; its token (shown only now):\n%s\n", t.Name, t.Token)
	case rest[0] == "rotate":
		fmt.Fprintf(stdout, "tenant %s has a new token (shown only now; the old one no longer works):\n%s\n", t.Name, t.Token)
	case rest[0] == "revoke":
		fmt.Fprintf(stdout, "tenant %s's token revoked ('tide tenant rotate %s' gives it a new one)\n", t.Name, t.Name)
	default:
		fmt.Fprintf(stdout, "tenant %s updated\n", t.Name)
	}
	return nil
}

func limitCol(v float64) string {
	if v == 0 {
		return "-"
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// parseOnlyFlags parses args into fs for a command that takes flags and no
// arguments.
func parseOnlyFlags(fs *flag.FlagSet, args []string) error {
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected arguments %q", fs.Args())}
	}
	return nil
}
