package kubetest

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	psapi "k8s.io/pod-security-admission/api"
	pspolicy "k8s.io/pod-security-admission/policy"
	"sigs.k8s.io/yaml"

	"github.com/tide-sched/tide/kube"
)

// callLog records the API calls tide's clients make: "group resource[/sub]
// verb" (group "core" for the core API), and the namespaces of each.
type callLog struct {
	mu    sync.Mutex
	calls map[string]sets.Set[string]
}

// wrap makes cfg's clients record their calls in l.
func (l *callLog) wrap(cfg *rest.Config) {
	parse := &request.RequestInfoFactory{APIPrefixes: sets.NewString("api", "apis"), GrouplessAPIPrefixes: sets.NewString("api")}
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if info, err := parse.NewRequestInfo(req); err == nil && info.IsResourceRequest {
				l.add(info.APIGroup, info.Resource, info.Subresource, info.Verb, info.Namespace)
			}
			return rt.RoundTrip(req)
		})
	})
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

func (l *callLog) add(group, res, sub, verb, ns string) {
	if group == "" {
		group = "core"
	}
	if sub != "" {
		res += "/" + sub
	}
	key := group + " " + res + " " + verb
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.calls == nil {
		l.calls = map[string]sets.Set[string]{}
	}
	if l.calls[key] == nil {
		l.calls[key] = sets.New[string]()
	}
	l.calls[key].Insert(ns)
}

// reset forgets the calls so far.
func (l *callLog) reset() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.calls = nil
}

func (l *callLog) snapshot() map[string]sets.Set[string] {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]sets.Set[string]{}
	for k, v := range l.calls {
		out[k] = v.Clone()
	}
	return out
}

// testElect: two schedulers under leader election on one Lease, in this
// process and as tide's service account: one leads and binds, the other
// stands by, both ready; when the leader stops (releasing the Lease) the
// standby takes over and binds what comes next.
func testElect(t *testing.T, e *env) {
	s := e.scenario(t, "tide-elect", "elect")
	s.node("elect-0", 4, "A100")
	type replica struct {
		sch  *kube.Scheduler
		stop context.CancelFunc
		done chan error
	}
	start := func(id string) *replica {
		sch, err := kube.New(kube.Config{Client: e.tideCS, Dynamic: e.tideDyn, SchedulerName: s.sched,
			Round: 200 * time.Millisecond, Log: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{sch: sch, stop: cancel, done: make(chan error, 1)}
		go func() {
			r.done <- sch.RunElected(ctx, kube.Election{Client: e.tideCS, Namespace: "tide-system", Name: s.sched, Identity: id,
				LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond})
		}()
		t.Cleanup(func() { cancel(); <-r.done })
		return r
	}
	reps := map[string]*replica{"a": start("a"), "b": start("b")}
	ready := func(r *replica) string {
		rec := httptest.NewRecorder()
		r.sch.Handler(0).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/readyz", nil))
		return fmt.Sprintf("%d %s", rec.Code, strings.TrimSpace(rec.Body.String()))
	}
	holder := func() string {
		l, err := e.cs.CoordinationV1().Leases("tide-system").Get(context.Background(), s.sched, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	s.pod("elect", "first", 1)
	eventually(t, 30*time.Second, func() (bool, string) {
		return s.pods("elect")["first"].Spec.NodeName != "" && holder() != "", "first pod not bound, lease holder " + holder()
	})
	lead := holder()
	other := map[string]string{"a": "b", "b": "a"}[lead]
	eventually(t, 10*time.Second, func() (bool, string) {
		l, o := ready(reps[lead]), ready(reps[other])
		return l == "200 ok: leading" && o == "200 ok: standing by", fmt.Sprintf("leader /readyz %q, standby %q", l, o)
	})
	if st := reps[other].sch.Stats(); st.Rounds != 0 || st.Bound != 0 {
		t.Errorf("standby ran %d rounds and bound %d pods; want none", st.Rounds, st.Bound)
	}
	reps[lead].stop()
	if err := <-reps[lead].done; err != nil {
		t.Errorf("leader stopped with %v, want nil (its context ended)", err)
	}
	reps[lead].done <- nil // for the cleanup
	s.pod("elect", "second", 1)
	eventually(t, 30*time.Second, func() (bool, string) {
		return s.pods("elect")["second"].Spec.NodeName != "", fmt.Sprintf("second pod not bound; lease holder %q", holder())
	})
	if h := holder(); h != other {
		t.Errorf("lease held by %q after the leader stopped, want %q", h, other)
	}
}

// testRBAC: the rules of deploy/rbac.yaml are exactly the calls tide's
// clients made in the scenarios before it (run it last): every call
// allowed (RBAC enforced that), and every verb granted used. Pods are
// created only in namespaces bound to tide-workers.
func testRBAC(t *testing.T, e *env) {
	data, err := os.ReadFile(filepath.Join("..", "deploy", "rbac.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	granted := map[string]string{} // key -> role
	for _, doc := range strings.Split(string(data), "\n---") {
		var r rbacv1.ClusterRole // a Role has the same rules
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatal(err)
		}
		if r.Kind != "ClusterRole" && r.Kind != "Role" {
			continue
		}
		for _, rule := range r.Rules {
			for _, g := range rule.APIGroups {
				if g == "" {
					g = "core"
				}
				for _, res := range rule.Resources {
					for _, v := range rule.Verbs {
						granted[g+" "+res+" "+v] = r.Kind + " " + r.Name
					}
				}
			}
		}
	}
	used := e.calls.snapshot()
	// Informers list through a watch (WatchList, sendInitialEvents) where
	// the API server supports it and fall back on list where it does not:
	// list is needed wherever watch is used.
	for k := range used {
		if res, ok := strings.CutSuffix(k, " watch"); ok && used[res+" list"] == nil {
			used[res+" list"] = sets.New[string]()
		}
	}
	// client-go's events library patches an event's series when the same
	// event recurs within its cache window, which the short scenarios
	// need not reach: patch is needed wherever events are created.
	if ns, ok := used["events.k8s.io events create"]; ok && used["events.k8s.io events patch"] == nil {
		used["events.k8s.io events patch"] = ns.Clone()
	}
	var unused, missing []string
	for k, role := range granted {
		if used[k] == nil {
			unused = append(unused, k+" ("+role+")")
		}
	}
	for k, ns := range used {
		if _, ok := granted[k]; !ok {
			missing = append(missing, fmt.Sprintf("%s in %v", k, sets.List(ns)))
		}
	}
	sort.Strings(unused)
	sort.Strings(missing)
	if len(unused) > 0 {
		t.Errorf("deploy/rbac.yaml grants verbs tide did not use in the scenarios (drop them, or cover them in a scenario): %v", unused)
	}
	if len(missing) > 0 {
		t.Errorf("tide made calls deploy/rbac.yaml does not grant: %v", missing)
	}
	if ns := used["core pods create"]; ns.Has("") {
		t.Errorf("pods created cluster-wide, want only in TideJob namespaces: %v", sets.List(ns))
	}
	t.Logf("calls tide made: %d kinds; pods created in %v", len(used), sets.List(used["core pods create"]))
}

// manifests lists the YAML files of deploy/ and the chart rendered with
// each of chartRenders (when there is helm, see helmBinary).
func manifests(t *testing.T) map[string][]byte {
	files, err := filepath.Glob(filepath.Join("..", "deploy", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		out[f] = data
	}
	for name := range chartRenders {
		if data, ok := renderChart(t, name); ok {
			out["helm template deploy/chart ("+name+")"] = data
		}
	}
	return out
}

// testManifests: every manifest under deploy/ (and the chart, rendered)
// is accepted by this API server with a server-side dry run and no
// warning, in dependency order (CRDs and namespaces first); every pod
// template in them passes Pod Security "restricted".
func testManifests(t *testing.T, e *env) {
	eval, err := pspolicy.NewEvaluator(pspolicy.DefaultChecks(), nil)
	if err != nil {
		t.Fatal(err)
	}
	restricted := psapi.LevelVersion{Level: psapi.LevelRestricted, Version: psapi.LatestVersion()}
	for file, data := range manifests(t) {
		var objs []*unstructured.Unstructured
		for _, doc := range strings.Split(string(data), "\n---") {
			obj := map[string]any{}
			if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
				t.Fatalf("%s: %v", file, err)
			}
			if len(obj) > 0 {
				objs = append(objs, &unstructured.Unstructured{Object: obj})
			}
		}
		for _, u := range objs {
			// A chart's namespaces are the operator's (TideJob namespaces):
			// they exist before it is installed.
			if ns := u.GetNamespace(); ns != "" && ns != "tide-system" {
				_, err := e.cs.CoreV1().Namespaces().Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{})
				if err != nil && !apierrors.IsAlreadyExists(err) {
					t.Fatal(err)
				}
			}
			if err := e.dryRun(u); err != nil {
				t.Errorf("%s: %s %s: %v", file, u.GetKind(), u.GetName(), err)
			}
			if u.GetKind() != "Deployment" {
				continue
			}
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &d); err != nil {
				t.Fatal(err)
			}
			for _, r := range eval.EvaluatePod(restricted, &d.Spec.Template.ObjectMeta, &d.Spec.Template.Spec) {
				if !r.Allowed {
					t.Errorf("%s: Deployment %s: Pod Security restricted: %s: %s", file, d.Name, r.ForbiddenReason, r.ForbiddenDetail)
				}
			}
			if c := d.Spec.Template.Spec.Containers; len(c) == 0 || c[0].LivenessProbe == nil || c[0].ReadinessProbe == nil ||
				c[0].Resources.Requests.Cpu().IsZero() || c[0].Resources.Limits.Memory().IsZero() || d.Spec.Template.Spec.PriorityClassName == "" {
				t.Errorf("%s: Deployment %s: want probes, CPU requests, memory limits and a priority class", file, d.Name)
			}
		}
	}
}

// dryRun creates u with a server-side dry run (namespaces it names exist
// or are dry-run too, so it needs nothing created first) and fails on the
// API server's warnings too.
func (e *env) dryRun(u *unstructured.Unstructured) error {
	cfg := rest.CopyConfig(e.cfg)
	var warnings []string
	var mu sync.Mutex
	cfg.WarningHandler = warningFunc(func(msg string) {
		mu.Lock()
		warnings = append(warnings, msg)
		mu.Unlock()
	})
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return err
	}
	res, namespaced, err := e.resourceOf(u)
	if err != nil {
		return err
	}
	var ri dynamic.ResourceInterface = dyn.Resource(res)
	if namespaced {
		ns := u.GetNamespace()
		if ns == "" {
			ns = "default"
		}
		ri = dyn.Resource(res).Namespace(ns)
	}
	opts := metav1.ApplyOptions{FieldManager: "kubetest", Force: true, DryRun: []string{metav1.DryRunAll}}
	if _, err := ri.Apply(context.Background(), u.GetName(), u, opts); err != nil {
		return err
	}
	if len(warnings) > 0 {
		return fmt.Errorf("warnings: %v", warnings)
	}
	return nil
}

type warningFunc func(string)

func (f warningFunc) HandleWarningHeader(code int, agent, msg string) {
	if code == 299 {
		f(msg)
	}
}

// resourceOf finds u's resource and whether it is namespaced, through
// the API server's discovery (a CRD installed since is found too).
func (e *env) resourceOf(u *unstructured.Unstructured) (schema.GroupVersionResource, bool, error) {
	dc, err := discovery.NewDiscoveryClientForConfig(e.cfg)
	if err != nil {
		return schema.GroupVersionResource{}, false, err
	}
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(dc))
	gvk := u.GroupVersionKind()
	m, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return schema.GroupVersionResource{}, false, fmt.Errorf("%s: %w", gvk, err)
	}
	return m.Resource, m.Scope.Name() == meta.RESTScopeNameNamespace, nil
}

// helmVersion is the helm built from the module proxy when neither
// $TIDE_HELM nor PATH has one.
const helmVersion = "v3.22.0"

var helmOnce struct {
	sync.Once
	path, why string
}

// helmBinary is helm from $TIDE_HELM, else PATH, else built once with `go
// install helm.sh/helm/v3/cmd/helm@helmVersion` into the user's cache
// directory (a few minutes the first time; TIDE_NO_HELM=1 skips it). It
// returns "" and why when there is none.
func helmBinary() (string, string) {
	helmOnce.Do(func() {
		if h := os.Getenv("TIDE_HELM"); h != "" {
			helmOnce.path = h
			return
		}
		if h, err := exec.LookPath("helm"); err == nil {
			helmOnce.path = h
			return
		}
		if os.Getenv("TIDE_NO_HELM") == "1" {
			helmOnce.why = "helm not on PATH or in $TIDE_HELM, and TIDE_NO_HELM=1"
			return
		}
		cache, err := os.UserCacheDir()
		if err != nil {
			helmOnce.why = fmt.Sprintf("no helm on PATH or in $TIDE_HELM, and no cache directory to build it in: %v", err)
			return
		}
		dir := filepath.Join(cache, "tide-kubetest", "helm-"+helmVersion)
		bin := filepath.Join(dir, "helm")
		if _, err := os.Stat(bin); err == nil {
			helmOnce.path = bin
			return
		}
		cmd := exec.Command("go", "install", "helm.sh/helm/v3/cmd/helm@"+helmVersion)
		cmd.Dir = os.TempDir() // outside this module: its go.mod does not apply
		cmd.Env = append(os.Environ(), "GOBIN="+dir, "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			helmOnce.why = fmt.Sprintf("no helm on PATH or in $TIDE_HELM, and go install helm.sh/helm/v3/cmd/helm@%s failed: %v\n%s", helmVersion, err, out)
			return
		}
		helmOnce.path = bin
	})
	return helmOnce.path, helmOnce.why
}

// chartRenders are the value sets the chart is rendered with: its
// defaults (which must equal the plain manifests) and one of each kind
// of change an operator makes.
var chartRenders = map[string][]string{
	"defaults": nil,
	"one replica, quotas, two TideJob namespaces, extra args": {"--set", "replicas=1", "--set", "quota=team-a=16\\,team-b=8",
		"--set", "tideJobNamespaces={team-a,team-b}", "--set", "extraArgs={--fill-idle}", "--set", "priorityClass.create=false",
		"--set", "tolerations[0].key=dedicated,tolerations[0].operator=Exists"},
}

// renderChart runs `helm lint --strict` and `helm template` on
// deploy/chart with the values of chartRenders[name]; ok is false (and
// the test says why) without helm.
func renderChart(t *testing.T, name string) (data []byte, ok bool) {
	h, why := helmBinary()
	if h == "" {
		t.Logf("the chart is not rendered: %s", why)
		return nil, false
	}
	chart := filepath.Join("..", "deploy", "chart")
	args := chartRenders[name]
	if out, err := exec.Command(h, append([]string{"lint", "--strict", chart}, args...)...).CombinedOutput(); err != nil {
		t.Errorf("helm lint (%s): %v\n%s", name, err, out)
	}
	cmd := exec.Command(h, append([]string{"template", "tide", chart, "--namespace", "tide-system", "--include-crds"}, args...)...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("helm template (%s): %v\n%s", name, err, stderr.String())
	}
	return out, true
}

// objects parses YAML documents into objects keyed "Kind namespace/name",
// without their top-level labels (the chart adds helm's own).
func objects(t *testing.T, data []byte) map[string]map[string]any {
	out := map[string]map[string]any{}
	for _, doc := range strings.Split(string(data), "\n---") {
		obj := map[string]any{}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatal(err)
		}
		if len(obj) == 0 {
			continue
		}
		u := unstructured.Unstructured{Object: obj}
		u.SetLabels(nil)
		out[u.GetKind()+" "+u.GetNamespace()+"/"+u.GetName()] = u.Object
	}
	return out
}

// TestChartMatchesManifests: the chart rendered with its defaults is the
// plain manifests of deploy/ (rbac.yaml, deployment.yaml), object for
// object and field for field, less helm's labels and the Namespace (helm
// install --create-namespace makes it); its CRDs are deploy/'s. So the two
// ways to install stay one.
func TestChartMatchesManifests(t *testing.T) {
	for plain, chart := range map[string]string{"crd.yaml": "tidejob.yaml", "crd-tidequeue.yaml": "tidequeue.yaml"} {
		a, err := os.ReadFile(filepath.Join("..", "deploy", plain))
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(filepath.Join("..", "deploy", "chart", "crds", chart))
		if err != nil {
			t.Fatal(err)
		}
		if string(a) != string(b) {
			t.Errorf("deploy/chart/crds/%s differs from deploy/%s: copy it over", chart, plain)
		}
	}
	rendered, ok := renderChart(t, "defaults")
	if !ok {
		t.Skip("no helm")
	}
	var plain []byte
	for _, f := range []string{"rbac.yaml", "deployment.yaml"} {
		data, err := os.ReadFile(filepath.Join("..", "deploy", f))
		if err != nil {
			t.Fatal(err)
		}
		plain = append(append(plain, data...), "\n---\n"...)
	}
	want := objects(t, plain)
	delete(want, "Namespace /tide-system")
	got := objects(t, rendered)
	for k := range got {
		if strings.HasPrefix(k, "CustomResourceDefinition ") {
			delete(got, k) // compared above
		}
	}
	for k, w := range want {
		g, ok := got[k]
		if !ok {
			t.Errorf("%s: in deploy/, not rendered by the chart", k)
			continue
		}
		wj, _ := yaml.Marshal(w)
		gj, _ := yaml.Marshal(g)
		if string(wj) != string(gj) {
			t.Errorf("%s differs:\nchart:\n%s\ndeploy/:\n%s", k, gj, wj)
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			t.Errorf("%s: rendered by the chart, not in deploy/", k)
		}
	}
	if t.Failed() {
		return
	}
	t.Logf("chart with its defaults = deploy/rbac.yaml + deploy/deployment.yaml: %d objects", len(got))
}
