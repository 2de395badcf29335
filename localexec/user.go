package localexec

import (
	"errors"
	"fmt"
	"os/user"
	"strconv"
	"strings"
)

// User is the Unix identity a job runs as when tide serve runs as root:
// its tenant's user, as Slurm runs jobs as the submitting user.
type User struct {
	Name     string // login name; "" for a numeric UID without a passwd entry
	UID, GID uint32
	Groups   []uint32 // supplementary groups (the primary one included)
	Home     string   // "" when unknown
}

// LookupUser resolves a tenant's Unix user: a login name ("alice"), or a
// numeric "UID" or "UID:GID" (which need no passwd entry; the GID defaults
// to the passwd entry's, else to the UID). Root (UID 0) is refused: a job
// run as root is not isolated from anything.
func LookupUser(spec string) (*User, error) {
	if spec == "" {
		return nil, errors.New("no Unix user given")
	}
	uidStr, gidStr, hasGID := strings.Cut(spec, ":")
	var u *User
	if uid, err := strconv.ParseUint(uidStr, 10, 32); err == nil {
		u = &User{UID: uint32(uid), GID: uint32(uid)}
		if pw, err := user.LookupId(uidStr); err == nil {
			u.Name, u.Home = pw.Username, pw.HomeDir
			if g, err := strconv.ParseUint(pw.Gid, 10, 32); err == nil {
				u.GID = uint32(g)
			}
			u.Groups = groups(pw)
		}
		if hasGID {
			gid, err := strconv.ParseUint(gidStr, 10, 32)
			if err != nil {
				return nil, fmt.Errorf("unix user %q: the group %q is not a number", spec, gidStr)
			}
			u.GID = uint32(gid)
		}
	} else {
		if hasGID {
			return nil, fmt.Errorf("unix user %q: want NAME, UID or UID:GID", spec)
		}
		pw, err := user.Lookup(spec)
		if err != nil {
			return nil, fmt.Errorf("unix user %q: %w", spec, err)
		}
		uid, err1 := strconv.ParseUint(pw.Uid, 10, 32)
		gid, err2 := strconv.ParseUint(pw.Gid, 10, 32)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("unix user %q: non-numeric uid %q or gid %q", spec, pw.Uid, pw.Gid)
		}
		u = &User{Name: pw.Username, UID: uint32(uid), GID: uint32(gid), Home: pw.HomeDir, Groups: groups(pw)}
	}
	if u.UID == 0 {
		return nil, fmt.Errorf("unix user %q is root: jobs run as root are not isolated", spec)
	}
	if len(u.Groups) == 0 {
		u.Groups = []uint32{u.GID}
	}
	return u, nil
}

func groups(pw *user.User) []uint32 {
	ids, err := pw.GroupIds()
	if err != nil {
		return nil
	}
	var out []uint32
	for _, id := range ids {
		if g, err := strconv.ParseUint(id, 10, 32); err == nil {
			out = append(out, uint32(g))
		}
	}
	return out
}

// String is the user as tide shows it: "alice (uid 1001)".
func (u *User) String() string {
	if u.Name == "" {
		return fmt.Sprintf("uid %d", u.UID)
	}
	return fmt.Sprintf("%s (uid %d)", u.Name, u.UID)
}
