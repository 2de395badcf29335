package kube

import (
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
)

func TestValidQueue(t *testing.T) {
	two, neg := 2, -1
	for _, c := range []struct {
		spec   TideQueueSpec
		reason string
		msg    string
	}{
		{TideQueueSpec{GuaranteedGPUs: 8, BorrowLimit: &two, Weight: 3}, "", ""},
		{TideQueueSpec{GuaranteedGPUs: 0}, "", ""},
		{TideQueueSpec{GuaranteedGPUs: -1}, "InvalidSpec", "spec.guaranteedGPUs"},
		{TideQueueSpec{GuaranteedGPUs: 1, BorrowLimit: &neg}, "InvalidSpec", "spec.borrowLimit"},
		{TideQueueSpec{GuaranteedGPUs: 1, Weight: 1001}, "InvalidSpec", "spec.weight"},
		{TideQueueSpec{GuaranteedGPUs: 17}, "Oversubscribed", "17 guaranteed, more than the cluster's 16 GPUs"},
	} {
		reason, msg := validQueue(c.spec, 16)
		if reason != c.reason || !strings.Contains(msg, c.msg) {
			t.Errorf("%+v: %q %q, want %q with %q", c.spec, reason, msg, c.reason, c.msg)
		}
	}
}

func TestElectionDefaults(t *testing.T) {
	cs := &kubernetes.Clientset{}
	for _, c := range []struct {
		el  Election
		err string
	}{
		{Election{Client: cs, Namespace: "ns", Name: "tide"}, ""},
		{Election{Namespace: "ns", Name: "tide"}, "a client is required"},
		{Election{Client: cs, Name: "tide"}, "namespace and name are required"},
		{Election{Client: cs, Namespace: "ns", Name: "tide", LeaseDuration: 5 * time.Second}, "renew deadline 10s must be less than the lease duration 5s"},
		{Election{Client: cs, Namespace: "ns", Name: "tide", RenewDeadline: time.Second}, "retry period 2s must be less than the renew deadline 1s"},
	} {
		err := c.el.defaults()
		if (c.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), c.err)) {
			t.Errorf("%+v: %v, want %q", c.el, err, c.err)
		}
		if err == nil && (c.el.Identity == "" || c.el.LeaseDuration != 15*time.Second) {
			t.Errorf("defaults not filled: %+v", c.el)
		}
	}
}
