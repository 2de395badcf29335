package console

import (
	"bufio"
	"crypto/sha256"
	"crypto/subtle"
	"fmt"
	"os"
	"strings"
)

// Tokens authenticates API tokens read from a file, for executors without
// tenants of their own (tide kube). The file holds one "TENANT TOKEN" a
// line; the tenant "admin" is the admin; blank lines and lines starting
// with # are skipped. Only the tokens' hashes are kept.
type Tokens struct {
	byHash map[[32]byte]Principal
}

// LoadTokens reads a token file; errors name the file and line.
func LoadTokens(path string) (*Tokens, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	defer f.Close()
	t := &Tokens{byHash: map[[32]byte]Principal{}}
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fields := strings.Fields(line)
		if len(fields) != 2 {
			return nil, fmt.Errorf("%s:%d: want TENANT TOKEN, got %d fields", path, n, len(fields))
		}
		if len(fields[1]) < 16 {
			return nil, fmt.Errorf("%s:%d: tenant %s: want a token of at least 16 characters", path, n, fields[0])
		}
		h := sha256.Sum256([]byte(fields[1]))
		if _, dup := t.byHash[h]; dup {
			return nil, fmt.Errorf("%s:%d: this token is given twice", path, n)
		}
		t.byHash[h] = Principal{Tenant: fields[0], Admin: fields[0] == "admin"}
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file %s: %w", path, err)
	}
	if len(t.byHash) == 0 {
		return nil, fmt.Errorf("token file %s: no tokens (want TENANT TOKEN lines)", path)
	}
	return t, nil
}

// Auth checks a token.
func (t *Tokens) Auth(token string) (Principal, bool) {
	h := sha256.Sum256([]byte(token))
	for k, p := range t.byHash { // constant time per entry
		if subtle.ConstantTimeCompare(k[:], h[:]) == 1 {
			return p, true
		}
	}
	return Principal{}, false
}
