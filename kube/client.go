package kube

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
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

// restClient is the REST client under a typed client, nil when there is
// none (a fake clientset in unit tests).
func restClient(rc rest.Interface) *rest.RESTClient {
	c, _ := rc.(*rest.RESTClient)
	return c
}

// bind posts b, as the typed client's Pods(ns).Bind does, but without
// converting empty CreateOptions to query parameters: that conversion is
// by reflection, for every pod, and cost about a tenth of tide's CPU in a
// drain of 8,000 pods (BenchmarkDrain's profile). The request is the same.
func bind(ctx context.Context, cs kubernetes.Interface, b *corev1.Binding) error {
	if rc := restClient(cs.CoreV1().RESTClient()); rc != nil {
		return rc.Post().Namespace(b.Namespace).Resource("pods").Name(b.Name).SubResource("binding").
			Body(b).Do(ctx).Error()
	}
	return cs.CoreV1().Pods(b.Namespace).Bind(ctx, b, metav1.CreateOptions{})
}

// eventSink writes Events as client-go's events.EventSinkImpl does; it
// creates them without the typed client's conversion of empty options to
// query parameters (see bind), the same request.
type eventSink struct {
	rc    *rest.RESTClient
	typed events.EventSinkImpl
}

func newEventSink(cs kubernetes.Interface) events.EventSink {
	return &eventSink{rc: restClient(cs.EventsV1().RESTClient()), typed: events.EventSinkImpl{Interface: cs.EventsV1()}}
}

// Create implements events.EventSink.
func (s *eventSink) Create(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	if s.rc == nil || ev.Namespace == "" {
		return s.typed.Create(ctx, ev)
	}
	res := &eventsv1.Event{}
	err := s.rc.Post().Namespace(ev.Namespace).Resource("events").Body(ev).Do(ctx).Into(res)
	return res, err
}

// Update implements events.EventSink. client-go's events library (v0.36)
// never calls it: a new Event is created and a repeated one's series is
// patched, which is why deploy/rbac.yaml grants events create and patch
// and not update (ops_test.go's RBAC check compares the calls made).
func (s *eventSink) Update(ctx context.Context, ev *eventsv1.Event) (*eventsv1.Event, error) {
	return s.typed.Update(ctx, ev)
}

// Patch implements events.EventSink.
func (s *eventSink) Patch(ctx context.Context, ev *eventsv1.Event, data []byte) (*eventsv1.Event, error) {
	return s.typed.Patch(ctx, ev, data)
}
