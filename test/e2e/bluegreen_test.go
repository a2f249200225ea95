package e2e

// The BlueGreenDeployment example on the test bed: the controller-manager's
// ReplicaSet controller runs the two colors' Pods, kwok makes them Ready.

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/examples/bluegreen"
)

var (
	replicaSetGVR = schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "replicasets"}
	serviceGVR    = schema.GroupVersionResource{Version: "v1", Resource: "services"}
)

// webTemplate is the BlueGreenDeployments' pod template, running image.
func webTemplate(image string) map[string]any {
	return map[string]any{
		"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
		"spec": map[string]any{"containers": []any{map[string]any{"name": "web", "image": image,
			"ports": []any{map[string]any{"name": "http", "containerPort": int64(80)}}}}},
	}
}

// blueGreenAt checks the rollout of image to color is complete: the
// Service selects color, whose ReplicaSet runs image with every replica
// available, each selected Pod runs image, the other color has no Pods,
// and the status says so for the latest generation.
func blueGreenAt(ctx context.Context, ns, name, color, image string, replicas int32) error {
	p, err := env.dyn.Resource(bluegreen.GVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	svc, err := env.kube.CoreV1().Services(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if got := svc.Spec.Selector[bluegreen.LabelColor]; got != color {
		return fmt.Errorf("the Service selects %q, want %s", got, color)
	}
	for _, c := range []string{bluegreen.Blue, bluegreen.Green} {
		rs, err := env.kube.AppsV1().ReplicaSets(ns).Get(ctx, bluegreen.ReplicaSetName(name, c), metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := controlledBy(rs, p.GetUID()); err != nil {
			return err
		}
		want := int32(0)
		if c == color {
			want = replicas
			if img := rs.Spec.Template.Spec.Containers[0].Image; img != image {
				return fmt.Errorf("%s runs %s, want %s", rs.Name, img, image)
			}
		}
		if !fullyAvailable(rs, want) {
			return fmt.Errorf("%s, want %d available", summary(rs), want)
		}
	}
	pods, err := env.kube.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(svc.Spec.Selector).String()})
	if err != nil {
		return err
	}
	if len(pods.Items) != int(replicas) {
		return fmt.Errorf("the Service selects %d pods, want %d", len(pods.Items), replicas)
	}
	for _, pod := range pods.Items {
		if pod.Spec.Containers[0].Image != image {
			return fmt.Errorf("the Service selects pod %s running %s", pod.Name, pod.Spec.Containers[0].Image)
		}
	}
	active, _, _ := unstructured.NestedString(p.Object, "status", "activeColor")
	available, _, _ := unstructured.NestedInt64(p.Object, "status", color, "availableReplicas")
	observed, _, _ := unstructured.NestedInt64(p.Object, "status", "observedGeneration")
	if active != color || available != int64(replicas) || observed != p.GetGeneration() {
		return fmt.Errorf("status: activeColor %q, %s.availableReplicas %d, observedGeneration %d of %d", active, color, available, observed, p.GetGeneration())
	}
	return syncedTrue(p)
}

// fullyAvailable: the ReplicaSet's controller has seen its latest spec, and
// exactly its replicas exist, all available.
func fullyAvailable(rs *appsv1.ReplicaSet, replicas int32) bool {
	return rs != nil && *rs.Spec.Replicas == replicas && rs.Status.ObservedGeneration >= rs.Generation &&
		rs.Status.Replicas == replicas && rs.Status.AvailableReplicas == replicas
}

func summary(rs *appsv1.ReplicaSet) string {
	if rs == nil {
		return "no ReplicaSet"
	}
	return fmt.Sprintf("%s: spec.replicas %d, generation %d, status.replicas %d, availableReplicas %d, observedGeneration %d",
		rs.Name, *rs.Spec.Replicas, rs.Generation, rs.Status.Replicas, rs.Status.AvailableReplicas, rs.Status.ObservedGeneration)
}

// serviceHistory replays the recorded changes of the ReplicaSets and of the
// Service name in etcd's order (their resourceVersions) and checks that at
// every point the color the Service selects has a fully available
// ReplicaSet. It returns the colors the Service selected, in order, and
// stops the poll it runs in at the first violation.
func serviceHistory(sets, svcs *changeRecord, name string, replicas int32) ([]string, error) {
	type tagged struct {
		change
		service bool
	}
	var all []tagged
	for _, c := range sets.all() {
		all = append(all, tagged{c, false})
	}
	for _, c := range svcs.all() {
		all = append(all, tagged{c, true})
	}
	slices.SortStableFunc(all, func(a, b tagged) int { return cmp.Compare(a.resourceVersion(), b.resourceVersion()) })
	current := map[string]*appsv1.ReplicaSet{} // by color
	var selected string
	var history []string
	for _, c := range all {
		if c.service {
			if c.obj.GetName() != name {
				continue
			}
			selected, _, _ = unstructured.NestedString(c.obj.Object, "spec", "selector", bluegreen.LabelColor)
			if c.deleted {
				selected = ""
			}
			if len(history) == 0 || history[len(history)-1] != selected {
				history = append(history, selected)
			}
		} else {
			var rs appsv1.ReplicaSet
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(c.obj.Object, &rs); err != nil {
				return nil, backoffStop{err}
			}
			current[rs.Labels[bluegreen.LabelColor]] = &rs
			if c.deleted {
				current[rs.Labels[bluegreen.LabelColor]] = nil
			}
		}
		if rs := current[selected]; selected != "" && !fullyAvailable(rs, replicas) {
			return history, backoffStop{fmt.Errorf("at resourceVersion %d the Service selects %s, whose ReplicaSet is not fully available: %s",
				c.resourceVersion(), selected, summary(rs))}
		}
	}
	return history, nil
}

// TestBlueGreen: a BlueGreenDeployment of 3 replicas comes up blue; a new
// template rolls out to green, then the next one back to blue. Every change
// of the ReplicaSets and the Service is recorded while this runs: the
// Service never selects a color whose ReplicaSet is not fully available,
// and it ends on the new color each time, the old one scaled to zero.
func TestBlueGreen(t *testing.T) {
	ctx := t.Context()
	ns := runExample(t, "BlueGreenDeployment", "examples/bluegreen", bluegreen.GVR, bluegreen.Controller, bluegreen.Sync)
	sets := recordChanges(t, replicaSetGVR, ns)
	svcs := recordChanges(t, serviceGVR, ns)
	const replicas = 3
	deployments := env.dyn.Resource(bluegreen.GVR).Namespace(ns)

	start := time.Now()
	if _, err := deployments.Create(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.universalcontroller.dev/v1alpha1", "kind": "BlueGreenDeployment",
		"metadata": map[string]any{"name": "web", "namespace": ns},
		"spec": map[string]any{"replicas": int64(replicas), "selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": webTemplate("nginx:1.27")},
	}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error { return blueGreenAt(ctx, ns, "web", bluegreen.Blue, "nginx:1.27", replicas) })
	t.Logf("blue up in %s", time.Since(start).Round(time.Millisecond))

	for _, step := range []struct{ color, image string }{{bluegreen.Green, "nginx:1.28"}, {bluegreen.Blue, "nginx:1.29"}} {
		start := time.Now()
		patch, _ := json.Marshal(map[string]any{"spec": map[string]any{"template": webTemplate(step.image)}})
		if _, err := deployments.Patch(ctx, "web", types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, time.Minute, func() error { return blueGreenAt(ctx, ns, "web", step.color, step.image, replicas) })
		t.Logf("rolled out %s to %s in %s", step.image, step.color, time.Since(start).Round(time.Millisecond))
	}

	// The recorded history has caught up with the end state.
	want := []string{bluegreen.Blue, bluegreen.Green, bluegreen.Blue}
	var history []string
	eventually(t, 30*time.Second, func() (err error) {
		if history, err = serviceHistory(sets, svcs, "web", replicas); err != nil {
			return err
		}
		if !slices.Equal(history, want) {
			return fmt.Errorf("the Service selected %v, want %v", history, want)
		}
		return nil
	})
	t.Logf("%d ReplicaSet changes and %d Service changes recorded; the Service selected %v, each time fully available",
		len(sets.all()), len(svcs.all()), history)
}
