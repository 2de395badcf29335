package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// selfSigned writes a self-signed certificate for 127.0.0.1 and its key.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "tide test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}, BasicConstraintsValid: true, IsCA: true}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kd, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kd}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestServeTLS: tide serve over HTTPS; the CLI verifies the certificate
// (trusted with --ca-cert, refused without), and a non-loopback --listen
// without TLS is refused unless --insecure.
func TestServeTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and runs tide serve")
	}
	bin, _ := binaries(t)
	root := t.TempDir()
	cert, key := selfSigned(t, root)
	dir := filepath.Join(root, "data")
	s := serve(t, bin, dir, "--tls-cert", cert, "--tls-key", key)
	if !strings.HasPrefix(s.url, "https://") {
		t.Fatalf("served on %s", s.url)
	}
	admin := strings.TrimSpace(readFile(filepath.Join(dir, "admin.token")))
	if out := cli(t, s, admin, "cluster", "--ca-cert", cert); !strings.Contains(out, "GPUs allocated") {
		t.Errorf("cluster over TLS:\n%s", out)
	}
	// Tenant management through the CLI.
	ca := []string{"--ca-cert", cert}
	cli(t, s, admin, append([]string{"tenant", "add", "alice", "--max-gpus", "2"}, ca...)...)
	cli(t, s, admin, append([]string{"tenant", "set", "alice", "--max-queued", "3"}, ca...)...)
	list := cli(t, s, admin, append([]string{"tenant", "list"}, ca...)...)
	if line := lineWith(list, "alice"); !strings.Contains(line, " 2 ") || !strings.Contains(line, " 3 ") || !strings.Contains(line, "valid") {
		t.Errorf("tenant list:\n%s", list)
	}
	if out := cli(t, s, admin, append([]string{"tenant", "rotate", "alice"}, ca...)...); !strings.Contains(out, "tide_") {
		t.Errorf("rotate:\n%s", out)
	}
	cli(t, s, admin, append([]string{"tenant", "revoke", "alice"}, ca...)...)
	if line := lineWith(cli(t, s, admin, append([]string{"tenant", "list"}, ca...)...), "alice"); !strings.Contains(line, "revoked") {
		t.Errorf("after revoke: %s", line)
	}
	if out := cli(t, s, admin, append([]string{"tenant", "delete", "alice"}, ca...)...); !strings.Contains(out, "deleted") {
		t.Errorf("delete:\n%s", out)
	}
	if code, _, errs := tide(t, "tenant", "--server", s.url, "--token", admin, "--ca-cert", cert, "set", "bob"); code != 2 || !strings.Contains(errs, "nothing to change") {
		t.Errorf("tenant set without changes: exit %d %s", code, errs)
	}
	code, _, errs := tide(t, "cluster", "--server", s.url, "--token", admin)
	if code == 0 || !strings.Contains(errs, "certificate") {
		t.Errorf("an unverified certificate was accepted: exit %d %s", code, errs)
	}

	for _, tc := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--listen", "0.0.0.0:0"}, false},
		{[]string{"--listen", ":0"}, false},
		{[]string{"--listen", "127.0.0.1:0"}, true},
		{[]string{"--listen", "[::1]:0"}, true},
		{[]string{"--listen", "localhost:0"}, true},
		{[]string{"--listen", "0.0.0.0:0", "--insecure"}, true},
		{[]string{"--listen", "0.0.0.0:0", "--tls-cert", cert}, true},
	} {
		_, tls := selfSignedFlag(tc.args)
		err := checkListen(tc.args[1], tls, len(tc.args) == 3 && tc.args[2] == "--insecure")
		if (err == nil) != tc.ok {
			t.Errorf("%v: %v", tc.args, err)
		}
		if err != nil && !strings.Contains(err.Error(), "--insecure") {
			t.Errorf("%v: the error does not name the way out: %v", tc.args, err)
		}
	}
	if code, _, errs := runBin(t, bin, "serve", "--listen", "0.0.0.0:0", "--gpus", "fake:1", "--data-dir", filepath.Join(root, "d2")); code != 2 || !strings.Contains(errs, "without TLS") {
		t.Errorf("tide serve on 0.0.0.0 without TLS: exit %d %s", code, errs)
	}
}

func selfSignedFlag(args []string) (string, bool) {
	for i, a := range args {
		if a == "--tls-cert" && i+1 < len(args) {
			return args[i+1], true
		}
	}
	return "", false
}
