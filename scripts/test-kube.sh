#!/bin/sh
# scripts/test-kube.sh runs tide's Kubernetes suite (kubetest/, its own Go
# module): a real kube-apiserver and etcd, built from the Go module proxy
# (k8s.io/kubernetes v1.36.3) and started inside the test process, with
# tide kube scheduling pods against them. It needs only Go and the module
# proxy. The first run compiles the API server (about 7 minutes on 2 cores,
# docs/kubernetes.md); later runs reuse Go's build cache. Without helm on
# PATH (or $TIDE_HELM) the chart's checks build helm from the proxy once
# (a few minutes; TIDE_NO_HELM=1 skips them).
# Extra arguments go to `go test` (for example: -run TestKube/Gang -v).
set -eu
scripts=$(cd "$(dirname "$0")" && pwd)
cd "$scripts/../kubetest"
start=$(date +%s)
echo "kubernetes suite: building the test binary with kube-apiserver and etcd"
echo "  (about 7 minutes on 2 cores the first time, seconds once Go's build cache"
echo "  holds it), then starting them for each test"
"$scripts/gotest.sh" -vet=off -count=1 -timeout 60m "$@" .
echo "kubernetes suite: $(($(date +%s) - start)) s"
