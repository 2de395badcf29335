// Package store keeps tide serve's state in an embedded database (bbolt) in
// the data directory: every job with its spec, status and attempt history,
// the tenants with their API tokens (SHA-256 hashed, never stored in the
// clear), and an append-only event log. Every Update is one fsynced
// transaction, so a server restarted after a crash finds everything it had
// accepted.
//
// Layout of DIR/tide.db:
//
//	meta     schema version, admin bootstrap
//	jobs     job ID -> Job (JSON)
//	tenants  tenant name -> Tenant (JSON)
//	tokens   token hash -> tenant name
//	events   job ID (or "_server") -> { seq (8 bytes, big endian) -> Event (JSON) }
//	idempotency  tenant NUL key -> Idempotency (JSON)
package store

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	bolt "go.etcd.io/bbolt"
	bolterr "go.etcd.io/bbolt/errors"

	"github.com/tide-sched/tide/api"
	"github.com/tide-sched/tide/perf/goodput"
)

// Schema is the version of the layout this package writes.
const Schema = 1

var (
	bMeta    = []byte("meta")
	bJobs    = []byte("jobs")
	bTenants = []byte("tenants")
	bTokens  = []byte("tokens")
	bEvents  = []byte("events")
	bIdem    = []byte("idempotency")
	// bSamples: the web console's utilisation history, by time.
	bSamples = []byte("samples")
)

// ErrNotFound is returned for a job or tenant that does not exist.
var ErrNotFound = errors.New("not found")

// Job is a job's durable record.
type Job struct {
	ID        string      `json:"id"`
	Seq       uint64      `json:"seq"` // submission order
	Tenant    string      `json:"tenant"`
	Spec      api.JobSpec `json:"spec"`
	State     string      `json:"state"` // api.State*
	Submitted float64     `json:"submitted"`
	// FirstStart and Ended are Unix seconds, 0 until they happen.
	FirstStart  float64 `json:"first_start,omitempty"`
	Ended       float64 `json:"ended,omitempty"`
	Restarts    int     `json:"restarts,omitempty"`
	Failures    int     `json:"failures,omitempty"`
	Preemptions int     `json:"preemptions,omitempty"`
	Reason      string  `json:"reason,omitempty"`
	// IdempotencyKey is the key the job was submitted with, if any
	// (forgotten with the job).
	IdempotencyKey string `json:"idempotency_key,omitempty"`
	// Held: the job may not start until released.
	Held bool `json:"held,omitempty"`
	// Purged is when the job's files (log, checkpoint, report) were
	// removed by the retention rule, Unix seconds; 0 while they are kept.
	Purged float64 `json:"purged,omitempty"`
	// Requeues counts the times the job was put back in the queue
	// (tide requeue); Requeued is when it last was, Unix seconds (the
	// job queues from then); RunFrom is the number of attempts before the
	// current run (its time limit counts the attempts from there).
	Requeues int     `json:"requeues,omitempty"`
	Requeued float64 `json:"requeued,omitempty"`
	RunFrom  int     `json:"run_from,omitempty"`

	// The job's last report.
	Progress   float64 `json:"progress,omitempty"`
	Throughput float64 `json:"throughput,omitempty"`
	Message    string  `json:"message,omitempty"`
	ReportedAt float64 `json:"reported_at,omitempty"`
	// ReportTokenHash is the hash of the report token handed to the job's
	// latest attempt ($TIDE_REPORT_TOKEN).
	ReportTokenHash string `json:"report_token_hash,omitempty"`

	// Engine holds the scheduler's counters, restored after a restart.
	Engine EngineStats `json:"engine"`
	// Perf is what the job's step-time reports taught the goodput model,
	// restored after a restart so elastic policies keep what they learned;
	// nil until the job reports a step time or gradient statistics.
	Perf *Perf `json:"perf,omitempty"`

	Attempts []Attempt `json:"attempts,omitempty"`
}

// EngineStats are the scheduling engine's per-job counters
// (engine.Status), saved so policies see the same history after a restart.
type EngineStats struct {
	Attained    float64    `json:"attained,omitempty"`
	Executed    float64    `json:"executed,omitempty"`
	Waited      float64    `json:"waited,omitempty"`
	Starts      int        `json:"starts,omitempty"`
	Preemptions int        `json:"preemptions,omitempty"`
	Resizes     int        `json:"resizes,omitempty"`
	FirstStart  float64    `json:"first_start,omitempty"`
	LastStop    float64    `json:"last_stop,omitempty"`
	Memo        [4]float64 `json:"memo,omitempty"`
}

// Perf is a job's performance record: one observation per configuration
// it reported a step time on (the goodput model is refitted from them), and
// its latest gradient statistics.
type Perf struct {
	Observations []goodput.Observation `json:"observations,omitempty"`
	// GradSqr and GradVar are the smoothed gradient statistics
	// (bias-corrected exponential moving averages over GradReports
	// reports), what the model uses.
	GradSqr     float64 `json:"grad_sqr,omitempty"`
	GradVar     float64 `json:"grad_var,omitempty"`
	GradReports int     `json:"grad_reports,omitempty"`
}

// Attempt phases.
const (
	PhaseWaiting  = "waiting"  // decided, waiting for its GPUs or a retry delay
	PhaseRunning  = "running"  // the process runs
	PhaseStopping = "stopping" // SIGTERM sent or about to be
	PhaseEnded    = "ended"
)

// Attempt is one launch of the job's command.
type Attempt struct {
	N       int    `json:"n"`
	GPUs    []int  `json:"gpus"`    // cluster GPU ids
	Devices []int  `json:"devices"` // CUDA indices
	Phase   string `json:"phase"`
	// PID and StartTicks identify the process (its process group leader):
	// the start time guards against a reused pid.
	PID        int     `json:"pid,omitempty"`
	StartTicks uint64  `json:"start_ticks,omitempty"`
	Created    float64 `json:"created"`
	Started    float64 `json:"started,omitempty"`
	Ended      float64 `json:"ended,omitempty"`
	ExitCode   *int    `json:"exit_code,omitempty"`
	Outcome    string  `json:"outcome,omitempty"` // see api.Attempt
	// Stop is why tide is stopping it (preempt, resize, cancel, ...).
	Stop string `json:"stop,omitempty"`
	// MPS says the attempt holds its GPU's MPS daemon (started or
	// adopted for it): a server that finds the attempt gone, or stops
	// it, lets the daemon go.
	MPS bool `json:"mps,omitempty"`
	// The batch configuration the attempt was given, for jobs with a
	// batch size (api.Attempt).
	BatchSize  int `json:"batch_size,omitempty"`
	LocalBsz   int `json:"local_bsz,omitempty"`
	AccumSteps int `json:"accum_steps,omitempty"`
}

// Last returns the job's latest attempt, or nil.
func (j *Job) Last() *Attempt {
	if len(j.Attempts) == 0 {
		return nil
	}
	return &j.Attempts[len(j.Attempts)-1]
}

// Clone returns a deep copy of j.
func (j *Job) Clone() *Job {
	c := *j
	c.Spec.Command = append([]string(nil), j.Spec.Command...)
	if j.Spec.Env != nil {
		c.Spec.Env = make(map[string]string, len(j.Spec.Env))
		for k, v := range j.Spec.Env {
			c.Spec.Env[k] = v
		}
	}
	if j.Spec.MaxRetries != nil {
		r := *j.Spec.MaxRetries
		c.Spec.MaxRetries = &r
	}
	c.Spec.After = append([]string(nil), j.Spec.After...)
	if j.Spec.ArrayIndex != nil {
		i := *j.Spec.ArrayIndex
		c.Spec.ArrayIndex = &i
	}
	if j.Perf != nil {
		p := *j.Perf
		p.Observations = append([]goodput.Observation(nil), j.Perf.Observations...)
		c.Perf = &p
	}
	c.Attempts = make([]Attempt, len(j.Attempts))
	for i, a := range j.Attempts {
		a.GPUs = append([]int(nil), a.GPUs...)
		a.Devices = append([]int(nil), a.Devices...)
		if a.ExitCode != nil {
			e := *a.ExitCode
			a.ExitCode = &e
		}
		c.Attempts[i] = a
	}
	return &c
}

// Tenant is an API user.
type Tenant struct {
	Name      string  `json:"name"`
	TokenHash string  `json:"token_hash"`
	Admin     bool    `json:"admin,omitempty"`
	Created   float64 `json:"created"`
	// User is the Unix user (name, UID or UID:GID) the tenant's jobs run
	// as when tide serve runs as root.
	User   string     `json:"user,omitempty"`
	Limits api.Limits `json:"limits"`
}

// Event is one entry of the event log.
type Event struct {
	Seq     uint64  `json:"seq"`
	Time    float64 `json:"time"`
	Job     string  `json:"job,omitempty"`
	Kind    string  `json:"kind"`
	Attempt int     `json:"attempt,omitempty"`
	Message string  `json:"message,omitempty"`
}

// DB is an open store.
type DB struct {
	bolt *bolt.DB
	path string
}

// Open opens (creating it if needed) the store in data directory dir. Only
// one process may have it open: a second Open fails after a second.
func Open(dir string) (*DB, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("store: data directory: %w", err)
	}
	path := filepath.Join(dir, "tide.db")
	b, err := bolt.Open(path, 0o600, &bolt.Options{Timeout: time.Second})
	if err != nil {
		if errors.Is(err, bolterr.ErrTimeout) {
			return nil, fmt.Errorf("store: %s is in use by another process (is another tide serve running on %s?)", path, dir)
		}
		return nil, fmt.Errorf("store: opening %s: %w", path, err)
	}
	// Batch waits this long for more callers before it commits: short,
	// since an fsync costs about a millisecond on an SSD and callers (API
	// submissions) wait for it.
	b.MaxBatchDelay = 2 * time.Millisecond
	d := &DB{bolt: b, path: path}
	err = b.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bMeta, bJobs, bTenants, bTokens, bEvents, bIdem, bSamples} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bMeta)
		if v := meta.Get([]byte("schema")); v != nil {
			if s := binary.BigEndian.Uint64(v); s != Schema {
				return fmt.Errorf("schema version %d, this tide reads %d", s, Schema)
			}
			return nil
		}
		return meta.Put([]byte("schema"), u64(Schema))
	})
	if err != nil {
		b.Close()
		return nil, fmt.Errorf("store: %s: %w", path, err)
	}
	return d, nil
}

// Path is the database file.
func (d *DB) Path() string { return d.path }

// Close closes the database.
func (d *DB) Close() error { return d.bolt.Close() }

// Tx is a transaction.
type Tx struct{ tx *bolt.Tx }

// Update runs fn in a read-write transaction, committed (and fsynced) when
// fn returns nil.
func (d *DB) Update(fn func(*Tx) error) error {
	return d.bolt.Update(func(tx *bolt.Tx) error { return fn(&Tx{tx}) })
}

// Batch is Update for many concurrent callers: their transactions are
// coalesced into fewer commits. fn may run more than once and must not
// have side effects outside the transaction.
func (d *DB) Batch(fn func(*Tx) error) error {
	return d.bolt.Batch(func(tx *bolt.Tx) error { return fn(&Tx{tx}) })
}

// View runs fn in a read-only transaction.
func (d *DB) View(fn func(*Tx) error) error {
	return d.bolt.View(func(tx *bolt.Tx) error { return fn(&Tx{tx}) })
}

func u64(v uint64) []byte {
	b := make([]byte, 8)
	binary.BigEndian.PutUint64(b, v)
	return b
}

// NewJobID reserves the next job ID ("j000001", ...) and its sequence
// number. IDs sort in submission order up to j99999999.
func (t *Tx) NewJobID() (string, uint64, error) {
	seq, err := t.tx.Bucket(bJobs).NextSequence()
	if err != nil {
		return "", 0, fmt.Errorf("store: job id: %w", err)
	}
	return fmt.Sprintf("j%06d", seq), seq, nil
}

// PutJob writes a job record.
func (t *Tx) PutJob(j *Job) error {
	data, err := json.Marshal(j)
	if err != nil {
		return fmt.Errorf("store: job %s: %w", j.ID, err)
	}
	if err := t.tx.Bucket(bJobs).Put([]byte(j.ID), data); err != nil {
		return fmt.Errorf("store: job %s: %w", j.ID, err)
	}
	return nil
}

// Job reads a job record; ErrNotFound when there is none.
func (t *Tx) Job(id string) (*Job, error) {
	data := t.tx.Bucket(bJobs).Get([]byte(id))
	if data == nil {
		return nil, fmt.Errorf("store: job %s: %w", id, ErrNotFound)
	}
	var j Job
	if err := json.Unmarshal(data, &j); err != nil {
		return nil, fmt.Errorf("store: job %s: %w", id, err)
	}
	return &j, nil
}

// Jobs calls fn for every job, in ID order, until fn returns an error.
func (t *Tx) Jobs(fn func(*Job) error) error {
	return t.tx.Bucket(bJobs).ForEach(func(k, v []byte) error {
		var j Job
		if err := json.Unmarshal(v, &j); err != nil {
			return fmt.Errorf("store: job %s: %w", k, err)
		}
		return fn(&j)
	})
}

// AddEvent appends e to the log, setting its sequence number.
func (t *Tx) AddEvent(e *Event) error {
	root := t.tx.Bucket(bEvents)
	seq, err := root.NextSequence()
	if err != nil {
		return fmt.Errorf("store: event: %w", err)
	}
	e.Seq = seq
	key := e.Job
	if key == "" {
		key = "_server"
	}
	b, err := root.CreateBucketIfNotExists([]byte(key))
	if err != nil {
		return fmt.Errorf("store: event for %s: %w", key, err)
	}
	data, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("store: event: %w", err)
	}
	return b.Put(u64(seq), data)
}

// Events returns a job's events (jobID "" for the server's own), oldest
// first.
func (t *Tx) Events(jobID string) ([]Event, error) {
	key := jobID
	if key == "" {
		key = "_server"
	}
	b := t.tx.Bucket(bEvents).Bucket([]byte(key))
	if b == nil {
		return nil, nil
	}
	var out []Event
	err := b.ForEach(func(_, v []byte) error {
		var e Event
		if err := json.Unmarshal(v, &e); err != nil {
			return fmt.Errorf("store: event of %s: %w", key, err)
		}
		out = append(out, e)
		return nil
	})
	return out, err
}

// PutTenant creates or replaces a tenant; its token hash is indexed (an
// empty hash is a revoked token: none works). A hash already used by
// another tenant is refused.
func (t *Tx) PutTenant(tn *Tenant) error {
	if !api.TenantName(tn.Name) {
		return fmt.Errorf("store: tenant %q: invalid name", tn.Name)
	}
	tokens := t.tx.Bucket(bTokens)
	if tn.TokenHash != "" {
		if owner := tokens.Get([]byte(tn.TokenHash)); owner != nil && string(owner) != tn.Name {
			return fmt.Errorf("store: tenant %s: token already in use", tn.Name)
		}
	}
	if old, err := t.Tenant(tn.Name); err == nil && old.TokenHash != tn.TokenHash && old.TokenHash != "" {
		if err := tokens.Delete([]byte(old.TokenHash)); err != nil {
			return fmt.Errorf("store: tenant %s: %w", tn.Name, err)
		}
	}
	data, err := json.Marshal(tn)
	if err != nil {
		return fmt.Errorf("store: tenant %s: %w", tn.Name, err)
	}
	if err := t.tx.Bucket(bTenants).Put([]byte(tn.Name), data); err != nil {
		return fmt.Errorf("store: tenant %s: %w", tn.Name, err)
	}
	if tn.TokenHash == "" {
		return nil
	}
	return tokens.Put([]byte(tn.TokenHash), []byte(tn.Name))
}

// DeleteTenant removes a tenant and its token; ErrNotFound when there is
// none. Its jobs stay.
func (t *Tx) DeleteTenant(name string) error {
	old, err := t.Tenant(name)
	if err != nil {
		return err
	}
	if old.TokenHash != "" {
		if err := t.tx.Bucket(bTokens).Delete([]byte(old.TokenHash)); err != nil {
			return fmt.Errorf("store: tenant %s: %w", name, err)
		}
	}
	if err := t.tx.Bucket(bTenants).Delete([]byte(name)); err != nil {
		return fmt.Errorf("store: tenant %s: %w", name, err)
	}
	return nil
}

// Tenant reads a tenant by name.
func (t *Tx) Tenant(name string) (*Tenant, error) {
	data := t.tx.Bucket(bTenants).Get([]byte(name))
	if data == nil {
		return nil, fmt.Errorf("store: tenant %s: %w", name, ErrNotFound)
	}
	var tn Tenant
	if err := json.Unmarshal(data, &tn); err != nil {
		return nil, fmt.Errorf("store: tenant %s: %w", name, err)
	}
	return &tn, nil
}

// TenantByTokenHash finds the tenant a token hash belongs to.
func (t *Tx) TenantByTokenHash(hash string) (*Tenant, error) {
	name := t.tx.Bucket(bTokens).Get([]byte(hash))
	if name == nil {
		return nil, fmt.Errorf("store: token: %w", ErrNotFound)
	}
	return t.Tenant(string(name))
}

// Tenants returns every tenant, by name.
func (t *Tx) Tenants() ([]Tenant, error) {
	var out []Tenant
	err := t.tx.Bucket(bTenants).ForEach(func(k, v []byte) error {
		var tn Tenant
		if err := json.Unmarshal(v, &tn); err != nil {
			return fmt.Errorf("store: tenant %s: %w", k, err)
		}
		out = append(out, tn)
		return nil
	})
	return out, err
}

// Idempotency records the job a submission's idempotency key created:
// a retry with the same key gets that job instead of a new one.
type Idempotency struct {
	Job string `json:"job"`
	// SpecHash is a hash of the submitted spec: a retry with another spec
	// under the same key is refused.
	SpecHash string `json:"spec_hash"`
}

func idemKey(tenant, key string) []byte { return []byte(tenant + "\x00" + key) }

// Idempotency reads the record of tenant's key; ErrNotFound when there is
// none.
func (t *Tx) Idempotency(tenant, key string) (*Idempotency, error) {
	data := t.tx.Bucket(bIdem).Get(idemKey(tenant, key))
	if data == nil {
		return nil, fmt.Errorf("store: idempotency key %q: %w", key, ErrNotFound)
	}
	var r Idempotency
	if err := json.Unmarshal(data, &r); err != nil {
		return nil, fmt.Errorf("store: idempotency key %q: %w", key, err)
	}
	return &r, nil
}

// PutIdempotency records the job tenant's key created.
func (t *Tx) PutIdempotency(tenant, key string, r *Idempotency) error {
	data, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("store: idempotency key %q: %w", key, err)
	}
	return t.tx.Bucket(bIdem).Put(idemKey(tenant, key), data)
}

// DeleteIdempotency forgets tenant's key.
func (t *Tx) DeleteIdempotency(tenant, key string) error {
	return t.tx.Bucket(bIdem).Delete(idemKey(tenant, key))
}

// Meta reads a metadata value (nil when unset).
func (t *Tx) Meta(key string) []byte {
	v := t.tx.Bucket(bMeta).Get([]byte(key))
	return append([]byte(nil), v...)
}

// SetMeta writes a metadata value.
func (t *Tx) SetMeta(key string, value []byte) error {
	return t.tx.Bucket(bMeta).Put([]byte(key), value)
}

// HashToken is the form a token is stored in: hex SHA-256. Tokens are
// random 256-bit values, so a fast unsalted hash is enough.
func HashToken(token string) string {
	h := sha256.Sum256([]byte(token))
	return hex.EncodeToString(h[:])
}

// NewToken returns a fresh random token, "tide_" + 64 hex digits.
func NewToken() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	return "tide_" + hex.EncodeToString(b[:]), nil
}

// PutSample keeps data (one sample of the web console's utilisation
// history, opaque here) under time at, and deletes the samples before
// forget.
func (t *Tx) PutSample(at time.Time, data []byte, forget time.Time) error {
	b := t.tx.Bucket(bSamples)
	if err := b.Put(u64(uint64(at.UnixNano())), data); err != nil {
		return fmt.Errorf("store: sample: %w", err)
	}
	c := b.Cursor()
	cut := uint64(forget.UnixNano())
	for k, _ := c.First(); k != nil && binary.BigEndian.Uint64(k) < cut; k, _ = c.First() {
		if err := c.Delete(); err != nil {
			return fmt.Errorf("store: forgetting a sample: %w", err)
		}
	}
	return nil
}

// Samples calls fn with each sample kept at or after from, oldest first.
// data is valid only during the call.
func (t *Tx) Samples(from time.Time, fn func(data []byte) error) error {
	c := t.tx.Bucket(bSamples).Cursor()
	for k, v := c.Seek(u64(uint64(from.UnixNano()))); k != nil; k, v = c.Next() {
		if err := fn(v); err != nil {
			return err
		}
	}
	return nil
}
