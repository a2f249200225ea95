package applier

// Fuzz targets of what the applier takes from hooks: decoding a reply, and
// planning the writes of one. `make fuzz-smoke` (part of `make test`) runs
// each briefly, `make fuzz` for longer. The seed corpus is the recorded
// Metacontroller-style replies of the hook contract's golden tests
// (../watcher/testdata/replies), and the crashers found are kept in
// testdata/fuzz/.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/objtest"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// deepReply is a reply whose child is nested depth levels deep.
func deepReply(depth int) []byte {
	return []byte(`{"children":[{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"deep"},"data":` +
		strings.Repeat(`{"a":`, depth-3) + `1` + strings.Repeat(`}`, depth-3) + `}]}`)
}

// addRecordedReplies seeds f with the recorded hook replies, a deeply
// nested child, and one nested deeper than a reply may be (which is refused
// at once). A child nested exactly as deep as a reply may be takes a second
// per run under coverage instrumentation, which stalls a short fuzzing run:
// TestDecodeReplyDepth has it.
func addRecordedReplies(f *testing.F) {
	for _, depth := range []int{100, 10001} {
		f.Add(deepReply(depth))
	}
	files, err := filepath.Glob(filepath.Join("..", "watcher", "testdata", "replies", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no recorded replies: %v", err)
	}
	for _, name := range files {
		if strings.HasSuffix(name, ".golden.json") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
}

// TestDecodeReplyDepth: a reply nested as deep as JSON decoding allows
// (10000 levels) is decoded, loose and strict; one level deeper is refused.
func TestDecodeReplyDepth(t *testing.T) {
	for depth, ok := range map[int]bool{10000: true, 10001: false} {
		r := &reply{meta: bus.Meta{Address: bus.Address{Hook: hooks.Sync}}, typ: bus.ResponseType(hooks.Sync), data: deepReply(depth)}
		for _, strict := range []bool{false, true} {
			if _, err := decodeReply[hooks.SyncResponse](r, strict); (err == nil) != ok {
				t.Errorf("depth %d, strict %t: err %v, want accepted %t", depth, strict, err, ok)
			}
		}
	}
}

// FuzzDecodeReply: no reply, however malformed, makes decoding panic;
// strict decoding (v2's default) accepts only what loose decoding accepts; and what is accepted is a response
// that encodes again. A failure report is always readable as a problem.
func FuzzDecodeReply(f *testing.F) {
	addRecordedReplies(f)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &reply{meta: bus.Meta{Address: bus.Address{Hook: hooks.Sync}}, typ: bus.ResponseType(hooks.Sync), data: data}
		loose, err1 := decodeReply[hooks.SyncResponse](r, false)
		_, err2 := decodeReply[hooks.SyncResponse](r, true)
		if err2 == nil && err1 != nil {
			t.Fatalf("strict decoding accepts a reply loose decoding rejects: %v", err1)
		}
		if err1 == nil {
			_ = loose.Validate()
			if _, err := json.Marshal(loose); err != nil {
				t.Fatalf("an accepted reply does not encode again: %v", err)
			}
		}
		if reason, problem := decodeFailure(r); reason == "" && problem == nil {
			t.Fatal("a failure report decoded to no problem at all")
		}
	})
}

// The parent and live children FuzzPlan plans against: a namespaced parent
// whose selector is its controller-uid label.
const fuzzParentUID = "parent-uid"

func fuzzController() *core.Controller {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	res := func(group, version, kind, plural string, namespaced bool) core.Resource {
		return core.Resource{
			GVR:        schema.GroupVersionResource{Group: group, Version: version, Resource: plural},
			GVK:        schema.GroupVersionKind{Group: group, Version: version, Kind: kind},
			Namespaced: namespaced,
		}
	}
	ctl.Children = append(ctl.Children,
		core.Child{Resource: res("apps", "v1", "Deployment", "deployments", true), Method: v1alpha1.ChildUpdateRecreate},
		core.Child{Resource: res("", "v1", "Service", "services", true), Method: v1alpha1.ChildUpdateOnDelete},
		// Declared, but a namespaced parent cannot have one.
		core.Child{Resource: res("rbac.authorization.k8s.io", "v1", "ClusterRole", "clusterroles", false), Method: v1alpha1.ChildUpdateInPlace},
	)
	return ctl
}

// fuzzLive is what the cluster holds: children of the parent, an orphan its
// selector claims, another parent's child, an unowned object it does not
// select, and an orphan in another namespace.
func fuzzLive() objtest.Live {
	withLabels := func(o *unstructured.Unstructured, lbls map[string]string) *unstructured.Unstructured {
		o.SetLabels(lbls)
		return o
	}
	deploy := objtest.Object("Deployment", "ns", "web", nil, fuzzParentUID)
	deploy.SetAPIVersion("apps/v1")
	return objtest.Live{
		objtest.Object("ConfigMap", "ns", "mine", map[string]any{"k": "1"}, fuzzParentUID),
		deploy,
		withLabels(objtest.Object("Service", "ns", "released", nil, fuzzParentUID), map[string]string{"app": "web"}),
		withLabels(objtest.Object("ConfigMap", "ns", "orphan", nil, ""), map[string]string{v1alpha1.LabelControllerUID: fuzzParentUID}),
		objtest.Object("ConfigMap", "ns", "theirs", nil, "other-uid"),
		withLabels(objtest.Object("ConfigMap", "ns", "victim", map[string]any{"secret": "do-not-touch"}, ""), map[string]string{"app": "victim"}),
		withLabels(objtest.Object("ConfigMap", "elsewhere", "orphan", nil, ""), map[string]string{v1alpha1.LabelControllerUID: fuzzParentUID}),
	}
}

// FuzzPlan: whatever a hook answers, planning does not panic, and a plan
// keeps the applier's promises (DESIGN.md, invariant 5): it touches only
// declared kinds, only in the parent's namespace; what it applies is
// controlled by the parent and matches its selector, once each; what it
// deletes or releases is live and the parent's or an orphan its selector
// claims; another parent's child is never touched. A rejected reply plans
// nothing.
func FuzzPlan(f *testing.F) {
	addRecordedReplies(f)
	for _, names := range [][]string{{"mine"}, {"mine", "orphan"}, {"theirs"}, {"victim"}, {"new", "web"}} {
		var children []string
		for _, n := range names {
			children = append(children, `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"`+n+`"},"data":{"k":"2"}}`)
		}
		f.Add([]byte(`{"children":[` + strings.Join(children, ",") + `]}`))
	}
	ctl, live := fuzzController(), fuzzLive()
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID(fuzzParentUID)
	sel, err := ctl.Selector(parent)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &reply{meta: bus.Meta{Address: bus.Address{Hook: hooks.Sync}}, typ: bus.ResponseType(hooks.Sync), data: data}
		resp, err := decodeReply[hooks.SyncResponse](r, false)
		if err != nil {
			return
		}
		actions, err := core.Plan(ctl, parent, resp, live)
		if err != nil {
			if actions != nil {
				t.Fatalf("a rejected reply (%v) planned %v", err, actions)
			}
			return
		}
		applied := map[core.ChildID]bool{}
		for _, act := range actions {
			checkAction(t, ctl, parent, sel, live, act)
			if act.Verb == core.VerbApply {
				id := core.IDOf(act.Child, act.Object)
				if applied[id] {
					t.Errorf("%s: applied twice", act)
				}
				applied[id] = true
			}
		}
	})
}

// checkAction fails t when act breaks a promise of the applier.
func checkAction(t *testing.T, ctl *core.Controller, parent *unstructured.Unstructured, sel labels.Selector, live objtest.Live, act core.Write) {
	t.Helper()
	declared := false
	for i := range ctl.Children {
		declared = declared || act.Child == &ctl.Children[i]
	}
	switch {
	case !declared:
		t.Fatalf("%s: not a declared child resource", act)
	case act.Object.GetKind() != act.Child.GVK.Kind:
		t.Fatalf("%s: a %s written as a %s", act, act.Object.GetKind(), act.Child.GVK.Kind)
	case act.Object.GetNamespace() != parent.GetNamespace():
		t.Fatalf("%s: outside the parent's namespace %q", act, parent.GetNamespace())
	}
	if act.Verb == core.VerbApply || act.Verb == core.VerbCreate {
		ref := metav1.GetControllerOf(act.Object)
		switch {
		case act.Object.GetAPIVersion() != act.Child.APIVersion():
			t.Fatalf("%s: apiVersion %q, declared %q", act, act.Object.GetAPIVersion(), act.Child.APIVersion())
		case ref == nil || ref.UID != parent.GetUID():
			t.Fatalf("%s: applied without the parent as its controller: %v", act, act.Object.GetOwnerReferences())
		case !sel.Matches(labels.Set(act.Object.GetLabels())):
			t.Fatalf("%s: labels %v do not match the parent's selector", act, act.Object.GetLabels())
		}
		cur, err := live.Object(act.Child.GVR, act.Object.GetNamespace(), act.Object.GetName())
		ok := err == nil
		switch {
		case ok && act.Verb == core.VerbCreate:
			t.Fatalf("%s: creates an object that exists", act)
		case !ok && act.Verb == core.VerbApply:
			t.Fatalf("%s: applies an object that does not exist", act)
		case !ok:
		case metav1.GetControllerOf(cur) != nil && metav1.GetControllerOf(cur).UID != parent.GetUID():
			t.Fatalf("%s: takes over %s's child", act, metav1.GetControllerOf(cur).Name)
		case metav1.GetControllerOf(cur) == nil && !sel.Matches(labels.Set(cur.GetLabels())):
			t.Fatalf("%s: adopts an object whose labels %v the parent's selector does not match", act, cur.GetLabels())
		}
		return
	}
	cur, err := live.Object(act.Child.GVR, act.Object.GetNamespace(), act.Object.GetName())
	ok := err == nil
	if !ok || cur.GetUID() != act.Object.GetUID() {
		t.Fatalf("%s: not a live object", act)
	}
	if ref := metav1.GetControllerOf(cur); ref != nil && ref.UID != parent.GetUID() {
		t.Fatalf("%s: touches %s's child", act, ref.Name)
	}
	if metav1.GetControllerOf(cur) == nil && !sel.Matches(labels.Set(cur.GetLabels())) {
		t.Fatalf("%s: an orphan the parent's selector does not claim", act)
	}
}
