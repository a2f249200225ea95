package applier

import (
	"context"
	"log/slog"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	fakedynamic "k8s.io/client-go/dynamic/fake"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestInTheWay: a create that finds an object of the name explains it.
// Another's is refused for good; the parent's own waits for the cache; in
// a sharded installation, the parent's own labelled with another partition
// (which this replica's caches do not hold) gets its parent's partition
// label, and the apply waits for the cache to show it.
func TestInTheWay(t *testing.T) {
	cmGVR := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	ctl := &core.Controller{Name: "c"}
	child := &core.Child{Resource: core.Resource{GVR: cmGVR, GVK: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}}
	object := func(owner types.UID, partition string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
		u.SetNamespace("ns")
		u.SetName("c")
		u.SetResourceVersion("7")
		if partition != "" {
			u.SetLabels(map[string]string{v1alpha1.LabelPartition: partition})
		}
		yes := true
		u.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "example.com/v1", Kind: "Parent", Name: "p", UID: owner, Controller: &yes}})
		return u
	}
	for _, tc := range []struct {
		name          string
		cur, desired  *unstructured.Unstructured
		verdict       verdict.Verdict
		wantPartition string
	}{
		{"another parent's: refused", object("other", "5"), object("p", "2"), verdict.Permanent, "5"},
		{"the parent's, labelled alike: waits for the cache", object("p", "2"), object("p", "2"), verdict.Wait, "2"},
		{"unsharded: waits for the cache", object("p", ""), object("p", ""), verdict.Wait, ""},
		{"the parent's, in another partition: labelled with the parent's", object("p", "5"), object("p", "2"), verdict.Wait, "2"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dyn := fakedynamic.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
				map[schema.GroupVersionResource]string{cmGVR: "ConfigMapList"}, tc.cur.DeepCopy())
			w := &writer{dyn: dyn, log: slog.New(slog.DiscardHandler)}
			act := core.Write{Verb: core.VerbCreate, Child: child, Object: tc.desired, Selector: labels.Everything()}
			err := w.inTheWay(context.Background(), dyn.Resource(cmGVR).Namespace("ns"), ctl, act)
			if err == nil || verdict.Of(err) != tc.verdict {
				t.Errorf("error %v (verdict %v), want verdict %v", err, verdict.Of(err), tc.verdict)
			}
			got, err := dyn.Resource(cmGVR).Namespace("ns").Get(context.Background(), "c", metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if p := got.GetLabels()[v1alpha1.LabelPartition]; p != tc.wantPartition {
				t.Errorf("partition label %q, want %q", p, tc.wantPartition)
			}
		})
	}
}
