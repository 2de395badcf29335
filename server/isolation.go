package server

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tide-sched/tide/localexec"
	"github.com/tide-sched/tide/store"
)

// geteuid is os.Geteuid, replaced by tests that play a server not run as
// root.
var geteuid = os.Geteuid

// Isolation. When tide serve runs as root (and not --single-user), each
// tenant's jobs run as the tenant's Unix user, and the data directory is
// laid out so that a job can reach only what is its own:
//
//	DIR/                   root 0711: no listing
//	DIR/tide.db            root 0600
//	DIR/admin.token        root 0600
//	DIR/jobs/              root 0711
//	DIR/jobs/ID/           root 0711
//	DIR/jobs/ID/output.log root 0600 (the job writes to the descriptor it inherits)
//	DIR/jobs/ID/attempt-N.{pid,exit}  root 0600 (the wrapper writes to descriptors)
//	DIR/jobs/ID/report.jsonl  the tenant's user, 0600
//	DIR/jobs/ID/checkpoint/   the tenant's user, 0700
//	DIR/jobs/ID/work/         the tenant's user, 0700 (the default working directory)
//
// The job cannot rename or replace anything in the root-owned directories,
// so the server (root) never follows a link a job planted. Jobs of one
// tenant share its Unix user, and so can reach each other's directories.

// checkIsolation says whether a server run by euid with tenants tenants
// may start: a server not run as root cannot run each tenant's jobs as its
// own user, so more than one tenant needs singleUser, the operator's
// explicit choice to trust every tenant with the server's user.
func checkIsolation(euid, tenants int, singleUser bool) error {
	if euid == 0 || singleUser || tenants <= 1 {
		return nil
	}
	return fmt.Errorf("tide serve runs as uid %d, not root, so it cannot run each tenant's jobs as the tenant's own Unix user, "+
		"and the data directory has %d tenants: any tenant's job could read the others' jobs and the admin token. "+
		"Run tide serve as root (and give each tenant a Unix user: tide tenant add NAME --user USER), "+
		"or pass --single-user to run every tenant's jobs as uid %d knowingly", euid, tenants, euid)
}

// prepareDataDir sets the modes of the data directory for isolation and
// checks that job users can reach their directories in it. Isolated
// servers only.
func (s *Server) prepareDataDir() error {
	for _, d := range []string{s.cfg.DataDir, s.jobsDir} {
		if err := os.MkdirAll(d, 0o711); err != nil {
			return fmt.Errorf("server: %w", err)
		}
		if err := os.Chmod(d, 0o711); err != nil {
			return fmt.Errorf("server: %w", err)
		}
	}
	for d := filepath.Dir(s.cfg.DataDir); ; d = filepath.Dir(d) {
		fi, err := os.Stat(d)
		if err != nil {
			return fmt.Errorf("server: data directory: %w", err)
		}
		if fi.Mode().Perm()&0o001 == 0 {
			return fmt.Errorf("server: jobs run as their tenants' Unix users must pass through %s to reach their directories in %s, "+
				"but its mode is %04o (others may not enter it): use a data directory whose parents are mode 0711 or 0755, or chmod o+x %s",
				d, s.cfg.DataDir, fi.Mode().Perm(), d)
		}
		if d == filepath.Dir(d) {
			return nil
		}
	}
}

// tenantUser resolves the Unix user a tenant's jobs run as; nil when the
// server does not isolate tenants.
func (s *Server) tenantUser(tenant string) (*localexec.User, error) {
	if !s.isolate {
		return nil, nil
	}
	t := s.tenantByName(tenant)
	if t == nil {
		return nil, fmt.Errorf("tenant %s no longer exists", tenant)
	}
	if t.User == "" {
		return nil, fmt.Errorf("tenant %s has no Unix user to run its jobs as (tide serve runs as root): "+
			"the admin sets one with 'tide tenant set %s --user USER'", tenant, tenant)
	}
	u, err := localexec.LookupUser(t.User)
	if err != nil {
		return nil, fmt.Errorf("tenant %s: %w", tenant, err)
	}
	return u, nil
}

// tenantByName finds a tenant; nil when there is none.
func (s *Server) tenantByName(name string) *store.Tenant {
	s.tmu.RLock()
	defer s.tmu.RUnlock()
	return s.tenants[name]
}

// putTenant makes t the tenant of its name in memory, its token (if it
// has one) the only one of that name. Under tmu (or before serving).
func (s *Server) putTenant(t *store.Tenant) {
	s.dropTenant(t.Name)
	s.tenants[t.Name] = t
	if t.TokenHash != "" {
		s.tokens[t.TokenHash] = t
	}
}

// dropTenant forgets a tenant and its token in memory. Under tmu.
func (s *Server) dropTenant(name string) {
	if old := s.tenants[name]; old != nil {
		delete(s.tokens, old.TokenHash)
		delete(s.tenants, name)
	}
}

// prepareJobDirs creates a job's directories, owned by u when the server
// isolates tenants (see above), and returns its default working directory.
func (s *Server) prepareJobDirs(id string, u *localexec.User) (string, error) {
	jd := s.jobDir(id)
	if err := os.MkdirAll(jd, 0o711); err != nil {
		return "", fmt.Errorf("job directory: %w", err)
	}
	if u == nil {
		return jd, nil
	}
	if err := os.Chmod(jd, 0o711); err != nil {
		return "", fmt.Errorf("job directory: %w", err)
	}
	work := filepath.Join(jd, "work")
	for _, d := range []string{work, s.checkpointDir(id)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			return "", fmt.Errorf("job directory: %w", err)
		}
		if err := os.Chown(d, int(u.UID), int(u.GID)); err != nil {
			return "", fmt.Errorf("job directory: %w", err)
		}
		if err := os.Chmod(d, 0o700); err != nil {
			return "", fmt.Errorf("job directory: %w", err)
		}
	}
	f, err := os.OpenFile(s.reportFile(id), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		return "", fmt.Errorf("report file: %w", err)
	}
	defer f.Close()
	if err := f.Chown(int(u.UID), int(u.GID)); err != nil {
		return "", fmt.Errorf("report file: %w", err)
	}
	return work, nil
}
