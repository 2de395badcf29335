package kube

import (
	"fmt"

	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// Clients makes the clients a Scheduler uses from cfg, with client-side
// limits of qps requests per second and burst. Built-in objects (pods,
// nodes, bindings) travel as protobuf, which costs the API server and tide
// far less than JSON to encode and decode when thousands of pods are
// listed, watched and bound (the stock kube-scheduler does the same);
// TideJobs, a custom resource, stay JSON. dyn is nil when tideJobs is false.
func Clients(cfg *rest.Config, qps float32, burst int, tideJobs bool) (cs kubernetes.Interface, dyn dynamic.Interface, err error) {
	c := rest.CopyConfig(cfg)
	c.QPS, c.Burst = qps, burst
	c.ContentType = "application/vnd.kubernetes.protobuf"
	c.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	if cs, err = kubernetes.NewForConfig(c); err != nil {
		return nil, nil, fmt.Errorf("kubernetes client: %w", err)
	}
	if tideJobs {
		d := rest.CopyConfig(cfg)
		d.QPS, d.Burst = qps, burst
		if dyn, err = dynamic.NewForConfig(d); err != nil {
			return nil, nil, fmt.Errorf("kubernetes client: %w", err)
		}
	}
	return cs, dyn, nil
}
