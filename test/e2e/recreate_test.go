package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// recreateWithin is how soon a deleted child must be back: well within the
// watcher's safety net, which publishes a parent whose request was lost
// after a minute.
const recreateWithin = 20 * time.Second

// TestDeletedChildIsRecreatedAtOnce: a composite parent's child, and a
// decorator's attachment, deleted while their parent is unchanged, are
// made again at once, every time. The parent's observed state comes back
// to one it had before (before the child was made, or when it was last
// deleted), and its request must still reach the hook: with ids made of
// the observed state alone, JetStream dropped it as a duplicate for two
// minutes, and only the safety net made the child again, after a minute.
func TestDeletedChildIsRecreatedAtOnce(t *testing.T) {
	t.Run("composite", func(t *testing.T) {
		ctx := t.Context()
		const ctl = "e2e-recreate"
		registerComposite(t, ctl, nil)
		ns := namespace(t)
		labels := map[string]any{"app": "p"}
		parent := createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("p"),
			"children": []any{cm("child", labels, map[string]any{"k": "v"})}})
		eventually(t, time.Minute, func() error {
			if _, err := getConfigMap(ctx, ns, "child"); err != nil {
				return err
			}
			return compositeSynced(ctx, ns, "p")
		})
		deleteAndWaitForAnother(t, ns, "child", parent.GetUID(), func(obj metav1.Object) error { return controlledBy(obj, parent.GetUID()) })
	})
	t.Run("decorator", func(t *testing.T) {
		installCRD(t, "test/e2e/testdata/decoratee-crd.yaml", decorateeGVR)
		const name, label = "e2e-reattach", "e2e.universalcontroller.dev/reattach"
		serveHooks(t, bus.DecoratorController(name), hook.DecoratorSync(echoDecoration))
		registerDecorator(t, name, map[string]any{"resources": decorateesOf(label), "attachments": configMapAttachments,
			"hooks": map[string]any{"sync": map[string]any{"version": "v2"}}})
		ns := namespace(t)
		obj := createDecoratee(t, ns, "d", map[string]any{label: "yes"}, map[string]any{
			name: map[string]any{"attachments": []any{cm("attachment", nil, map[string]any{"k": "v"})}}})
		attached := func(o metav1.Object) error { return attachedBy(o, name, obj.GetUID()) }
		eventually(t, time.Minute, func() error {
			c, err := getConfigMap(t.Context(), ns, "attachment")
			if err != nil {
				return err
			}
			return attached(c)
		})
		deleteAndWaitForAnother(t, ns, "attachment", obj.GetUID(), attached)
	})
}

// deleteAndWaitForAnother deletes the ConfigMap ns/name three times, each
// time once the one before is back, and requires each to be back — a new
// object that owned says is its parent's — within recreateWithin.
func deleteAndWaitForAnother(t *testing.T, ns, name string, parent types.UID, owned func(metav1.Object) error) {
	t.Helper()
	ctx := t.Context()
	for i := range 3 {
		old, err := getConfigMap(ctx, ns, name)
		if err != nil {
			t.Fatal(err)
		}
		uid := old.UID
		if err := env.kube.CoreV1().ConfigMaps(ns).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}); err != nil {
			t.Fatal(err)
		}
		deleted := time.Now()
		if err := poll(ctx, recreateWithin, func() error { return anotherOwned(ctx, ns, name, uid, owned) }); err != nil {
			t.Fatalf("deletion %d of %s (of the parent %s): %v", i+1, name, parent, err)
		}
		t.Logf("deletion %d: %s was back after %s", i+1, name, time.Since(deleted).Round(10*time.Millisecond))
	}
}

// anotherOwned checks the ConfigMap ns/name exists, is not the one of that
// UID, and is owned.
func anotherOwned(ctx context.Context, ns, name string, uid types.UID, owned func(metav1.Object) error) error {
	c, err := getConfigMap(ctx, ns, name)
	switch {
	case err != nil:
		return err
	case c.UID == uid:
		return fmt.Errorf("%s is still the deleted one", name)
	}
	return owned(c)
}
