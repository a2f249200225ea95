package compact

import (
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unsafe"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/cache"
)

// decode reads JSON as client-go's dynamic client and informers do.
func decode(t testing.TB, data []byte) *unstructured.Unstructured {
	t.Helper()
	obj, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return obj.(*unstructured.Unstructured)
}

func testdata(t testing.TB, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return data
}

// TestRoundTrip: an object made compact and decoded again is the object
// the informer received, less its managedFields.
func TestRoundTrip(t *testing.T) {
	for name, data := range map[string]string{
		"a ConfigMap uc applied":  "configmap.json",
		"a parent with a status":  "fanout.json",
		"a Pod the scheduler ran": "pod.json",
		"cluster-scoped, deleted, no creation time, floats and nulls": "",
		"metadata only": "",
	} {
		t.Run(name, func(t *testing.T) {
			var in []byte
			switch {
			case data != "":
				in = testdata(t, data)
			case name == "metadata only":
				in = []byte(`{"apiVersion":"v1","kind":"Namespace","metadata":{"name":"shop","uid":"u1","resourceVersion":"7"}}`)
			default:
				in = []byte(`{"apiVersion":"example.com/v1","kind":"Thing","metadata":{"name":"t","deletionTimestamp":"2026-11-27T10:00:00Z","deletionGracePeriodSeconds":0,"finalizers":["example.com/keep"],"generation":3},"spec":{"ratio":1.5,"count":2,"gone":null,"list":[1,"a",{"b":true}],"empty":{}}}`)
			}
			want := decode(t, in)
			want.SetManagedFields(nil)
			o, err := New(decode(t, in))
			if err != nil {
				t.Fatal(err)
			}
			got, err := o.Unstructured()
			if err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(want.Object, got.Object) {
				t.Errorf("the object changed on its way through the cache:\n%s", cmp.Diff(want.Object, got.Object))
			}
			if o.ManagedFields != nil {
				t.Error("managedFields kept")
			}
		})
	}
}

// TestPackLeavesLargeValues: the strings an object alone holds are packed
// in one, but a large annotation value, which whatever holds the name would
// keep alive, is left apart.
func TestPackLeavesLargeValues(t *testing.T) {
	big := strings.Repeat("x", 4096) // a last-applied-configuration, say
	o, err := FromJSON([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","uid":"u1","annotations":{"big":"` + big + `","small":"s"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	annotations := o.GetAnnotations()
	if o.Name != "a" || o.UID != "u1" || annotations["small"] != "s" || annotations["big"] != big {
		t.Fatalf("packed: %q %q %v", o.Name, o.UID, annotations)
	}
	pack := unsafe.String(unsafe.StringData(o.Name), len("a")+len("u1")+len("s"))
	if pack != "au1s" {
		t.Errorf("the pack holds %q, want the name, the UID and the small value", pack)
	}
	if start, p := uintptr(unsafe.Pointer(unsafe.StringData(o.Name))), uintptr(unsafe.Pointer(unsafe.StringData(annotations["big"]))); p >= start && p < start+uintptr(len(pack)+len(big)) {
		t.Error("the large value is packed with the name")
	}
}

// TestInformerInterfaces: the cache's key, namespace index and lister read
// a compact Object as they read any object, and a tombstone of one decodes.
func TestInformerInterfaces(t *testing.T) {
	obj, err := Transform(decode(t, testdata(t, "configmap.json")))
	if err != nil {
		t.Fatal(err)
	}
	key, err := cache.MetaNamespaceKeyFunc(obj)
	if err != nil || key != "bench/fanout-00042-3" {
		t.Fatalf("key %q, %v", key, err)
	}
	m, ok := Meta(cache.DeletedFinalStateUnknown{Key: key, Obj: obj})
	if !ok || metav1.GetControllerOfNoCopy(m).Name != "fanout-00042" {
		t.Fatalf("the tombstone's metadata: %v, %v", m, ok)
	}
	u, err := Decode(cache.DeletedFinalStateUnknown{Key: key, Obj: obj})
	if err != nil || u.Object["data"].(map[string]any)["payload"] != "payload written by the create phase" {
		t.Fatalf("the tombstone decoded: %v, %v", u, err)
	}
	if _, err := Decode("not an object"); err == nil {
		t.Error("a string decoded")
	}
	if again, _ := Transform(obj); again != obj {
		t.Error("a compact object transformed again")
	}
	c := obj.(runtime.Object).DeepCopyObject().(*Object)
	c.SetLabels(map[string]string{"changed": "yes"})
	if _, changed := obj.(*Object).GetLabels()["changed"]; changed {
		t.Error("a deep copy shares its labels")
	}
	// Cached objects share their owners' flags (pack): a deep copy's are
	// its own.
	other, err := FromJSON(testdata(t, "configmap.json"))
	if err != nil {
		t.Fatal(err)
	}
	*c.OwnerReferences[0].Controller = false
	if !*obj.(*Object).OwnerReferences[0].Controller || !*other.OwnerReferences[0].Controller {
		t.Error("a deep copy shares its owner's flags with the cached objects")
	}
	// Labels read the same whichever way client-go asks for them.
	want := map[string]string{"examples.universalcontroller.dev/fanout": "fanout-00042"}
	accessor, err := meta.Accessor(obj)
	if err != nil || !maps.Equal(accessor.GetLabels(), want) || !maps.Equal(obj.(metav1.ObjectMetaAccessor).GetObjectMeta().GetLabels(), want) {
		t.Errorf("labels through the accessors: %v, %v", accessor, err)
	}
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := store.Add(obj); err != nil {
		t.Fatal(err)
	}
	var selected []any
	if err := cache.ListAll(store, labels.SelectorFromSet(want), func(o any) { selected = append(selected, o) }); err != nil || len(selected) != 1 {
		t.Errorf("a selector of its labels selected %v, %v", selected, err)
	}
}
