#!/bin/sh
# scripts/test-kube.sh runs tide's Kubernetes suite (kubetest/, its own Go
# module): a real kube-apiserver and etcd, built from the Go module proxy
# (k8s.io/kubernetes v1.36.3) and started inside the test process, with
# tide kube scheduling pods against them. It needs only Go and the module
# proxy. The first run compiles the API server (about 7 minutes on 2 cores,
# docs/kubernetes.md); later runs reuse Go's build cache.
# Extra arguments go to `go test` (for example: -run TestKube/Gang -v).
set -eu
cd "$(dirname "$0")/../kubetest"
start=$(date +%s)
go test -vet=off -count=1 -timeout 30m "$@" .
echo "kubernetes suite: $(($(date +%s) - start)) s"
