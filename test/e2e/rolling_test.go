package e2e

// Rolling updates on the test bed, with the echo hook of the composite
// tests: the parent's spec.children are the desired children, so each
// revision of the parent wants the children it lists.

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// pod is a desired Pod child running image, as the echo hook returns it.
func pod(name, app, image string) map[string]any {
	return map[string]any{
		"apiVersion": "v1", "kind": "Pod",
		"metadata": map[string]any{"name": name, "labels": map[string]any{"app": app}},
		"spec": map[string]any{
			"terminationGracePeriodSeconds": int64(1),
			"containers":                    []any{map[string]any{"name": "c", "image": image}},
		},
	}
}

func podImages(ctx context.Context, ns string, names ...string) (map[string]string, error) {
	out := map[string]string{}
	for _, name := range names {
		p, err := env.kube.CoreV1().Pods(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, err
		}
		if !podReady(p) {
			return nil, fmt.Errorf("pod %s is not ready", name)
		}
		out[name] = p.Spec.Containers[0].Image + "@" + string(p.UID)
	}
	return out, nil
}

// revisionNames lists the parent's ControllerRevisions as hash → children.
func revisionNames(ctx context.Context, ns string) (map[string][]string, error) {
	list, err := env.dyn.Resource(v1alpha1.RevisionResource).Namespace(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	out := map[string][]string{}
	for i := range list.Items {
		rev, err := revision.Decode(&list.Items[i])
		if err != nil {
			return nil, err
		}
		out[rev.Hash] = []string{}
		for _, c := range rev.Children {
			out[rev.Hash] = append(out[rev.Hash], c.Names...)
		}
		slices.Sort(out[rev.Hash])
	}
	return out, nil
}

// rolledOut checks the named Pods run image and are Ready, and the
// Composite p says its children are on its latest revision. It returns the
// Pods' image@UID by name.
func rolledOut(ctx context.Context, ns, image string, names ...string) (map[string]string, error) {
	now, err := podImages(ctx, ns, names...)
	if err != nil {
		return nil, err
	}
	for name, v := range now {
		if !strings.HasPrefix(v, image+"@") {
			return nil, fmt.Errorf("pod %s runs %s", name, v)
		}
	}
	if r, err := updatedReason(ctx, ns, "p"); err != nil || r != v1alpha1.ReasonOnLatestRevision {
		return nil, fmt.Errorf("Updated reason %q (err %v)", r, err)
	}
	return now, nil
}

func updatedReason(ctx context.Context, ns, name string) (string, error) {
	p, err := env.dyn.Resource(compositeGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	c := condition(p, v1alpha1.ConditionUpdated)
	if c == nil {
		return "", fmt.Errorf("no Updated condition")
	}
	return fmt.Sprint(c["reason"]), nil
}

// TestRollingRecreate: with a status check the moved Pod cannot pass, a
// rollout moves one Pod and waits; a Pod not moved yet that someone deletes
// comes back at its old revision; once the check can pass, the rollout
// finishes and the old revision is collected.
func TestRollingRecreate(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const ctl = "rolling-recreate"
	strategy := func(status string) map[string]any {
		return map[string]any{"method": "RollingRecreate", "statusChecks": map[string]any{
			"conditions": []any{map[string]any{"type": "Ready", "status": status}}}}
	}
	registerComposite(t, ctl, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "pods", "updateStrategy": strategy("False")}}
	})
	children := func(image string) []any {
		return []any{pod("a", "roll", image), pod("b", "roll", image), pod("c", "roll", image)}
	}
	createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("roll"), "children": children("v1")})
	var before map[string]string
	eventually(t, time.Minute, func() (err error) {
		before, err = podImages(ctx, ns, "a", "b", "c")
		return err
	})
	eventually(t, 30*time.Second, func() error {
		if r, err := updatedReason(ctx, ns, "p"); err != nil || r != v1alpha1.ReasonOnLatestRevision {
			return fmt.Errorf("Updated reason %q (err %v)", r, err)
		}
		return nil
	})

	patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{"children": children("v2")}})
	// a moves first (the reply's order); it becomes Ready, which the
	// check (Ready=False) refuses: the rollout waits.
	var moved map[string]string
	eventually(t, time.Minute, func() (err error) {
		if moved, err = podImages(ctx, ns, "a", "b", "c"); err != nil {
			return err
		}
		if r, err := updatedReason(ctx, ns, "p"); err != nil || r != v1alpha1.ReasonRolloutWaiting {
			return fmt.Errorf("Updated reason %q (err %v)", r, err)
		}
		if moved["a"][:2] != "v2" {
			return fmt.Errorf("pod a runs %s, want v2", moved["a"])
		}
		return nil
	})
	if moved["b"] != before["b"] || moved["c"] != before["c"] {
		t.Fatalf("pods b and c were touched while the rollout waits: %v → %v", before, moved)
	}
	revs, err := revisionNames(ctx, ns)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("revisions while waiting: %v", revs)
	if len(revs) != 2 {
		t.Errorf("%d revisions, want 2", len(revs))
	}

	t.Log("delete pod b, not moved yet: it comes back at the old revision")
	if err := env.kube.CoreV1().Pods(ns).Delete(ctx, "b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		now, err := podImages(ctx, ns, "b")
		if err != nil {
			return err
		}
		if now["b"] == moved["b"] {
			return fmt.Errorf("pod b not recreated yet")
		}
		if now["b"][:2] != "v1" {
			return fmt.Errorf("pod b came back with %s, want v1", now["b"])
		}
		return nil
	})

	t.Log("let the check pass: the rollout finishes")
	registerComposite(t, ctl, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "v1", "resource": "pods", "updateStrategy": strategy("True")}}
	})
	eventually(t, 2*time.Minute, func() error {
		if _, err := rolledOut(ctx, ns, "v2", "a", "b", "c"); err != nil {
			return err
		}
		revs, err := revisionNames(ctx, ns)
		if err != nil || len(revs) != 1 {
			return fmt.Errorf("revisions %v (err %v), want only the latest", revs, err)
		}
		return nil
	})
}

// TestRollingInPlace: Deployments updated in place one at a time; the next
// one moves only once every Deployment already on the new template has
// observed its generation and is Available.
func TestRollingInPlace(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	const ctl = "rolling-in-place"
	registerComposite(t, ctl, func(spec map[string]any) {
		spec["childResources"] = []any{map[string]any{"apiVersion": "apps/v1", "resource": "deployments", "updateStrategy": map[string]any{
			"method": "RollingInPlace", "statusChecks": map[string]any{"conditions": []any{map[string]any{"type": "Available", "status": "True"}}}}}}
	})
	deployment := func(name, image string) map[string]any {
		labels := map[string]any{"app": "inplace", "deployment": name}
		return map[string]any{
			"apiVersion": "apps/v1", "kind": "Deployment",
			"metadata": map[string]any{"name": name, "labels": map[string]any{"app": "inplace"}},
			"spec": map[string]any{
				"replicas": int64(1),
				"selector": map[string]any{"matchLabels": labels},
				"template": map[string]any{"metadata": map[string]any{"labels": labels}, "spec": map[string]any{
					"terminationGracePeriodSeconds": int64(1),
					"containers":                    []any{map[string]any{"name": "c", "image": image}}}},
			},
		}
	}
	children := func(image string) []any {
		return []any{deployment("d1", image), deployment("d2", image), deployment("d3", image)}
	}

	// Record, each time a Deployment gets the new template, whether the
	// ones that got it before had observed it and were Available.
	var mu sync.Mutex
	var order, violations []string
	factory := informers.NewSharedInformerFactoryWithOptions(env.kube, 0, informers.WithNamespace(ns))
	inf := factory.Apps().V1().Deployments().Informer()
	settled := func(d *appsv1.Deployment) bool {
		if d.Status.ObservedGeneration < d.Generation {
			return false
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable {
				return c.Status == "True"
			}
		}
		return false
	}
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(o, n any) {
		old, cur := o.(*appsv1.Deployment), n.(*appsv1.Deployment)
		if old.Spec.Template.Spec.Containers[0].Image == "v2" || cur.Spec.Template.Spec.Containers[0].Image != "v2" {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		for _, name := range order {
			obj, ok, _ := inf.GetStore().GetByKey(ns + "/" + name)
			if !ok || !settled(obj.(*appsv1.Deployment)) {
				violations = append(violations, fmt.Sprintf("%s moved while %s was not settled", cur.Name, name))
			}
		}
		order = append(order, cur.Name)
	}})
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())

	uids := map[string]string{} // the Deployments' before the update
	if !t.Run("created on the latest revision", func(t *testing.T) {
		createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("inplace"), "children": children("v1")})
		eventually(t, time.Minute, func() error {
			if r, err := updatedReason(ctx, ns, "p"); err != nil || r != v1alpha1.ReasonOnLatestRevision {
				return fmt.Errorf("Updated reason %q (err %v)", r, err)
			}
			return nil
		})
		for _, name := range []string{"d1", "d2", "d3"} {
			d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			uids[name] = string(d.UID)
		}
	}) {
		return
	}
	t.Run("updated in place, one at a time", func(t *testing.T) {
		patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{"children": children("v2")}})
		eventually(t, 2*time.Minute, func() error {
			for _, name := range []string{"d1", "d2", "d3"} {
				d, err := env.kube.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if d.Spec.Template.Spec.Containers[0].Image != "v2" || !settled(d) {
					return fmt.Errorf("deployment %s not updated and settled yet", name)
				}
				if string(d.UID) != uids[name] {
					t.Errorf("deployment %s was recreated, want an update in place", name)
				}
			}
			if r, err := updatedReason(ctx, ns, "p"); err != nil || r != v1alpha1.ReasonOnLatestRevision {
				return fmt.Errorf("Updated reason %q (err %v)", r, err)
			}
			return nil
		})
		mu.Lock()
		defer mu.Unlock()
		t.Logf("deployments updated in the order %v", order)
		if !slices.Equal(order, []string{"d1", "d2", "d3"}) {
			t.Errorf("deployments updated in the order %v, want d1, d2, d3", order)
		}
		for _, v := range violations {
			t.Error(v)
		}
	})
}
