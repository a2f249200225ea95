package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

var gadgetGVR = schema.GroupVersionResource{Group: "e2e.universalcontroller.dev", Version: "v1", Resource: "gadgets"}

// gadgetSync gives a Gadget one ConfigMap named after it, unless its
// spec.mode says to fail: "invalid" adds a Secret, a kind the controller
// does not declare, so the reply is rejected (InvalidHookReply); "error"
// makes the hook fail (HookFailed).
func gadgetSync(_ context.Context, req *hooks.SyncRequest) (*hooks.SyncResponse, error) {
	mode, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "mode")
	children := []*unstructured.Unstructured{{Object: map[string]any{
		"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": req.Parent.GetName()},
	}}}
	switch mode {
	case "error":
		return nil, fmt.Errorf("gadget %s is broken", req.Parent.GetName())
	case "invalid":
		children = append(children, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": req.Parent.GetName()},
		}})
	}
	return &hooks.SyncResponse{Children: children}, nil
}

// TestParentsFailingSplitRoles runs uc as separate roles on an external
// NATS server — a dispatcher, a watcher and two appliers sharing the
// partitions — for a controller whose hook fails for some parents beside
// healthy ones. The UniversalController's status.parentsFailing counts the
// failing parents, whichever applier holds them, and status.lastFailure
// names one; when a third applier takes partitions over and the failing
// parents are then fixed or deleted, the count goes back to 0.
func TestParentsFailingSplitRoles(t *testing.T) {
	ctx := t.Context()
	const controller, install = "gadget-controller", "split-failing"
	b := rolesOfInstall(t, install, "--partitions", "8")
	ns := b.ns

	// The hook, on the bus.
	go func() { _ = hook.Serve(ctx, b.js, controller, hook.Func(hooks.Sync, gadgetSync)) }()

	// The controller, served by these roles alone: the suite's uc serves
	// the controllers without installLabel.
	installCRD(t, "test/e2e/testdata/gadget-crd.yaml", gadgetGVR)
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": v1alpha1.Resource.GroupVersion().String(), "kind": "UniversalController",
		"metadata": map[string]any{"name": controller, "labels": map[string]any{installLabel: install}},
		"spec": map[string]any{
			"parentResource":   map[string]any{"apiVersion": gadgetGVR.GroupVersion().String(), "resource": gadgetGVR.Resource},
			"generateSelector": true,
			"childResources": []any{map[string]any{"apiVersion": "v1", "resource": "configmaps",
				"updateStrategy": map[string]any{"method": string(v1alpha1.ChildUpdateInPlace)}}},
			"hooks": map[string]any{"sync": map[string]any{}},
		},
	}}
	createClusterScoped(t, v1alpha1.Resource, obj)

	b.start("dispatcher", "dispatcher")
	b.start("watcher", "watcher", "--leader-elect=false")
	appliers := []*roleProcess{b.start("applier-1", "applier"), b.start("applier-2", "applier")}
	for _, a := range appliers {
		eventually(t, time.Minute, func() error {
			if !a.logHas("partition acquired") {
				return fmt.Errorf("%s holds no partition yet", a.name)
			}
			return nil
		})
	}

	create := func(name, mode string) {
		t.Helper()
		g := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": gadgetGVR.GroupVersion().String(), "kind": "Gadget",
			"metadata": map[string]any{"name": name, "namespace": ns},
			"spec":     map[string]any{"mode": mode},
		}}
		if _, err := env.dyn.Resource(gadgetGVR).Namespace(ns).Create(ctx, g, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	var healthy, failing []string
	for i := range 6 {
		healthy = append(healthy, fmt.Sprintf("ok-%d", i))
		create(healthy[i], "ok")
	}
	// Failing parents, half of each kind of failure, until both appliers
	// hold some (a parent's partition follows from its UID).
	rejectedBy := func(a *roleProcess, name string) bool {
		return a.logHas("reply rejected", "parent="+ns+"/"+name)
	}
	for i := 0; ; i++ {
		mode := []string{"invalid", "error"}[i%2]
		name := fmt.Sprintf("bad-%s-%d", mode, i)
		failing = append(failing, name)
		create(name, mode)
		if i < 3 {
			continue
		}
		eventually(t, time.Minute, func() error {
			for _, n := range failing {
				if !slices.ContainsFunc(appliers, func(a *roleProcess) bool { return rejectedBy(a, n) }) {
					return fmt.Errorf("no applier rejected the reply for %s yet", n)
				}
			}
			return nil
		})
		both := true
		for _, a := range appliers {
			both = both && slices.ContainsFunc(failing, func(n string) bool { return rejectedBy(a, n) })
		}
		if both || i >= 15 {
			break
		}
	}
	for _, a := range appliers {
		var held []string
		for _, n := range failing {
			if rejectedBy(a, n) {
				held = append(held, n)
			}
		}
		t.Logf("%s rejected the replies for %v", a.name, held)
	}

	eventually(t, time.Minute, func() error {
		for _, n := range healthy {
			if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
				return err
			}
		}
		return nil
	})
	eventually(t, time.Minute, func() error { return countsFailing(ctx, controller, failing) })

	// A third applier takes some partitions over; then half the failing
	// parents are fixed, the others deleted.
	third := b.start("applier-3", "applier")
	eventually(t, time.Minute, func() error {
		if !third.logHas("partition acquired") {
			return fmt.Errorf("applier-3 holds no partition yet")
		}
		return nil
	})
	fixed, deleted := failing[:len(failing)/2], failing[len(failing)/2:]
	for _, n := range fixed {
		if _, err := env.dyn.Resource(gadgetGVR).Namespace(ns).Patch(ctx, n, types.MergePatchType, []byte(`{"spec":{"mode":"ok"}}`), metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, func() error { return countsFailing(ctx, controller, deleted) })
	for _, n := range deleted {
		if err := env.dyn.Resource(gadgetGVR).Namespace(ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, time.Minute, func() error { return countsFailing(ctx, controller, nil) })
	for _, n := range fixed {
		if _, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{}); err != nil {
			t.Errorf("fixed parent %s: %v", n, err)
		}
	}
}

// countsFailing fails unless the controller's status counts exactly the
// failing parents (namespace-less names) and, when there are any, its
// lastFailure names one of them with uc's reason for it; with none, the
// count is written as 0 and lastFailure is kept.
func countsFailing(ctx context.Context, controller string, failing []string) error {
	u, err := env.dyn.Resource(v1alpha1.Resource).Get(ctx, controller, metav1.GetOptions{})
	if err != nil {
		return err
	}
	count, found, _ := unstructured.NestedInt64(u.Object, "status", "parentsFailing")
	last, _, _ := unstructured.NestedStringMap(u.Object, "status", "lastFailure")
	if !found || int(count) != len(failing) {
		return fmt.Errorf("parentsFailing %d (set: %v), want %d (%v); lastFailure %v", count, found, len(failing), failing, last)
	}
	if last == nil {
		return fmt.Errorf("parentsFailing %d, no lastFailure", count)
	}
	if len(failing) == 0 {
		return nil
	}
	_, name, _ := strings.Cut(last["parent"], "/")
	if !slices.Contains(failing, name) {
		return fmt.Errorf("lastFailure %v names none of the failing parents %v", last, failing)
	}
	if last["reason"] != v1alpha1.ReasonInvalidHookReply && last["reason"] != v1alpha1.ReasonHookFailed {
		return fmt.Errorf("lastFailure %v: reason is neither %s nor %s", last, v1alpha1.ReasonInvalidHookReply, v1alpha1.ReasonHookFailed)
	}
	return nil
}
