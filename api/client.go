package api

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
)

// DefaultServer is where clients look for tide serve by default.
const DefaultServer = "http://127.0.0.1:7450"

// Client calls a tide server. The zero value is not usable: use NewClient.
type Client struct {
	base  string
	token string
	http  *http.Client
}

// NewClient returns a client for server (a URL, or host:port for http) that
// authenticates with token.
func NewClient(server, token string) *Client {
	if server == "" {
		server = DefaultServer
	}
	if !strings.Contains(server, "://") {
		server = "http://" + server
	}
	return &Client{base: strings.TrimRight(server, "/"), token: token,
		http: &http.Client{Timeout: 60 * time.Second}}
}

// Server is the base URL the client calls.
func (c *Client) Server() string { return c.base }

func (c *Client) request(ctx context.Context, method, path string, body any) (*http.Response, error) {
	return c.requestHeader(ctx, method, path, body, nil)
}

func (c *Client) requestHeader(ctx context.Context, method, path string, body any, header http.Header) (*http.Response, error) {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return nil, fmt.Errorf("%s %s: encoding the request: %w", method, path, err)
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", method, path, err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	for k, v := range header {
		req.Header[k] = v
	}
	resp, err := c.http.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) && ctx.Err() == nil {
			// Say which server, once: url.Error repeats the method and URL.
			return nil, fmt.Errorf("cannot reach tide serve at %s (%s %s): %w", c.base, method, path, ue.Err)
		}
		return nil, fmt.Errorf("%s %s: %w", method, c.base+path, err)
	}
	if resp.StatusCode >= 300 {
		defer resp.Body.Close()
		return nil, readError(resp)
	}
	return resp, nil
}

func readError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<16))
	e := &Error{}
	if err := json.Unmarshal(data, e); err != nil || e.Message == "" {
		e.Message = strings.TrimSpace(string(data))
		if e.Message == "" {
			e.Message = http.StatusText(resp.StatusCode)
		}
	}
	e.Status = resp.StatusCode
	return e
}

func (c *Client) do(ctx context.Context, method, path string, body, out any) error {
	return c.doHeader(ctx, method, path, body, out, nil)
}

func (c *Client) doHeader(ctx context.Context, method, path string, body, out any, header http.Header) error {
	resp, err := c.requestHeader(ctx, method, path, body, header)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if out == nil {
		_, err = io.Copy(io.Discard, resp.Body)
		return err
	}
	if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
		return fmt.Errorf("%s %s: decoding the response: %w", method, path, err)
	}
	return nil
}

// Submit submits a job.
func (c *Client) Submit(ctx context.Context, spec *JobSpec) (*Job, error) {
	var j Job
	return &j, c.do(ctx, http.MethodPost, "/v1/jobs", spec, &j)
}

// SubmitIdempotent submits a job under an idempotency key: calling it
// again with the same key and spec (after a dropped connection, say)
// returns the job the first call created.
func (c *Client) SubmitIdempotent(ctx context.Context, spec *JobSpec, key string) (*Job, error) {
	var j Job
	h := http.Header{}
	h.Set(IdempotencyHeader, key)
	return &j, c.doHeader(ctx, http.MethodPost, "/v1/jobs", spec, &j, h)
}

// Jobs lists the jobs the caller may see, only those in state when given.
func (c *Client) Jobs(ctx context.Context, state string) ([]Job, error) {
	path := "/v1/jobs"
	if state != "" {
		path += "?state=" + url.QueryEscape(state)
	}
	var l JobList
	return l.Jobs, c.do(ctx, http.MethodGet, path, nil, &l)
}

// ListJobs lists jobs with GET /v1/jobs' query parameters (state,
// tenant, limit, after); Next in the result gets the following page.
func (c *Client) ListJobs(ctx context.Context, query url.Values) (*JobList, error) {
	path := "/v1/jobs"
	if len(query) > 0 {
		path += "?" + query.Encode()
	}
	var l JobList
	return &l, c.do(ctx, http.MethodGet, path, nil, &l)
}

// Hold keeps a waiting job from starting; Release lets it start.
func (c *Client) Hold(ctx context.Context, id string) (*Job, error) {
	var j Job
	return &j, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/hold", nil, &j)
}

// Release lets a held job start.
func (c *Client) Release(ctx context.Context, id string) (*Job, error) {
	var j Job
	return &j, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/release", nil, &j)
}

// Requeue puts an ended or running job back in the queue as a new run
// (a running one is stopped first); hold requeues it held.
func (c *Client) Requeue(ctx context.Context, id string, hold bool) (*Job, error) {
	var j Job
	return &j, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/requeue", &RequeueRequest{Hold: hold}, &j)
}

// Usage returns the GPU-hours per job over [from, to) (zero times: from
// the beginning, until now).
func (c *Client) Usage(ctx context.Context, from, to time.Time) (*Usage, error) {
	q := url.Values{}
	if !from.IsZero() {
		q.Set("from", from.UTC().Format(time.RFC3339))
	}
	if !to.IsZero() {
		q.Set("to", to.UTC().Format(time.RFC3339))
	}
	path := "/v1/usage"
	if len(q) > 0 {
		path += "?" + q.Encode()
	}
	var u Usage
	return &u, c.do(ctx, http.MethodGet, path, nil, &u)
}

// Job returns one job.
func (c *Client) Job(ctx context.Context, id string) (*Job, error) {
	var j Job
	return &j, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id), nil, &j)
}

// Events returns a job's event log.
func (c *Client) Events(ctx context.Context, id string) ([]Event, error) {
	var out struct {
		Events []Event `json:"events"`
	}
	return out.Events, c.do(ctx, http.MethodGet, "/v1/jobs/"+url.PathEscape(id)+"/events", nil, &out)
}

// Cancel cancels a job; its process, if any, is stopped.
func (c *Client) Cancel(ctx context.Context, id string) (*Job, error) {
	var j Job
	return &j, c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/cancel", nil, &j)
}

// Logs returns a job's output from byte offset on, the offset to ask for
// next, and the job's state.
func (c *Client) Logs(ctx context.Context, id string, offset int64) ([]byte, int64, string, error) {
	path := "/v1/jobs/" + url.PathEscape(id) + "/logs?offset=" + strconv.FormatInt(offset, 10)
	resp, err := c.request(ctx, http.MethodGet, path, nil)
	if err != nil {
		return nil, offset, "", err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, offset, "", fmt.Errorf("GET %s: %w", path, err)
	}
	next, err := strconv.ParseInt(resp.Header.Get("X-Tide-Next-Offset"), 10, 64)
	if err != nil {
		next = offset + int64(len(data))
	}
	return data, next, resp.Header.Get("X-Tide-Job-State"), nil
}

// Cluster describes the server's GPUs and queue.
func (c *Client) Cluster(ctx context.Context) (*Cluster, error) {
	var cl Cluster
	return &cl, c.do(ctx, http.MethodGet, "/v1/cluster", nil, &cl)
}

// CreateTenant creates a tenant (admin only); the token is in the result.
func (c *Client) CreateTenant(ctx context.Context, name string) (*Tenant, error) {
	var t Tenant
	return &t, c.do(ctx, http.MethodPost, "/v1/tenants", NewTenant{Name: name}, &t)
}

// CreateTenantUser creates a tenant whose jobs run as Unix user user
// (admin only; see NewTenant.User).
func (c *Client) CreateTenantUser(ctx context.Context, name, user string) (*Tenant, error) {
	var t Tenant
	return &t, c.do(ctx, http.MethodPost, "/v1/tenants", NewTenant{Name: name, User: user}, &t)
}

// CreateTenantWith creates a tenant from a full request (admin only).
func (c *Client) CreateTenantWith(ctx context.Context, req *NewTenant) (*Tenant, error) {
	var t Tenant
	return &t, c.do(ctx, http.MethodPost, "/v1/tenants", req, &t)
}

// UpdateTenant changes a tenant's Unix user or limits (admin only).
func (c *Client) UpdateTenant(ctx context.Context, name string, u *TenantUpdate) (*Tenant, error) {
	var t Tenant
	return &t, c.do(ctx, http.MethodPatch, "/v1/tenants/"+url.PathEscape(name), u, &t)
}

// RotateToken gives a tenant a new token (in the result); the old one
// stops working (admin only).
func (c *Client) RotateToken(ctx context.Context, name string) (*Tenant, error) {
	var t Tenant
	return &t, c.do(ctx, http.MethodPost, "/v1/tenants/"+url.PathEscape(name)+"/token", nil, &t)
}

// RevokeToken leaves a tenant without a valid token (admin only).
func (c *Client) RevokeToken(ctx context.Context, name string) (*Tenant, error) {
	var t Tenant
	return &t, c.do(ctx, http.MethodDelete, "/v1/tenants/"+url.PathEscape(name)+"/token", nil, &t)
}

// DeleteTenant deletes a tenant; with cancelJobs its unfinished jobs are
// cancelled (otherwise they make it fail). It returns the cancelled jobs.
func (c *Client) DeleteTenant(ctx context.Context, name string, cancelJobs bool) ([]string, error) {
	var out struct {
		Cancelled []string `json:"cancelled"`
	}
	return out.Cancelled, c.do(ctx, http.MethodDelete, "/v1/tenants/"+url.PathEscape(name)+"?cancel_jobs="+strconv.FormatBool(cancelJobs), nil, &out)
}

// Tenants lists the tenants (admin only).
func (c *Client) Tenants(ctx context.Context) ([]Tenant, error) {
	var out struct {
		Tenants []Tenant `json:"tenants"`
	}
	return out.Tenants, c.do(ctx, http.MethodGet, "/v1/tenants", nil, &out)
}

// Report sends a job's progress report (the client's token is the job's
// $TIDE_REPORT_TOKEN, or its tenant's).
func (c *Client) Report(ctx context.Context, id string, r *Report) error {
	return c.do(ctx, http.MethodPost, "/v1/jobs/"+url.PathEscape(id)+"/report", r, nil)
}

// TrustCA makes the client verify the server's certificate against the
// PEM certificates in pem (a private CA, or a self-signed server
// certificate) instead of the system's roots.
func (c *Client) TrustCA(pem []byte) error {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return errors.New("no PEM certificate found")
	}
	c.http.Transport = &http.Transport{Proxy: http.ProxyFromEnvironment,
		TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}}
	return nil
}

// SetTransport makes the client use rt (to share connections between
// clients, say).
func (c *Client) SetTransport(rt http.RoundTripper) { c.http.Transport = rt }
