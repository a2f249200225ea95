package applier

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestCreateNeverUpserts: a create that finds an object the cache has not
// seen never writes it; it is refused when the parent could not adopt it,
// and retried (to adopt it once the cache has it) when it could.
func TestCreateNeverUpserts(t *testing.T) {
	ctl := testController(v1alpha1.ChildUpdateInPlace)
	parent := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "example.com/v1", "kind": "Parent"}}
	parent.SetNamespace("ns")
	parent.SetName("p")
	parent.SetUID("parent-uid")
	sel := labels.SelectorFromSet(labels.Set{registry.LabelControllerUID: "parent-uid"})
	unlabelled := object("ConfigMap", "ns", "taken", map[string]any{"secret": "x"}, "")
	for _, tc := range []struct {
		name     string
		existing *unstructured.Unstructured
		refused  string // "" when the create is retried
	}{
		{"an orphan the selector does not match", unlabelled, "is controlled by no one"},
		{"another parent's child", object("ConfigMap", "ns", "taken", nil, "other-uid"), "already controlled by Parent p"},
		{"an orphan the selector matches", claimable(object("ConfigMap", "ns", "taken", nil, "")), ""},
	} {
		for _, dryRun := range []bool{true, false} {
			t.Run(fmt.Sprintf("%s, dry run %v", tc.name, dryRun), func(t *testing.T) {
				dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme(), tc.existing.DeepCopy())
				a := &Applier{dyn: dyn}
				want, err := desiredObject(ctl, parent, &ctl.Children[0], object("ConfigMap", "", "taken", map[string]any{"k": "v"}, ""), ownerRef(ctl, parent))
				if err != nil {
					t.Fatal(err)
				}
				act := action{verb: verbCreate, child: &ctl.Children[0], obj: want, sel: sel}
				_, err = a.write(t.Context(), ctl, act, dryRun)
				var refused *refusedError
				switch {
				case err == nil:
					t.Fatal("the create of an existing object succeeded")
				case tc.refused != "" && (!errors.As(err, &refused) || !strings.Contains(err.Error(), tc.refused)):
					t.Fatalf("err = %v, want a refusal naming %q", err, tc.refused)
				case tc.refused == "" && (errors.As(err, &refused) || permanent(err)):
					t.Fatalf("err = %v, want one that is retried", err)
				}
				live, err := dyn.Resource(ctl.Children[0].GVR).Namespace("ns").Get(t.Context(), "taken", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(live.Object, tc.existing.Object) {
					t.Fatalf("the existing object changed: %v", live.Object)
				}
			})
		}
	}
}
