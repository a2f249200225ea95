package e2e

// UniversalDecorator (issue 13 §2) on the test bed: Metacontroller's
// service-per-pod example on StatefulSets and their Pods, a decorator of a
// cluster-scoped kind (Namespaces) with namespaced attachments, one of
// CustomResourceDefinitions themselves, hook versions v1 and v2 with two
// decorators on one object, and bad input. The hooks are served in this
// process with the Go SDK. The decorator tests of the test-only Decoratee
// kind use an echo hook: the object's spec.replies.<decorator> is the
// reply, so a test says what a hook replies by editing the object.

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	servicepp "universalcontroller.dev/uc/examples/service-per-pod"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

var (
	statefulSetGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "statefulsets"}
	decorateeGVR   = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "decoratees"}
	clusterRoleGVR = schema.GroupVersionResource{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"}
)

// decoratorCall is one recorded call of a decorator's hook.
type decoratorCall struct {
	finalizing  bool
	attachments map[string][]string // keys of the observed attachments, by group
}

// decoratorCalls records a decorator's hook calls per object
// (namespace/name), and can hold the calls of one object until released.
type decoratorCalls struct {
	gates
	mu    sync.Mutex
	calls map[string][]decoratorCall
}

func newDecoratorCalls() *decoratorCalls {
	return &decoratorCalls{calls: map[string][]decoratorCall{}}
}

// record wraps fn: every call is recorded, then waits while its object is
// held, then runs fn.
func (c *decoratorCalls) record(fn hook.DecoratorFunc) hook.DecoratorFunc {
	return func(ctx context.Context, req *hook.DecoratorRequest) (*hook.DecoratorResponse, error) {
		call := decoratorCall{finalizing: req.Finalizing, attachments: map[string][]string{}}
		for group, objs := range req.Attachments {
			call.attachments[group] = slices.Sorted(maps.Keys(objs))
		}
		key := req.Object.GetNamespace() + "/" + req.Object.GetName()
		c.mu.Lock()
		c.calls[key] = append(c.calls[key], call)
		c.mu.Unlock()
		if err := c.wait(ctx, key); err != nil {
			return nil, err
		}
		return fn(ctx, req)
	}
}

func (c *decoratorCalls) of(namespace, name string) []decoratorCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.calls[namespace+"/"+name])
}

// sawAttachment checks that a call for the object observed an attachment
// under that key.
func (c *decoratorCalls) sawAttachment(namespace, name, group, key string) error {
	calls := c.of(namespace, name)
	if !slices.ContainsFunc(calls, func(call decoratorCall) bool { return slices.Contains(call.attachments[group], key) }) {
		return fmt.Errorf("no call for %s/%s observed %s %q (%d calls)", namespace, name, group, key, len(calls))
	}
	return nil
}

// echoDecoration is the Decoratees' hook: it replies the object's
// spec.replies.<decorator name>, as it is.
func echoDecoration(_ context.Context, req *hook.DecoratorRequest) (*hook.DecoratorResponse, error) {
	type decoratee struct {
		Spec struct {
			Replies map[string]hook.DecoratorResponse `json:"replies"`
		} `json:"spec"`
	}
	d, err := hook.Decode[decoratee](req.Object)
	if err != nil {
		return nil, err
	}
	resp := d.Spec.Replies[req.Controller.GetName()]
	return &resp, nil
}

// registerDecorator creates a UniversalDecorator, waits until it runs, and
// deletes it when the test ends.
func registerDecorator(t *testing.T, name string, spec map[string]any) {
	t.Helper()
	createClusterScoped(t, v1alpha1.DecoratorResource, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalDecorator",
		"metadata": map[string]any{"name": name}, "spec": spec,
	}})
	eventually(t, time.Minute, func() error { return decoratorReady(t.Context(), name, "True", "running") })
}

// decoratorReady checks a UniversalDecorator's Ready condition: status and
// a message holding want.
func decoratorReady(ctx context.Context, name, status, want string) error {
	return readyIs(ctx, v1alpha1.DecoratorResource, name, status, want)
}

// decorateesOf is the resources[] entry of a decorator of the Decoratees
// labelled label=yes.
func decorateesOf(label string) []any {
	return []any{map[string]any{"apiVersion": "e2e.universalcontroller.dev/v1", "resource": "decoratees",
		"labelSelector": map[string]any{"matchLabels": map[string]any{label: "yes"}}}}
}

// configMapAttachments is the attachments[] of a decorator of ConfigMaps
// updated in place.
var configMapAttachments = []any{map[string]any{"apiVersion": "v1", "resource": "configmaps", "updateStrategy": map[string]any{"method": "InPlace"}}}

func createDecoratee(t *testing.T, ns, name string, labels map[string]any, replies map[string]any) *unstructured.Unstructured {
	t.Helper()
	obj, err := env.dyn.Resource(decorateeGVR).Namespace(ns).Create(t.Context(), &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "e2e.universalcontroller.dev/v1", "kind": "Decoratee",
		"metadata": map[string]any{"name": name, "namespace": ns, "labels": labels},
		"spec":     map[string]any{"replies": replies},
	}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

func mergePatch(t *testing.T, gvr schema.GroupVersionResource, ns, name string, patch map[string]any) {
	t.Helper()
	b, _ := json.Marshal(patch)
	if _, err := env.dyn.Resource(gvr).Namespace(ns).Patch(t.Context(), name, types.MergePatchType, b, metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
}

// attachedBy checks obj is an attachment of the decorator to the object of
// that UID: controlled by it, and marked as the decorator's.
func attachedBy(obj metav1.Object, decorator string, uid types.UID) error {
	if err := controlledBy(obj, uid); err != nil {
		return err
	}
	if got := obj.GetAnnotations()[core.AnnotationDecorator]; got != decorator {
		return fmt.Errorf("%s is attached by %q, want %q", obj.GetName(), got, decorator)
	}
	return nil
}

// warningEvent checks a Warning Event of that reason, naming want, was
// recorded in namespace about the object called name.
func warningEvent(ctx context.Context, namespace, name, reason, want string) error {
	events, err := env.kube.CoreV1().Events(namespace).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "type": "Warning", "reason": reason}).String()})
	if err != nil {
		return err
	}
	if !slices.ContainsFunc(events.Items, func(e corev1.Event) bool { return strings.Contains(e.Message, want) }) {
		return fmt.Errorf("no Warning Event %s on %s naming %q among %d", reason, name, want, len(events.Items))
	}
	return nil
}

// TestDecoratorServicePerPod is Metacontroller's service-per-pod example:
// every Pod of an annotated StatefulSet gets a Service attached to the
// StatefulSet, and the Pods are labelled with their names, which the
// Services select; scaling up adds a Service; removing an annotation opts
// the StatefulSet out, and its finalize hook deletes the Services and lets
// it go.
func TestDecoratorServicePerPod(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	calls := newDecoratorCalls()
	serveHooks(t, bus.DecoratorController(servicepp.ServicePerPod),
		hook.DecoratorSync(calls.record(servicepp.SyncServicePerPod)),
		hook.DecoratorFinalize(calls.record(servicepp.FinalizeServicePerPod)))
	serveHooks(t, bus.DecoratorController(servicepp.PodNameLabel), hook.DecoratorSync(servicepp.SyncPodNameLabel))
	registerManifest(t, "examples/service-per-pod/decorators.yaml", nil)
	for _, name := range []string{servicepp.ServicePerPod, servicepp.PodNameLabel} {
		eventually(t, time.Minute, func() error { return decoratorReady(ctx, name, "True", "running") })
	}

	sts := manifestObject(t, "examples/service-per-pod/statefulset.yaml")
	sts.SetNamespace(ns)
	_ = unstructured.SetNestedField(sts.Object, int64(2), "spec", "replicas")
	if err := applyObject(ctx, newMapper(), sts); err != nil {
		t.Fatal(err)
	}
	live, err := env.dyn.Resource(statefulSetGVR).Namespace(ns).Get(ctx, "nginx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	decorated := func(replicas int) func() error {
		return func() error {
			for i := range replicas {
				name := fmt.Sprintf("nginx-%d", i)
				svc, err := env.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if err := attachedBy(svc, servicepp.ServicePerPod, live.GetUID()); err != nil {
					return err
				}
				if svc.Spec.Selector["pod-name"] != name || len(svc.Spec.Ports) != 2 {
					return fmt.Errorf("Service %s selects %v with %d ports", name, svc.Spec.Selector, len(svc.Spec.Ports))
				}
				pod, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if pod.Labels["pod-name"] != name {
					return fmt.Errorf("Pod %s is labelled %v, want pod-name=%s", name, pod.Labels, name)
				}
			}
			s, err := env.dyn.Resource(statefulSetGVR).Namespace(ns).Get(ctx, "nginx", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if !slices.Contains(s.GetFinalizers(), "decorator.universalcontroller.dev/"+servicepp.ServicePerPod) {
				return fmt.Errorf("StatefulSet finalizers %v lack the decorator's", s.GetFinalizers())
			}
			return nil
		}
	}
	eventually(t, time.Minute, decorated(2))
	// Hook version v1, a namespaced object: attachments keyed by name.
	eventually(t, 30*time.Second, func() error { return calls.sawAttachment(ns, "nginx", "Service.v1", "nginx-1") })

	mergePatch(t, statefulSetGVR, ns, "nginx", map[string]any{"spec": map[string]any{"replicas": 3}})
	eventually(t, time.Minute, decorated(3))

	// Opting out: the finalize hook deletes the Services, then the
	// StatefulSet is let go, still running.
	mergePatch(t, statefulSetGVR, ns, "nginx", map[string]any{"metadata": map[string]any{"annotations": map[string]any{servicepp.AnnotationPorts: nil}}})
	eventually(t, time.Minute, func() error {
		svcs, err := env.kube.CoreV1().Services(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + servicepp.ServicePerPod})
		if err != nil {
			return err
		}
		if len(svcs.Items) > 0 {
			return fmt.Errorf("%d Services left", len(svcs.Items))
		}
		s, err := env.dyn.Resource(statefulSetGVR).Namespace(ns).Get(ctx, "nginx", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if len(s.GetFinalizers()) > 0 || s.GetDeletionTimestamp() != nil {
			return fmt.Errorf("StatefulSet finalizers %v, deleted %v", s.GetFinalizers(), s.GetDeletionTimestamp())
		}
		return nil
	})
	if !slices.ContainsFunc(calls.of(ns, "nginx"), func(c decoratorCall) bool { return c.finalizing }) {
		t.Error("the finalize hook was never called")
	}
}

// TestDecoratorClusterScopedObject: a decorator of Namespaces, a
// cluster-scoped kind, attaches a ConfigMap in each selected namespace
// (keyed namespace/name in hook version v1), made from a template its
// customize hook relates, annotates the Namespace, creates the ConfigMap
// again after it is deleted, and updates it in place when the template
// changes.
func TestDecoratorClusterScopedObject(t *testing.T) {
	ctx := t.Context()
	const name, label = "e2e-welcome", "e2e.universalcontroller.dev/welcome"
	templates := extraNamespace(t, "decorator-templates")
	if _, err := env.kube.CoreV1().ConfigMaps(templates).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "welcome-template"}, Data: map[string]string{"greeting": "hello"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	customize := func(context.Context, *hook.CustomizeRequest) (*hook.CustomizeResponse, error) {
		return &hook.CustomizeResponse{RelatedResources: []hook.RelatedResourceRule{
			{APIVersion: "v1", Resource: "configmaps", Namespace: templates, Names: []string{"welcome-template"}}}}, nil
	}
	calls := newDecoratorCalls()
	sync := func(_ context.Context, req *hook.DecoratorRequest) (*hook.DecoratorResponse, error) {
		ns, welcomed := req.Object.GetName(), "true"
		// v1, a cluster-scoped object: namespaced objects keyed
		// namespace/name.
		template := req.Related[hook.GroupKey("ConfigMap", "v1")][templates+"/welcome-template"]
		if template == nil {
			return nil, fmt.Errorf("the template is not among the related objects: %v", req.Related)
		}
		cm, err := hook.Decode[corev1.ConfigMap](template)
		if err != nil {
			return nil, err
		}
		return &hook.DecoratorResponse{
			Annotations: map[string]*string{"e2e.universalcontroller.dev/welcomed": &welcomed},
			Attachments: []any{hook.Object{
				"apiVersion": "v1", "kind": "ConfigMap",
				"metadata": map[string]any{"name": "welcome", "namespace": ns},
				"data":     map[string]any{"namespace": ns, "greeting": cm.Data["greeting"]},
			}},
		}, nil
	}
	serveHooks(t, bus.DecoratorController(name), hook.Customize(customize), hook.DecoratorSync(calls.record(sync)))
	registerDecorator(t, name, map[string]any{
		"resources": []any{map[string]any{"apiVersion": "v1", "resource": "namespaces",
			"labelSelector": map[string]any{"matchLabels": map[string]any{label: "yes"}}}},
		"attachments": configMapAttachments,
		"hooks":       map[string]any{"sync": map[string]any{"version": "v1"}, "customize": map[string]any{}},
	})
	ns := namespace(t)
	nsObj, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	mergePatch(t, schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, "", ns, map[string]any{"metadata": map[string]any{"labels": map[string]any{label: "yes"}}})
	welcome := func(greeting string) (*corev1.ConfigMap, error) {
		cm, err := getConfigMap(ctx, ns, "welcome")
		if err != nil {
			return nil, err
		}
		if err := attachedBy(cm, name, nsObj.UID); err != nil {
			return nil, err
		}
		if cm.Data["greeting"] != greeting {
			return nil, fmt.Errorf("welcome says %v, want the greeting %q", cm.Data, greeting)
		}
		n, err := env.kube.CoreV1().Namespaces().Get(ctx, ns, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if n.Annotations["e2e.universalcontroller.dev/welcomed"] != "true" {
			return nil, fmt.Errorf("namespace annotations %v", n.Annotations)
		}
		return cm, nil
	}
	var first *corev1.ConfigMap
	eventually(t, time.Minute, func() (err error) { first, err = welcome("hello"); return err })
	eventually(t, 30*time.Second, func() error { return calls.sawAttachment("", ns, "ConfigMap.v1", ns+"/welcome") })

	if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctx, "welcome", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		cm, err := welcome("hello")
		if err == nil && cm.UID == first.UID {
			return fmt.Errorf("the deleted ConfigMap is still there")
		}
		return err
	})

	mergePatch(t, schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, templates, "welcome-template", map[string]any{"data": map[string]any{"greeting": "hi"}})
	eventually(t, time.Minute, func() error { _, err := welcome("hi"); return err })
}

// TestDecoratorOnCRDs: a decorator of CustomResourceDefinitions themselves
// attaches to each selected CRD a ClusterRole that reads its resource,
// controlled by the CRD (so the garbage collector deletes it with the CRD),
// and annotates the CRD with the role's name.
func TestDecoratorOnCRDs(t *testing.T) {
	ctx := t.Context()
	const name, label = "e2e-crd-reader", "e2e.universalcontroller.dev/reader-role"
	serveHooks(t, bus.DecoratorController(name), hook.Func(hooks.Sync, func(_ context.Context, req *hooks.DecoratorRequest) (*hooks.DecoratorResponse, error) {
		group, _, _ := unstructured.NestedString(req.Object.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(req.Object.Object, "spec", "names", "plural")
		role := req.Object.GetName() + "-reader"
		return &hooks.DecoratorResponse{
			Annotations: map[string]*string{label: &role},
			Attachments: []*unstructured.Unstructured{{Object: map[string]any{
				"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
				"metadata": map[string]any{"name": role},
				"rules": []any{map[string]any{"apiGroups": []any{group}, "resources": []any{plural},
					"verbs": []any{"get", "list", "watch"}}},
			}}},
		}, nil
	}))
	registerDecorator(t, name, map[string]any{
		"resources": []any{map[string]any{"apiVersion": "apiextensions.k8s.io/v1", "resource": "customresourcedefinitions",
			"labelSelector": map[string]any{"matchLabels": map[string]any{label: "yes"}}}},
		"attachments": []any{map[string]any{"apiVersion": "rbac.authorization.k8s.io/v1", "resource": "clusterroles"}},
		"hooks":       map[string]any{"sync": map[string]any{}},
	})
	gizmos := crd("reader.e2e.universalcontroller.dev", "gizmos", "Gizmo", false)
	gizmos.SetLabels(map[string]string{label: "yes"})
	created, err := env.dyn.Resource(crdGVR).Create(ctx, gizmos, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = env.dyn.Resource(crdGVR).Delete(context.Background(), gizmos.GetName(), metav1.DeleteOptions{})
	})
	role := gizmos.GetName() + "-reader"
	eventually(t, time.Minute, func() error {
		cr, err := env.kube.RbacV1().ClusterRoles().Get(ctx, role, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := attachedBy(cr, name, created.GetUID()); err != nil {
			return err
		}
		if ref := metav1.GetControllerOf(cr); ref.Kind != "CustomResourceDefinition" {
			return fmt.Errorf("ClusterRole controlled by a %s", ref.Kind)
		}
		if len(cr.Rules) != 1 || !slices.Equal(cr.Rules[0].Resources, []string{"gizmos"}) {
			return fmt.Errorf("ClusterRole rules %v", cr.Rules)
		}
		c, err := env.dyn.Resource(crdGVR).Get(ctx, gizmos.GetName(), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if c.GetAnnotations()[label] != role {
			return fmt.Errorf("CRD annotations %v", c.GetAnnotations())
		}
		return nil
	})
	if err := env.dyn.Resource(crdGVR).Delete(ctx, gizmos.GetName(), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		_, err := env.dyn.Resource(clusterRoleGVR).Get(ctx, role, metav1.GetOptions{})
		return gone(err, "ClusterRole "+role)
	})
}

// TestDecoratorHookVersions: two decorators of one object, with hook
// versions v1 and v2, each attach a ConfigMap and see only their own, keyed
// by name (v1) or namespace/name (v2, always); each sets a label and a
// status field on the object under its own field manager, so a label one
// stops setting is removed and the other's, and a label set by someone
// else, stay.
func TestDecoratorHookVersions(t *testing.T) {
	ctx := t.Context()
	installCRD(t, "test/e2e/testdata/decoratee-crd.yaml", decorateeGVR)
	const label = "e2e.universalcontroller.dev/versions"
	calls := map[string]*decoratorCalls{}
	for _, version := range []string{"v1", "v2"} {
		name := "e2e-hook-" + version
		calls[name] = newDecoratorCalls()
		serveHooks(t, bus.DecoratorController(name), hook.DecoratorSync(calls[name].record(echoDecoration)))
		registerDecorator(t, name, map[string]any{
			"resources":   decorateesOf(label),
			"attachments": configMapAttachments,
			"hooks":       map[string]any{"sync": map[string]any{"version": version}},
		})
	}
	ns := namespace(t)
	reply := func(version, value string) map[string]any {
		return map[string]any{
			"labels":      map[string]any{"e2e.universalcontroller.dev/" + version: value},
			"status":      map[string]any{version: value},
			"attachments": []any{cm("d-"+version, nil, map[string]any{"by": version})},
		}
	}
	obj := createDecoratee(t, ns, "d", map[string]any{label: "yes"}, map[string]any{"e2e-hook-v1": reply("v1", "one"), "e2e-hook-v2": reply("v2", "two")})
	mergePatch(t, decorateeGVR, ns, "d", map[string]any{"metadata": map[string]any{"labels": map[string]any{"e2e.universalcontroller.dev/user": "mine"}}})
	decorated := func(labels map[string]string, status map[string]any) func() error {
		return func() error {
			for _, version := range []string{"v1", "v2"} {
				c, err := getConfigMap(ctx, ns, "d-"+version)
				if err != nil {
					return err
				}
				if err := attachedBy(c, "e2e-hook-"+version, obj.GetUID()); err != nil {
					return err
				}
			}
			d, err := env.dyn.Resource(decorateeGVR).Namespace(ns).Get(ctx, "d", metav1.GetOptions{})
			if err != nil {
				return err
			}
			got := d.GetLabels()
			delete(got, label)
			if !maps.Equal(got, labels) {
				return fmt.Errorf("labels %v, want %v", got, labels)
			}
			if s, _, _ := unstructured.NestedMap(d.Object, "status"); fmt.Sprint(s) != fmt.Sprint(status) {
				return fmt.Errorf("status %v, want %v", s, status)
			}
			return nil
		}
	}
	eventually(t, time.Minute, decorated(
		map[string]string{"e2e.universalcontroller.dev/v1": "one", "e2e.universalcontroller.dev/v2": "two", "e2e.universalcontroller.dev/user": "mine"},
		map[string]any{"v1": "one", "v2": "two"}))
	eventually(t, 30*time.Second, func() error {
		if err := calls["e2e-hook-v1"].sawAttachment(ns, "d", "ConfigMap.v1", "d-v1"); err != nil {
			return err
		}
		return calls["e2e-hook-v2"].sawAttachment(ns, "d", "ConfigMap.v1", ns+"/d-v2")
	})
	for name, c := range calls {
		for _, call := range c.of(ns, "d") {
			if keys := call.attachments["ConfigMap.v1"]; len(keys) > 1 {
				t.Errorf("%s observed %v: another decorator's attachment", name, keys)
			}
		}
	}

	// v1 stops setting its label and status field (the merge patch leaves
	// its reply's labels and status empty).
	mergePatch(t, decorateeGVR, ns, "d", map[string]any{"spec": map[string]any{"replies": map[string]any{"e2e-hook-v1": map[string]any{
		"labels": map[string]any{"e2e.universalcontroller.dev/v1": nil}, "status": map[string]any{"v1": nil},
	}}}})
	eventually(t, time.Minute, decorated(
		map[string]string{"e2e.universalcontroller.dev/v2": "two", "e2e.universalcontroller.dev/user": "mine"},
		map[string]any{"v2": "two"}))
}

// TestDecoratorBadInput: a decorator whose resources or attachments do not
// resolve says so in its Ready condition and decorates nothing, not even
// the objects of the resources that do resolve; a reply naming an
// undeclared attachment kind, or as an attachment an object nobody gave the
// decorator (one nobody controls, one in another namespace), is rejected
// whole with a Warning Event on the object; a reply for an object deleted
// while its hook ran is dropped, also when an object of the same name was
// created meanwhile; and a reply passed off as one for an object the
// decorator does not decorate is refused, with a Warning Event on the
// decorator. In none of them is anything written.
func TestDecoratorBadInput(t *testing.T) {
	ctx := t.Context()

	t.Run("unresolvable resources", func(t *testing.T) {
		const name = "e2e-unresolvable"
		createClusterScoped(t, v1alpha1.DecoratorResource, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalDecorator",
			"metadata": map[string]any{"name": name},
			"spec": map[string]any{
				"resources": []any{map[string]any{"apiVersion": "nowhere.e2e.universalcontroller.dev/v1", "resource": "widgets"}},
				"hooks":     map[string]any{"sync": map[string]any{}},
			},
		}})
		eventually(t, time.Minute, func() error {
			if err := decoratorReady(ctx, name, "False", "resources[0]"); err != nil {
				return err
			}
			return warningEvent(ctx, "default", name, "CannotRun", "widgets")
		})
	})

	installCRD(t, "test/e2e/testdata/decoratee-crd.yaml", decorateeGVR)
	const name, label = "e2e-bad", "e2e.universalcontroller.dev/bad"
	calls := newDecoratorCalls()
	serveHooks(t, bus.DecoratorController(name), hook.DecoratorSync(calls.record(echoDecoration)))
	registerDecorator(t, name, map[string]any{
		"resources":   decorateesOf(label),
		"attachments": configMapAttachments,
		"hooks":       map[string]any{"sync": map[string]any{}},
	})
	ns := namespace(t)
	selected := map[string]any{label: "yes"}
	nothingWritten := func(obj, attachment string) error {
		if _, err := getConfigMap(ctx, ns, attachment); gone(err, "") != nil {
			return gone(err, "ConfigMap "+attachment)
		}
		if _, err := env.kube.CoreV1().Secrets(ns).Get(ctx, attachment, metav1.GetOptions{}); gone(err, "") != nil {
			return gone(err, "Secret "+attachment)
		}
		d, err := env.dyn.Resource(decorateeGVR).Namespace(ns).Get(ctx, obj, metav1.GetOptions{})
		if err != nil {
			return gone(err, obj)
		}
		if _, ok := d.GetLabels()["written"]; ok {
			return fmt.Errorf("%s was labelled: %v", obj, d.GetLabels())
		}
		return nil
	}

	t.Run("undeclared attachment kind", func(t *testing.T) {
		secret := map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "kinds-att"}}
		createDecoratee(t, ns, "kinds", selected, map[string]any{name: map[string]any{
			"labels":      map[string]any{"written": "yes"},
			"attachments": []any{cm("kinds-att", nil, nil), secret},
		}})
		eventually(t, time.Minute, func() error {
			return warningEvent(ctx, ns, "kinds", "InvalidHookReply", "kind not declared in attachments")
		})
		if err := nothingWritten("kinds", "kinds-att"); err != nil {
			t.Error(err)
		}
	})

	t.Run("partly unresolvable", func(t *testing.T) {
		// One resource and one attachment that resolve, one of each that
		// does not: the decorator runs for none of them, so a Decoratee
		// the first resource selects is left alone until the spec is fixed.
		const partly, partlyLabel = "e2e-partly", "e2e.universalcontroller.dev/partly"
		serveHooks(t, bus.DecoratorController(partly), hook.DecoratorSync(echoDecoration))
		nowhere := map[string]any{"apiVersion": "nowhere.e2e.universalcontroller.dev/v1", "resource": "widgets"}
		createClusterScoped(t, v1alpha1.DecoratorResource, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalDecorator",
			"metadata": map[string]any{"name": partly},
			"spec": map[string]any{
				"resources":   append(decorateesOf(partlyLabel), nowhere),
				"attachments": append(slices.Clone(configMapAttachments), nowhere),
				"hooks":       map[string]any{"sync": map[string]any{}},
			},
		}})
		createDecoratee(t, ns, "partly", map[string]any{partlyLabel: "yes"}, map[string]any{partly: map[string]any{
			"labels":      map[string]any{"written": "yes"},
			"attachments": []any{cm("partly-att", nil, nil)},
		}})
		eventually(t, time.Minute, func() error { return decoratorReady(ctx, partly, "False", "resources[1]") })
		mergePatch(t, v1alpha1.DecoratorResource, "", partly, map[string]any{"spec": map[string]any{"resources": decorateesOf(partlyLabel)}})
		eventually(t, time.Minute, func() error { return decoratorReady(ctx, partly, "False", "attachments[1]") })
		consistently(t, 2*time.Second, func() error { return nothingWritten("partly", "partly-att") })

		// Fixed, it decorates the Decoratee: the hook would have, all along.
		mergePatch(t, v1alpha1.DecoratorResource, "", partly, map[string]any{"spec": map[string]any{"attachments": configMapAttachments}})
		eventually(t, time.Minute, func() error {
			d, err := env.dyn.Resource(decorateeGVR).Namespace(ns).Get(ctx, "partly", metav1.GetOptions{})
			if err != nil {
				return err
			}
			if d.GetLabels()["written"] != "yes" {
				return fmt.Errorf("partly is not decorated: labels %v", d.GetLabels())
			}
			att, err := getConfigMap(ctx, ns, "partly-att")
			if err != nil {
				return err
			}
			return attachedBy(att, partly, d.GetUID())
		})
	})

	t.Run("attachment naming another object", func(t *testing.T) {
		// A hook that answers, as attachments, an object nobody controls
		// (to label it) and one in another namespace: each reply is
		// rejected whole, and neither object nor the decorated one changes.
		other := extraNamespace(t, ns+"-other")
		bystander, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
			Name: "bystander", Labels: map[string]string{"keep": "me"}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		elsewhere := cm("far-att", nil, nil)
		elsewhere["metadata"].(map[string]any)["namespace"] = other
		createDecoratee(t, ns, "grabby", selected, map[string]any{name: map[string]any{
			"labels":      map[string]any{"written": "yes"},
			"attachments": []any{cm("grabby-att", nil, nil), cm("bystander", map[string]any{"taken": "yes"}, nil)},
		}})
		createDecoratee(t, ns, "far", selected, map[string]any{name: map[string]any{
			"labels":      map[string]any{"written": "yes"},
			"attachments": []any{elsewhere},
		}})
		eventually(t, time.Minute, func() error {
			if err := warningEvent(ctx, ns, "grabby", "InvalidHookReply", `ConfigMap.v1 "bystander": an object of that name exists and is controlled by no one: a decorator adopts nothing`); err != nil {
				return err
			}
			return warningEvent(ctx, ns, "far", "InvalidHookReply", fmt.Sprintf("namespace %q is outside the parent's namespace", other))
		})
		for _, obj := range []string{"grabby", "far"} {
			if err := nothingWritten(obj, obj+"-att"); err != nil {
				t.Error(err)
			}
		}
		cur, err := getConfigMap(ctx, ns, "bystander")
		if err != nil {
			t.Fatal(err)
		}
		if cur.ResourceVersion != bystander.ResourceVersion {
			t.Errorf("the bystander ConfigMap was written: labels %v, annotations %v, owners %v", cur.Labels, cur.Annotations, cur.OwnerReferences)
		}
		if _, err := getConfigMap(ctx, other, "far-att"); gone(err, "") != nil {
			t.Error(gone(err, "ConfigMap far-att in "+other))
		}
	})

	// Apply notices of the decorator's objects, by name: the applier has
	// dealt with a reply once it announced the end of its apply.
	applied := map[string]int{}
	var appliedMu sync.Mutex
	sub, err := env.js.Conn().Subscribe(bus.ApplyingPrefix+"."+bus.Token(bus.DecoratorController(name))+".>", func(msg *nats.Msg) {
		var n bus.Applying
		if json.Unmarshal(msg.Data, &n) == nil && n.Done {
			appliedMu.Lock()
			applied[n.Name]++
			appliedMu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Unsubscribe() })
	appliedOnce := func(obj string) func() error {
		return func() error {
			appliedMu.Lock()
			defer appliedMu.Unlock()
			if applied[obj] == 0 {
				return fmt.Errorf("no apply of a reply for %s has ended", obj)
			}
			return nil
		}
	}

	// deletedMidSync creates a selected Decoratee whose reply labels it and
	// attaches <obj>-att, holds its hook call, deletes it once the hook has
	// the call, and returns it and the release of the call.
	deletedMidSync := func(t *testing.T, obj string) (*unstructured.Unstructured, func()) {
		release := calls.hold(ns + "/" + obj)
		t.Cleanup(release)
		created := createDecoratee(t, ns, obj, selected, map[string]any{name: map[string]any{
			"labels":      map[string]any{"written": "yes"},
			"attachments": []any{cm(obj+"-att", nil, nil)},
		}})
		eventually(t, time.Minute, func() error {
			if len(calls.of(ns, obj)) == 0 {
				return fmt.Errorf("the hook has not been called for %s", obj)
			}
			return nil
		})
		if err := env.dyn.Resource(decorateeGVR).Namespace(ns).Delete(ctx, obj, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			_, err := env.dyn.Resource(decorateeGVR).Namespace(ns).Get(ctx, obj, metav1.GetOptions{})
			return gone(err, "Decoratee "+obj)
		})
		return created, release
	}

	t.Run("object deleted mid-sync", func(t *testing.T) {
		_, release := deletedMidSync(t, "gone")
		release()
		eventually(t, time.Minute, appliedOnce("gone"))
		if err := nothingWritten("gone", "gone-att"); err != nil {
			t.Error(err)
		}
	})

	t.Run("object re-created mid-sync", func(t *testing.T) {
		// The reply computed for an object deleted while its hook ran is
		// not for the object created meanwhile under the same name: it is
		// dropped, and the new object gets its own reply only. The new
		// object's own reply could undo what the old one wrote, so every
		// change of the Decoratees and ConfigMaps is recorded.
		old, release := deletedMidSync(t, "again")
		fresh := createDecoratee(t, ns, "again", selected, map[string]any{name: map[string]any{"labels": map[string]any{"fresh": "yes"}}})
		decoratees := recordChanges(t, decorateeGVR, ns)
		configMaps := recordChanges(t, configMapGVR, ns)
		oldApplied := make(chan struct{}, 1)
		oldAddress := bus.Address{Controller: bus.DecoratorController(name), Hook: hooks.Sync,
			Partition: bus.Partition(old.GetUID(), bus.DefaultPartitions), ParentUID: old.GetUID()}
		sub, err := env.js.Conn().Subscribe(oldAddress.ApplyingSubject(), func(msg *nats.Msg) {
			var n bus.Applying
			if json.Unmarshal(msg.Data, &n) == nil && n.Done {
				select {
				case oldApplied <- struct{}{}:
				default:
				}
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = sub.Unsubscribe() })
		release()
		select {
		case <-oldApplied:
		case <-time.After(time.Minute):
			t.Fatal("no apply of the old object's reply ended within a minute")
		}
		eventually(t, time.Minute, func() error {
			d, err := env.dyn.Resource(decorateeGVR).Namespace(ns).Get(ctx, "again", metav1.GetOptions{})
			if err == nil && d.GetLabels()["fresh"] != "yes" {
				err = fmt.Errorf("the new again is not decorated: labels %v", d.GetLabels())
			}
			return err
		})

		// Markers written now reach the records after every earlier change.
		const marker = "e2e.universalcontroller.dev/marker"
		mergePatch(t, decorateeGVR, ns, "again", map[string]any{"metadata": map[string]any{"annotations": map[string]any{marker: "yes"}}})
		if _, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "again-marker"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, 30*time.Second, func() error {
			if !slices.ContainsFunc(decoratees.all(), func(c change) bool { return c.obj.GetAnnotations()[marker] == "yes" }) ||
				!slices.ContainsFunc(configMaps.all(), func(c change) bool { return c.obj.GetName() == "again-marker" }) {
				return fmt.Errorf("the markers have not reached the records yet")
			}
			return nil
		})
		for _, c := range decoratees.all() {
			if c.obj.GetUID() == fresh.GetUID() && c.obj.GetLabels()["written"] != "" {
				t.Errorf("the new again was labelled by the old one's reply: labels %v at resourceVersion %s", c.obj.GetLabels(), c.obj.GetResourceVersion())
			}
		}
		for _, c := range configMaps.all() {
			if c.obj.GetName() == "again-att" {
				t.Errorf("the old again's attachment was written for the new one: owners %v", c.obj.GetOwnerReferences())
			}
		}
	})

	t.Run("reply for another object", func(t *testing.T) {
		mine := createDecoratee(t, ns, "mine", selected, map[string]any{name: map[string]any{"labels": map[string]any{"mine": "yes"}}})
		other := createDecoratee(t, ns, "other", nil, nil)
		eventually(t, time.Minute, func() error {
			d, err := env.dyn.Resource(decorateeGVR).Namespace(ns).Get(ctx, "mine", metav1.GetOptions{})
			if err == nil && d.GetLabels()["mine"] != "yes" {
				err = fmt.Errorf("mine is not decorated yet: %v", d.GetLabels())
			}
			return err
		})
		// The decorator's hook worker may publish on any of the decorator's
		// reply subjects: it passes off a reply as one for other, which the
		// decorator does not decorate (it is not labelled), and one for a
		// resource the decorator does not decorate.
		forge := func(target *unstructured.Unstructured, resource string) {
			meta := bus.Meta{
				Address: bus.Address{Controller: bus.DecoratorController(name), Hook: hooks.Sync,
					Partition: bus.Partition(target.GetUID(), bus.DefaultPartitions), ParentUID: target.GetUID()},
				Namespace: ns, Name: target.GetName(), Generation: target.GetGeneration(),
				ResourceVersion: target.GetResourceVersion(), Observation: 1 << 50,
				RequestID: "forged", Resource: resource,
			}
			e := event.New()
			e.SetID(uuid.NewString())
			e.SetType(bus.ResponseType(hooks.Sync))
			e.SetSource("/e2e/forger")
			meta.SetOn(&e)
			if err := e.SetData(event.ApplicationJSON, map[string]any{
				"labels":      map[string]any{"written": "yes"},
				"attachments": []any{cm(target.GetName()+"-att", nil, nil)},
			}); err != nil {
				t.Fatal(err)
			}
			msg, err := bus.ToMsg(ctx, meta.ReplySubject(), &e)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := env.js.PublishMsg(ctx, msg); err != nil {
				t.Fatal(err)
			}
		}
		forge(other, "e2e.universalcontroller.dev/v1/decoratees")
		eventually(t, time.Minute, func() error {
			return warningEvent(ctx, "default", name, "ReplyRefused", ns+"/other (uid "+string(other.GetUID())+") refused: the decorator does not decorate it")
		})
		forge(mine, "v1/secrets")
		eventually(t, time.Minute, func() error {
			return warningEvent(ctx, "default", name, "ReplyRefused", `names the resource "v1/secrets", which the decorator does not decorate`)
		})
		for _, obj := range []string{"other", "mine"} {
			if err := nothingWritten(obj, obj+"-att"); err != nil {
				t.Error(err)
			}
		}
	})
}
