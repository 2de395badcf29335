package kubetest

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	kcmtesting "k8s.io/kubernetes/cmd/kube-controller-manager/app/testing"
)

// startControllers runs kube-controller-manager beside the API server for
// the rest of t, with the controllers that act on what tide schedules:
// garbage collection (a TideJob's workers go with it), node lifecycle
// (NotReady and unreachable taints), taint eviction (NoExecute) and pod
// garbage collection (pods of deleted nodes). Nodes here have no kubelet
// to renew their leases, so the node monitor's grace period is long: a
// node goes NotReady when a test says so, not because nobody heartbeats.
func (e *env) startControllers(t *testing.T) { e.startControllersGrace(t, time.Hour) }

// startControllersGrace is startControllers with the node monitor's grace
// period given: with kwok renewing the nodes' leases it can be short, and a
// node whose kwok stops goes NotReady as one whose kubelet died.
func (e *env) startControllersGrace(t *testing.T, grace time.Duration) {
	t.Helper()
	t.Log("starting kube-controller-manager (garbage collector, node lifecycle, taint eviction, pod GC)")
	e.startKCM(t, "garbage-collector-controller,node-lifecycle-controller,taint-eviction-controller,pod-garbage-collector-controller",
		"--node-monitor-period=1s",
		"--node-monitor-grace-period="+grace.String(),
		"--node-startup-grace-period=1h",
		"--concurrent-gc-syncs=5")
}

// startKCM runs kube-controller-manager with the controllers named (a
// comma-separated list) and more flags, for the rest of t.
func (e *env) startKCM(t *testing.T, controllers string, flags ...string) {
	t.Helper()
	kc := filepath.Join(t.TempDir(), "kubeconfig")
	if err := writeKubeconfig(e.cfg, kc); err != nil {
		t.Fatal(err)
	}
	srv, err := kcmtesting.StartTestServer(t, context.Background(), append([]string{
		"--kubeconfig=" + kc,
		"--leader-elect=false",
		"--secure-port=0",
		"--controllers=" + controllers,
	}, flags...))
	if err != nil {
		t.Fatalf("kube-controller-manager: %v", err)
	}
	t.Cleanup(srv.TearDownFn)
}
