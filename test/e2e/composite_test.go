package e2e

// The CompositeController semantics of issue 3 on the test bed: adoption
// and release by selector, children of other controllers, the parents'
// labelSelector, ignoreStatusChanges, resyncs, removed fields, strict v2
// replies, and bad input. Each test registers its own UniversalController
// on the test-only Composite kind, whose hook echoes the parent's spec (see
// compositekind_test.go), so a test says what the hook replies by editing
// the parent.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
)

// hookSawLatest fails until the hook's last call saw the Composite as it is.
func hookSawLatest(ctx context.Context, rec *recorder, ns, name string) error {
	p, err := getComposite(ctx, ns, name)
	if err != nil {
		return err
	}
	calls := rec.of(ns, name)
	if len(calls) == 0 || calls[len(calls)-1].resourceVersion != p.GetResourceVersion() {
		return fmt.Errorf("the hook has not seen %s at resourceVersion %s yet", name, p.GetResourceVersion())
	}
	return nil
}

// rejectedWith checks the parent's Synced condition is False with the
// reason and a message holding want, and that a Warning Event on the parent
// says the same.
func rejectedWith(ctx context.Context, gvr schema.GroupVersionResource, ns, name, reason, want string) error {
	p, err := env.dyn.Resource(gvr).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	c := condition(p, "Synced")
	if c == nil || c["status"] != "False" || c["reason"] != reason || !strings.Contains(fmt.Sprint(c["message"]), want) {
		return fmt.Errorf("%s: Synced condition is %v, want False/%s naming %q", name, c, reason, want)
	}
	events, err := env.kube.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "involvedObject.uid": string(p.GetUID()), "type": "Warning", "reason": reason}).String()})
	if err != nil {
		return err
	}
	for _, e := range events.Items {
		if strings.Contains(e.Message, want) {
			return nil
		}
	}
	return fmt.Errorf("%s: no Warning Event %s naming %q among %d", name, reason, want, len(events.Items))
}

// seenChild checks that some call of the hook for the parent observed the
// child under that key.
func seenChild(calls []hookCall, group, key string) bool {
	return slices.ContainsFunc(calls, func(c hookCall) bool { return slices.Contains(c.children[group], key) })
}

// TestCompositeAdoptionAndRelease: with the parent's spec.selector (no
// generateSelector), an orphan matching it is adopted — the same object,
// now controlled by the parent, updated to the desired state — while
// objects that do not match, and a matching one controlled by another
// owner, are never shown to the hook nor touched. When the parent's
// selector changes, its children that no longer match are released (their
// owner reference removed), not deleted. A reply desiring the child of
// another owner is rejected whole, naming it.
func TestCompositeAdoptionAndRelease(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-adoption"
	rec := registerComposite(t, ctl, nil)
	ns := namespace(t)
	cms := env.kube.CoreV1().ConfigMaps(ns)

	orphan, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "orphan", Labels: map[string]string{"app": "adopt"}},
		Data: map[string]string{"from": "someone"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stranger", Labels: map[string]string{"app": "other"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	owner, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	foreign, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "foreign", Labels: map[string]string{"app": "adopt"},
		OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: owner.UID, Controller: &yes}}},
		Data: map[string]string{"from": "another controller"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}

	adoptLabels := map[string]any{"app": "adopt"}
	parent := createComposite(t, ns, "p", ctl, map[string]any{
		"selector": selectApp("adopt"),
		"children": []any{
			cm("orphan", adoptLabels, map[string]any{"from": "hook"}),
			cm("fresh", adoptLabels, map[string]any{"from": "hook"}),
		},
	})
	if !t.Run("adopt the matching orphan", func(t *testing.T) {
		eventually(t, time.Minute, func() error {
			for _, name := range []string{"orphan", "fresh"} {
				c, err := getConfigMap(ctx, ns, name)
				if err != nil {
					return err
				}
				if err := controlledBy(c, parent.GetUID()); err != nil {
					return err
				}
				if c.Data["from"] != "hook" {
					return fmt.Errorf("%s data %v", name, c.Data)
				}
			}
			return compositeSynced(ctx, ns, "p")
		})
		if c, _ := getConfigMap(ctx, ns, "orphan"); c.UID != orphan.UID {
			t.Errorf("the orphan was replaced (UID %s, was %s), not adopted", c.UID, orphan.UID)
		}
		calls := rec.of(ns, "p")
		t.Logf("%d hook calls; children observed by the last: %v", len(calls), calls[len(calls)-1].children)
		if !seenChild(calls, "ConfigMap.v1", "orphan") {
			t.Errorf("no hook call observed the matching orphan")
		}
		for _, c := range calls {
			for _, other := range []string{"stranger", "foreign", "owner"} {
				if slices.Contains(c.children["ConfigMap.v1"], other) {
					t.Errorf("a hook call observed %q, which the parent may not claim: %v", other, c.children)
				}
			}
		}
		for _, before := range []*corev1.ConfigMap{stranger, foreign, owner} {
			now, err := getConfigMap(ctx, ns, before.Name)
			if err != nil || now.ResourceVersion != before.ResourceVersion {
				t.Errorf("%s was touched: resourceVersion %s → %v (err %v)", before.Name, before.ResourceVersion, now, err)
			}
		}
	}) {
		return
	}

	if !t.Run("reject a reply desiring another owner's child", func(t *testing.T) {
		// Desiring the other owner's child: the reply is rejected whole.
		patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{"children": []any{
			cm("orphan", adoptLabels, map[string]any{"from": "hook"}),
			cm("fresh", adoptLabels, map[string]any{"from": "hook, again"}),
			cm("foreign", adoptLabels, map[string]any{"from": "hook"}),
		}}})
		eventually(t, time.Minute, func() error {
			return rejectedWith(ctx, compositeGVR, ns, "p", "InvalidHookReply", `"foreign": an object of that name exists and is already controlled by ConfigMap owner`)
		})
		if c, err := getConfigMap(ctx, ns, "foreign"); err != nil || c.ResourceVersion != foreign.ResourceVersion {
			t.Errorf("the other owner's child was touched: %v (err %v)", c, err)
		}
		if c, err := getConfigMap(ctx, ns, "fresh"); err != nil || c.Data["from"] != "hook" {
			t.Errorf("part of a rejected reply was applied: fresh is %v (err %v)", c, err)
		}
	}) {
		return
	}

	t.Run("release the children that stop matching", func(t *testing.T) {
		// A new selector: the old children no longer match and are released.
		patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{
			"selector": selectApp("adopt2"),
			"children": []any{cm("fresh2", map[string]any{"app": "adopt2"}, map[string]any{"from": "hook"})},
		}})
		eventually(t, time.Minute, func() error {
			c, err := getConfigMap(ctx, ns, "fresh2")
			if err != nil {
				return err
			}
			if err := controlledBy(c, parent.GetUID()); err != nil {
				return err
			}
			for _, name := range []string{"orphan", "fresh"} {
				c, err := getConfigMap(ctx, ns, name)
				if err != nil {
					return fmt.Errorf("%s: %w (a child that stops matching is released, not deleted)", name, err)
				}
				if ref := metav1.GetControllerOf(c); ref != nil {
					return fmt.Errorf("%s is still controlled by %s %s", name, ref.Kind, ref.Name)
				}
			}
			return compositeSynced(ctx, ns, "p")
		})
		if c, _ := getConfigMap(ctx, ns, "orphan"); c.UID != orphan.UID {
			t.Errorf("the released child was replaced")
		}
	})
}

// TestCompositeParentLabelSelector: parentResource.labelSelector limits the
// parents a controller handles: a parent it does not select gets no hook
// call, no child and no condition, until it is labelled to match.
func TestCompositeParentLabelSelector(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-parentselector"
	rec := registerComposite(t, ctl, nil)
	ns := namespace(t)
	spec := func(name string) map[string]any {
		return map[string]any{"selector": selectApp(name), "children": []any{cm(name, map[string]any{"app": name}, nil)}}
	}
	createComposite(t, ns, "unselected", "someone-else", spec("unselected"))
	createComposite(t, ns, "selected", ctl, spec("selected"))
	eventually(t, time.Minute, func() error {
		if _, err := getConfigMap(ctx, ns, "selected"); err != nil {
			return err
		}
		return compositeSynced(ctx, ns, "selected")
	})
	n := rec.count(ns, "unselected")
	t.Logf("hook calls: selected %d, unselected %d", rec.count(ns, "selected"), n)
	if n != 0 {
		t.Errorf("the parent the labelSelector excludes had %d hook calls", n)
	}
	if _, err := getConfigMap(ctx, ns, "unselected"); !apierrors.IsNotFound(err) {
		t.Errorf("the excluded parent got a child (err %v)", err)
	}
	if p, _ := getComposite(ctx, ns, "unselected"); condition(p, "Synced") != nil {
		t.Errorf("the excluded parent got a Synced condition: %v", condition(p, "Synced"))
	}

	patchComposite(t, ns, "unselected", map[string]any{"metadata": map[string]any{"labels": map[string]any{controllerLabel: ctl}}})
	eventually(t, time.Minute, func() error {
		if _, err := getConfigMap(ctx, ns, "unselected"); err != nil {
			return err
		}
		return compositeSynced(ctx, ns, "unselected")
	})
}

// TestCompositeIgnoreStatusChanges: a status-only update of a parent syncs
// it, unless the controller sets ignoreStatusChanges; then only other
// changes do.
func TestCompositeIgnoreStatusChanges(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	var reacted time.Duration
	for _, ignore := range []bool{false, true} {
		t.Run(fmt.Sprintf("ignoreStatusChanges=%v", ignore), func(t *testing.T) {
			ctl := fmt.Sprintf("e2e-ignorestatus-%v", ignore)
			rec := registerComposite(t, ctl, func(spec map[string]any) {
				_ = unstructured.SetNestedField(spec, ignore, "parentResource", "ignoreStatusChanges")
			})
			name := ctl
			createComposite(t, ns, name, ctl, map[string]any{"selector": selectApp(name)})
			eventually(t, time.Minute, func() error { return compositeSynced(ctx, ns, name) })
			before := rec.count(ns, name)

			// Someone else writes the status.
			start := time.Now()
			if _, err := env.dyn.Resource(compositeGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType,
				[]byte(`{"status":{"poked":"by the test"}}`), metav1.PatchOptions{FieldManager: "e2e-poker"}, "status"); err != nil {
				t.Fatal(err)
			}
			if !ignore {
				eventually(t, 30*time.Second, func() error {
					if n := rec.count(ns, name); n <= before {
						return fmt.Errorf("%d hook calls, as before the status update", n)
					}
					return nil
				})
				reacted = time.Since(start)
				t.Logf("the status update gave a hook call after %s (calls %d → %d)", reacted.Round(time.Millisecond), before, rec.count(ns, name))
				return
			}
			window := max(3*time.Second, 10*reacted)
			consistently(t, window, func() error {
				if n := rec.count(ns, name); n != before {
					return fmt.Errorf("the status update gave %d hook calls", n-before)
				}
				return nil
			})
			t.Logf("no hook call in %s after the status update (calls stay %d)", window, before)
			// The controller is alive: a label change syncs the parent.
			patchComposite(t, ns, name, map[string]any{"metadata": map[string]any{"labels": map[string]any{"touched": "yes"}}})
			eventually(t, 30*time.Second, func() error {
				if n := rec.count(ns, name); n <= before {
					return fmt.Errorf("a label change gave no hook call")
				}
				return nil
			})
		})
	}
}

// TestCompositeResyncs: resyncPeriodSeconds re-syncs every parent
// periodically; resyncAfterSeconds in a reply re-syncs that parent once
// more (and again for as long as its replies ask). A resync of an unchanged
// parent writes nothing: its child and its own resourceVersion stay put.
func TestCompositeResyncs(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	for _, tc := range []struct {
		name       string
		controller func(spec map[string]any)
		parent     map[string]any // spec fields of the resynced parent
	}{
		{"resyncPeriodSeconds", func(spec map[string]any) { spec["resyncPeriodSeconds"] = int64(1) }, nil},
		{"resyncAfterSeconds", nil, map[string]any{"resyncAfterSeconds": 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctl := "e2e-" + strings.ToLower(tc.name)
			rec := registerComposite(t, ctl, tc.controller)
			name := strings.ToLower(tc.name)
			spec := map[string]any{"selector": selectApp(name), "children": []any{cm(name, map[string]any{"app": name}, map[string]any{"k": "v"})}}
			maps.Copy(spec, tc.parent)
			createComposite(t, ns, name, ctl, spec)
			// A second parent that asks for nothing.
			quiet := name + "-quiet"
			createComposite(t, ns, quiet, ctl, map[string]any{"selector": selectApp(quiet)})
			if !t.Run("both parents synced", func(t *testing.T) {
				eventually(t, time.Minute, func() error {
					if _, err := getConfigMap(ctx, ns, name); err != nil {
						return err
					}
					if err := compositeSynced(ctx, ns, quiet); err != nil {
						return err
					}
					if err := compositeSynced(ctx, ns, name); err != nil {
						return err
					}
					// The echo of uc's own status write has been served: the
					// quiet parent is quiet from now on.
					return hookSawLatest(ctx, rec, ns, quiet)
				})
			}) {
				return
			}
			var parent *unstructured.Unstructured // before the resyncs
			if !t.Run("resyncs every second write nothing", func(t *testing.T) {
				child, _ := getConfigMap(ctx, ns, name)
				parent, _ = getComposite(ctx, ns, name)
				before, quietBefore := rec.count(ns, name), rec.count(ns, quiet)
				start := time.Now()
				const more = 4
				eventually(t, 30*time.Second, func() error {
					if n := rec.count(ns, name); n < before+more {
						return fmt.Errorf("%d hook calls since, want %d", n-before, more)
					}
					return nil
				})
				took := time.Since(start)
				quietCalls := rec.count(ns, quiet) - quietBefore
				t.Logf("%d resyncs in %s; the quiet parent: %d calls meanwhile", more, took.Round(time.Millisecond), quietCalls)
				if took < time.Duration(more-1)*time.Second*8/10 {
					t.Errorf("%d calls within %s: faster than one a second", more, took)
				}
				if tc.name == "resyncAfterSeconds" && quietCalls != 0 {
					t.Errorf("resyncAfterSeconds of one parent synced another %d times", quietCalls)
				}
				if tc.name == "resyncPeriodSeconds" && quietCalls < more-1 {
					t.Errorf("resyncPeriodSeconds re-synced the other parent %d times", quietCalls)
				}
				// Nothing was written by the resyncs.
				if now, err := getConfigMap(ctx, ns, name); err != nil || now.ResourceVersion != child.ResourceVersion {
					t.Errorf("the child was written during resyncs: resourceVersion %s → %v (err %v)", child.ResourceVersion, now.ResourceVersion, err)
				}
				if now, err := getComposite(ctx, ns, name); err != nil || now.GetResourceVersion() != parent.GetResourceVersion() {
					t.Errorf("the parent was written during resyncs (resourceVersion %s → %s)", parent.GetResourceVersion(), now.GetResourceVersion())
				}
			}) {
				return
			}
			if tc.name != "resyncAfterSeconds" {
				return
			}
			t.Run("replies that stop asking stop the resyncs", func(t *testing.T) {
				patchComposite(t, ns, name, map[string]any{"spec": map[string]any{"resyncAfterSeconds": nil}})
				var settled int
				eventually(t, 30*time.Second, func() error {
					calls := rec.of(ns, name)
					if calls[len(calls)-1].generation <= parent.GetGeneration() {
						return fmt.Errorf("the hook has not seen the change yet")
					}
					settled = len(calls)
					return nil
				})
				// At most one resync asked for before the change is still due,
				// and the status write for the new generation echoes once (uc
				// re-syncs on its own status writes; see the benchmarks).
				consistently(t, 3*time.Second, func() error {
					if n := rec.count(ns, name); n > settled+2 {
						return fmt.Errorf("%d more hook calls after the replies stopped asking", n-settled)
					}
					return nil
				})
			})
		})
	}
}

// TestCompositeRemovedFieldIsRemoved: a field, label or annotation dropped
// from the desired child is removed from the cluster object (InPlace), and
// the child is the same object — also when the child, created by uc, was
// updated before without dropping anything (uc moves the fields it created
// to its server-side apply only when one is dropped).
func TestCompositeRemovedFieldIsRemoved(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-removedfield"
	registerComposite(t, ctl, nil)
	ns := namespace(t)
	full := cm("c", map[string]any{"app": "c", "extra": "yes"}, map[string]any{"keep": "1", "drop": "2"})
	_ = unstructured.SetNestedField(full, map[string]any{"note": "dropped later"}, "metadata", "annotations")
	createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("c"), "children": []any{full}})
	var first *corev1.ConfigMap
	eventually(t, time.Minute, func() error {
		c, err := getConfigMap(ctx, ns, "c")
		if err == nil && c.Data["drop"] != "2" {
			err = fmt.Errorf("data %v", c.Data)
		}
		first = c
		return err
	})
	changed := cm("c", map[string]any{"app": "c", "extra": "yes"}, map[string]any{"keep": "2", "drop": "2"})
	_ = unstructured.SetNestedField(changed, map[string]any{"note": "dropped later"}, "metadata", "annotations")
	patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{"children": []any{changed}}})
	eventually(t, time.Minute, func() error {
		c, err := getConfigMap(ctx, ns, "c")
		if err == nil && c.Data["keep"] != "2" {
			err = fmt.Errorf("data %v", c.Data)
		}
		return err
	})
	patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{"children": []any{
		cm("c", map[string]any{"app": "c"}, map[string]any{"keep": "1"}),
	}}})
	eventually(t, time.Minute, func() error {
		c, err := getConfigMap(ctx, ns, "c")
		if err != nil {
			return err
		}
		if _, ok := c.Data["drop"]; ok {
			return fmt.Errorf("data still holds the dropped key: %v", c.Data)
		}
		if _, ok := c.Labels["extra"]; ok {
			return fmt.Errorf("labels still hold the dropped one: %v", c.Labels)
		}
		if _, ok := c.Annotations["note"]; ok {
			return fmt.Errorf("annotations still hold the dropped one: %v", c.Annotations)
		}
		if c.Data["keep"] != "1" || c.UID != first.UID {
			return fmt.Errorf("data %v, UID %s (was %s)", c.Data, c.UID, first.UID)
		}
		return nil
	})
}

// TestCompositeHookVersions: the children arrive keyed by name (v1) or
// namespace/name (v2); a reply with a field the response does not have is
// applied in v1 and rejected in v2, the error naming the field.
func TestCompositeHookVersions(t *testing.T) {
	ctx := t.Context()
	ns := namespace(t)
	for _, tc := range []struct {
		version, keyPrefix string
		strict             bool
	}{
		{"v1", "", false},
		{"v2", ns + "/", true},
	} {
		t.Run(tc.version, func(t *testing.T) {
			ctl := "e2e-hook-" + tc.version
			rec := registerComposite(t, ctl, func(spec map[string]any) {
				_ = unstructured.SetNestedField(spec, tc.version, "hooks", "sync", "version")
			})
			name := "p-" + tc.version
			createComposite(t, ns, name, ctl, map[string]any{"selector": selectApp(name),
				"children": []any{cm("c-"+tc.version, map[string]any{"app": name}, map[string]any{"v": "1"})}})
			eventually(t, time.Minute, func() error {
				if key := tc.keyPrefix + "c-" + tc.version; !seenChild(rec.of(ns, name), "ConfigMap.v1", key) {
					return fmt.Errorf("no call observed the child under %q: %v", key, rec.of(ns, name))
				}
				return compositeSynced(ctx, ns, name)
			})
			// The reply carries a misspelt field and a change of the child.
			patchComposite(t, ns, name, map[string]any{"spec": map[string]any{
				"children": []any{cm("c-"+tc.version, map[string]any{"app": name}, map[string]any{"v": "2"})},
				"extra":    map[string]any{"resyncAfterSecond": 5},
			}})
			if tc.strict {
				eventually(t, time.Minute, func() error {
					return rejectedWith(ctx, compositeGVR, ns, name, "InvalidHookReply", `unknown field "resyncAfterSecond"`)
				})
				if c, _ := getConfigMap(ctx, ns, "c-"+tc.version); c.Data["v"] != "1" {
					t.Errorf("the rejected reply was applied: %v", c.Data)
				}
				return
			}
			eventually(t, time.Minute, func() error {
				c, err := getConfigMap(ctx, ns, "c-"+tc.version)
				if err == nil && c.Data["v"] != "2" {
					err = fmt.Errorf("data %v", c.Data)
				}
				if err != nil {
					return err
				}
				return compositeSynced(ctx, ns, name)
			})
		})
	}
}

// TestCompositeBadInput: each bad reply, or a parent with no selector,
// gives a clear error on the parent (a Warning Event and Synced=False
// naming the problem), nothing of the reply is applied — neither its good
// change of an existing child nor its new child — and the controller goes
// on serving other parents.
func TestCompositeBadInput(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-badinput"
	rec := registerComposite(t, ctl, nil)
	ns := namespace(t)
	for i, tc := range []struct {
		name   string
		bad    func(p string) map[string]any // spec fields that make the reply bad
		reason string
		want   string
	}{
		{"child in another namespace", func(p string) map[string]any {
			c := cm(p+"-elsewhere", map[string]any{"app": p}, nil)
			_ = unstructured.SetNestedField(c, "default", "metadata", "namespace")
			return map[string]any{"children": []any{c}}
		}, "InvalidHookReply", `namespace "default" is outside the parent's namespace`},
		{"child without a name", func(p string) map[string]any {
			return map[string]any{"children": []any{cm("", map[string]any{"app": p}, nil)}}
		}, "InvalidHookReply", "has no metadata.name"},
		{"labels do not match the selector", func(p string) map[string]any {
			return map[string]any{"children": []any{cm(p+"-stray", map[string]any{"app": "stray"}, nil)}}
		}, "InvalidHookReply", "do not match the parent's selector"},
		{"status not an object", func(string) map[string]any {
			return map[string]any{"status": "fine"}
		}, "InvalidHookReply", "SyncResponse.status"},
		{"negative resyncAfterSeconds", func(string) map[string]any {
			return map[string]any{"resyncAfterSeconds": -3}
		}, "InvalidHookReply", "resyncAfterSeconds is negative"},
		{"resyncAfterSeconds not a number", func(string) map[string]any {
			return map[string]any{"resyncAfterSeconds": "soon"}
		}, "InvalidHookReply", "SyncResponse.resyncAfterSeconds"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := fmt.Sprintf("bad-%d", i)
			labels := map[string]any{"app": p}
			createComposite(t, ns, p, ctl, map[string]any{"selector": selectApp(p),
				"children": []any{cm(p+"-cm", labels, map[string]any{"v": "1"})}})
			var before *corev1.ConfigMap
			eventually(t, time.Minute, func() error {
				var err error
				before, err = getConfigMap(ctx, ns, p+"-cm")
				if err != nil {
					return err
				}
				return compositeSynced(ctx, ns, p)
			})
			// The bad reply also changes the existing child and adds one.
			spec := map[string]any{"children": []any{
				cm(p+"-cm", labels, map[string]any{"v": "2"}),
				cm(p+"-new", labels, nil),
			}}
			bad := tc.bad(p)
			if extra, ok := bad["children"].([]any); ok {
				bad["children"] = append(spec["children"].([]any), extra...)
			}
			maps.Copy(spec, bad)
			patchComposite(t, ns, p, map[string]any{"spec": spec})
			eventually(t, time.Minute, func() error { return rejectedWith(ctx, compositeGVR, ns, p, tc.reason, tc.want) })

			// Another parent of the same controller is served meanwhile.
			other := p + "-other"
			createComposite(t, ns, other, ctl, map[string]any{"selector": selectApp(other),
				"children": []any{cm(other, map[string]any{"app": other}, nil)}})
			eventually(t, time.Minute, func() error {
				if _, err := getConfigMap(ctx, ns, other); err != nil {
					return err
				}
				return compositeSynced(ctx, ns, other)
			})
			// Nothing of the bad reply was applied.
			if c, err := getConfigMap(ctx, ns, p+"-cm"); err != nil || c.ResourceVersion != before.ResourceVersion {
				t.Errorf("the existing child was changed by the rejected reply: %v (err %v)", c, err)
			}
			for _, name := range []string{p + "-new", p + "-stray"} {
				if _, err := getConfigMap(ctx, ns, name); !apierrors.IsNotFound(err) {
					t.Errorf("%s of the rejected reply was created (err %v)", name, err)
				}
			}
			if _, err := getConfigMap(ctx, "default", p+"-elsewhere"); !apierrors.IsNotFound(err) {
				t.Errorf("a child in another namespace was created (err %v)", err)
			}
			t.Logf("%d hook calls for %s", rec.count(ns, p), p)
		})
	}

	for name, selector := range map[string]any{"no-selector": nil, "empty-selector": map[string]any{}} {
		t.Run(name, func(t *testing.T) {
			spec := map[string]any{"children": []any{cm(name, nil, nil)}}
			if selector != nil {
				spec["selector"] = selector
			}
			createComposite(t, ns, name, ctl, spec)
			eventually(t, time.Minute, func() error {
				return rejectedWith(ctx, compositeGVR, ns, name, "InvalidSelector", "no spec.selector")
			})
			if n := rec.count(ns, name); n != 0 {
				t.Errorf("the hook was called %d times for a parent without a selector", n)
			}
			if _, err := getConfigMap(ctx, ns, name); !apierrors.IsNotFound(err) {
				t.Errorf("a parent without a selector got a child (err %v)", err)
			}
		})
	}
}

// TestCompositeStatusAndUndesiredChildren: the reply's status replaces the
// parent's .status (a field the hook drops is removed), with
// observedGeneration set to the generation the hook saw; an owned child the
// hook no longer desires is deleted.
func TestCompositeStatusAndUndesiredChildren(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-status"
	registerComposite(t, ctl, nil)
	ns := namespace(t)
	labels := map[string]any{"app": "p"}
	createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("p"),
		"status":   map[string]any{"first": "1", "shared": "a"},
		"children": []any{cm("kept", labels, nil), cm("dropped", labels, nil)}})
	statusIs := func(want map[string]any) error {
		p, err := getComposite(ctx, ns, "p")
		if err != nil {
			return err
		}
		status, _, _ := unstructured.NestedMap(p.Object, "status")
		delete(status, "conditions")
		want["observedGeneration"] = p.GetGeneration()
		if fmt.Sprint(status) != fmt.Sprint(want) {
			return fmt.Errorf("status %v, want %v", status, want)
		}
		return compositeSynced(ctx, ns, "p")
	}
	eventually(t, time.Minute, func() error {
		if _, err := getConfigMap(ctx, ns, "dropped"); err != nil {
			return err
		}
		return statusIs(map[string]any{"first": "1", "shared": "a"})
	})
	kept, _ := getConfigMap(ctx, ns, "kept")
	patchComposite(t, ns, "p", map[string]any{"spec": map[string]any{
		"status":   map[string]any{"first": nil, "shared": "b", "second": "2"},
		"children": []any{cm("kept", labels, nil)},
	}})
	eventually(t, time.Minute, func() error {
		_, err := getConfigMap(ctx, ns, "dropped")
		if err := gone(err, "the child no longer desired"); err != nil {
			return err
		}
		return statusIs(map[string]any{"shared": "b", "second": "2"})
	})
	if now, err := getConfigMap(ctx, ns, "kept"); err != nil || now.ResourceVersion != kept.ResourceVersion {
		t.Errorf("the child still desired was written (err %v)", err)
	}
}

// TestCompositeOrphanNotDesired: an orphan that matches the selector is
// one of the parent's observed children — it is in the hook's request. The
// contract (DESIGN.md: "a child that is observed but not desired is
// deleted"; Metacontroller adopts every matching orphan, then deletes those
// not desired) says that when the hook does not desire it, it goes.
func TestCompositeOrphanNotDesired(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-orphan"
	rec := registerComposite(t, ctl, nil)
	ns := namespace(t)
	leftover, err := env.kube.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "leftover", Labels: map[string]string{"app": "p"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("p"),
		"children": []any{cm("kept", map[string]any{"app": "p"}, nil)}})
	eventually(t, time.Minute, func() error {
		if _, err := getConfigMap(ctx, ns, "kept"); err != nil {
			return err
		}
		return compositeSynced(ctx, ns, "p")
	})
	if !seenChild(rec.of(ns, "p"), "ConfigMap.v1", "leftover") {
		t.Fatalf("the hook never observed the matching orphan: %v", rec.of(ns, "p"))
	}
	eventually(t, 30*time.Second, func() error {
		now, err := getConfigMap(ctx, ns, "leftover")
		if err == nil && now.UID != leftover.UID {
			return nil // deleted, and someone made another
		}
		return gone(err, "the observed orphan the hook does not desire")
	})
}

// TestCompositeFinalizeHookRemoved: a parent being finalized when its
// controller loses the finalize hook does not stay forever: with no
// finalize hook there is nothing to wait for, and uc's finalizer comes off
// (as Metacontroller removes its finalizer when the finalize hook is gone).
func TestCompositeFinalizeHookRemoved(t *testing.T) {
	ctx := t.Context()
	const ctl = "e2e-finalizeremoved"
	withFinalize := func(spec map[string]any) { _ = unstructured.SetNestedMap(spec, map[string]any{}, "hooks", "finalize") }
	rec := registerComposite(t, ctl, withFinalize)
	serveHooks(t, ctl, rec.handler(hooks.Finalize, echo)) // never says finalized
	ns := namespace(t)
	t.Cleanup(func() {
		_, _ = env.dyn.Resource(compositeGVR).Namespace(ns).Patch(context.Background(), "p", types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	})
	createComposite(t, ns, "p", ctl, map[string]any{"selector": selectApp("p")})
	finalizer := "universalcontroller.dev/" + ctl
	eventually(t, time.Minute, func() error {
		p, err := getComposite(ctx, ns, "p")
		if err != nil {
			return err
		}
		if !slices.Contains(p.GetFinalizers(), finalizer) {
			return fmt.Errorf("finalizers %v", p.GetFinalizers())
		}
		return compositeSynced(ctx, ns, "p")
	})
	if err := env.dyn.Resource(compositeGVR).Namespace(ns).Delete(ctx, "p", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, time.Minute, func() error {
		for _, c := range rec.of(ns, "p") {
			if c.finalizing {
				return nil
			}
		}
		return fmt.Errorf("no finalize call")
	})
	// The controller loses its finalize hook.
	registerCompositeController(t, ctl, nil)
	eventually(t, time.Minute, func() error {
		p, err := getComposite(ctx, ns, "p")
		if err != nil {
			return gone(err, "the parent")
		}
		return fmt.Errorf("the parent is still there, finalizers %v", p.GetFinalizers())
	})
}
