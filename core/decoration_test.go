package core

import (
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// testDecorator is a decorator of Parents attaching ConfigMaps, as its view
// for Parents.
func testDecorator() *Controller {
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	ctl.Spec.GenerateSelector = nil
	ctl.Decorator = &Decoration{Name: "deco", Annotation: AnnotationDecorator, Resources: []Decorated{{
		Resource: ctl.Parent, Labels: labels.Everything(), Annotations: labels.Everything()}}}
	return ctl.Decorating(&ctl.Decorator.Resources[0])
}

// attached is an attachment of the parent "parent-uid" by the decorator
// named by, as planned earlier.
func attached(t *testing.T, parent *unstructured.Unstructured, name, by string) *unstructured.Unstructured {
	t.Helper()
	ctl := testDecorator()
	ctl.Decorator.Name = by
	o, err := desiredObject(ctl, parent, &ctl.Children[0], attachment(ctl, object("ConfigMap", "", name, map[string]any{"k": "1"}, "")), ownerRef(ctl, parent))
	if err != nil {
		t.Fatal(err)
	}
	o.SetUID(types.UID("uid-" + name))
	return o
}

func TestPlanAttachments(t *testing.T) {
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	cm := func(name string) *unstructured.Unstructured {
		return object("ConfigMap", "", name, map[string]any{"k": "1"}, "")
	}
	tests := []struct {
		name    string
		live    fakeLive
		desired []*unstructured.Unstructured
		want    []string // write strings
		err     string
	}{
		{name: "create", desired: []*unstructured.Unstructured{cm("a")}, want: []string{"create configmaps ns/a"}},
		{name: "an unchanged attachment writes nothing", live: fakeLive{attached(t, parent, "a", "deco")},
			desired: []*unstructured.Unstructured{cm("a")}},
		{name: "a changed attachment is updated", live: fakeLive{attached(t, parent, "a", "deco")},
			desired: []*unstructured.Unstructured{object("ConfigMap", "", "a", map[string]any{"k": "2"}, "")},
			want:    []string{"apply configmaps ns/a"}},
		{name: "an attachment no longer wanted is deleted", live: fakeLive{attached(t, parent, "a", "deco")},
			want: []string{"delete configmaps ns/a"}},
		{name: "another decorator's attachment is left alone", live: fakeLive{attached(t, parent, "theirs", "other")}},
		{name: "the object's own children are left alone", live: fakeLive{object("ConfigMap", "ns", "own", nil, "parent-uid")}},
		{name: "another decorator's attachment in the way rejects the reply", live: fakeLive{attached(t, parent, "a", "other")},
			desired: []*unstructured.Unstructured{cm("a")}, err: `attachments[0] ConfigMap.v1 "a": an object of that name exists, controlled by the decorated object but not by this decorator`},
		{name: "an orphan in the way rejects the reply", live: fakeLive{object("ConfigMap", "ns", "a", nil, "")},
			desired: []*unstructured.Unstructured{cm("a")}, err: "controlled by no one: a decorator adopts nothing"},
		{name: "another owner's object in the way rejects the reply", live: fakeLive{object("ConfigMap", "ns", "a", nil, "other-uid")},
			desired: []*unstructured.Unstructured{cm("a")}, err: "already controlled by Parent p"},
		{name: "an undeclared kind rejects the reply", desired: []*unstructured.Unstructured{cm("a"), object("Secret", "", "s", nil, "")},
			err: `attachments[1] Secret.v1 "s": kind not declared in attachments`},
		{name: "another namespace rejects the reply", desired: []*unstructured.Unstructured{object("ConfigMap", "kube-system", "a", nil, "")},
			err: "outside the parent's namespace"},
		{name: "an attachment listed twice rejects the reply", desired: []*unstructured.Unstructured{cm("a"), cm("a")}, err: "listed twice"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			actions, err := planAttachments(testDecorator(), parent, &hooks.DecoratorResponse{Attachments: tt.desired}, cacheLookup{tt.live})
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("err = %v, want one containing %q", err, tt.err)
				}
				if actions != nil {
					t.Fatalf("a rejected reply planned %v", actions)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, a := range actions {
				got = append(got, a.String())
				if a.Verb == VerbCreate || a.Verb == VerbApply {
					if ref := metav1.GetControllerOf(a.Object); ref == nil || ref.UID != "parent-uid" || a.Object.GetAnnotations()[AnnotationDecorator] != "deco" {
						t.Errorf("%s is not the decorator's attachment of the parent: %v %v", a, a.Object.GetOwnerReferences(), a.Object.GetAnnotations())
					}
				}
			}
			if strings.Join(got, ";") != strings.Join(tt.want, ";") {
				t.Fatalf("actions = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestPlanAttachmentsOfAClusterScopedObject(t *testing.T) {
	ctl := testDecorator()
	ctl.Parent = Resource{
		GVR:        schema.GroupVersionResource{Version: "v1", Resource: "namespaces"},
		GVK:        schema.GroupVersionKind{Version: "v1", Kind: "Namespace"},
		Namespaced: false,
	}
	ns := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace"}}
	ns.SetName("team-a")
	ns.SetUID("ns-uid")
	for _, tc := range []struct {
		namespace, want, err string
	}{
		{namespace: "team-a", want: "create configmaps team-a/welcome"},
		{namespace: "", err: "metadata.namespace is required"},
	} {
		actions, err := planAttachments(ctl, ns, &hooks.DecoratorResponse{Attachments: []*unstructured.Unstructured{
			object("ConfigMap", tc.namespace, "welcome", nil, "")}}, cacheLookup{fakeLive{}})
		switch {
		case tc.err != "":
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("err = %v, want one containing %q", err, tc.err)
			}
		case err != nil:
			t.Error(err)
		case len(actions) != 1 || actions[0].String() != tc.want:
			t.Errorf("actions = %v, want %s", actions, tc.want)
		}
	}
}

func TestPresent(t *testing.T) {
	v := "x"
	got := Present(map[string]*string{"set": &v, "unset": nil})
	if len(got) != 1 || got["set"] != "x" {
		t.Errorf("present = %v, want only the set key", got)
	}
}
