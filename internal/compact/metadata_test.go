package compact

import (
	"reflect"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/randfill"
)

// TestMetadataAsTheConverter: metadata, and Metadata, make of any ObjectMeta, every
// field set or left empty at random, the map runtime's converter makes,
// managedFields aside. A field ObjectMeta gains fails it until metadata
// converts it.
func TestMetadataAsTheConverter(t *testing.T) {
	f := randfill.NewWithSeed(27).NilChance(0.3).NumElements(0, 3).Funcs(
		func(t *metav1.Time, c randfill.Continue) { // the API's precision: seconds
			var sec int64
			c.Fill(&sec)
			*t = metav1.Unix(sec%4e9, 0)
		},
	)
	fields := map[string]bool{}
	for range 500 {
		var m metav1.ObjectMeta
		f.Fill(&m)
		m.ManagedFields = nil
		want, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m)
		if err != nil {
			t.Fatal(err)
		}
		if m.CreationTimestamp.IsZero() {
			delete(want, "creationTimestamp")
		}
		got := metadata(&m, newPairs(m.Labels, intern).unstructured(), newPairs(m.Annotations, intern).unstructured())
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("metadata differs from the converter's (-want +got):\n%s", diff)
		}
		if diff := cmp.Diff(want, Metadata(&m)); diff != "" {
			t.Fatalf("Metadata differs from the converter's (-want +got):\n%s", diff)
		}
		for k := range got {
			fields[k] = true
		}
	}
	// Every field but managedFields was seen set.
	typ := reflect.TypeFor[metav1.ObjectMeta]()
	for i := range typ.NumField() {
		name, _, _ := cutComma(typ.Field(i).Tag.Get("json"))
		if name != "managedFields" && !fields[name] {
			t.Errorf("ObjectMeta.%s (%s) was never converted", typ.Field(i).Name, name)
		}
	}
}

func cutComma(tag string) (string, string, bool) {
	for i := range len(tag) {
		if tag[i] == ',' {
			return tag[:i], tag[i+1:], true
		}
	}
	return tag, "", false
}

// TestManagedFieldsAsTheConverter: ManagedFields makes of any entries,
// every field set or left empty at random, the list runtime's converter
// makes.
func TestManagedFieldsAsTheConverter(t *testing.T) {
	fieldsV1 := []string{`{}`, `{"f:data":{".":{},"f:a":{}}}`,
		`{"f:metadata":{"f:ownerReferences":{"k:{\"uid\":\"u\"}":{}}},"f:spec":{"f:list":{"v:\"x\"":{},"i:0":{}}}}`}
	f := randfill.NewWithSeed(27).NilChance(0.3).NumElements(0, 3).Funcs(
		func(t *metav1.Time, c randfill.Continue) {
			var sec int64
			c.Fill(&sec)
			*t = metav1.Unix(sec%4e9, 0)
		},
		func(v *metav1.FieldsV1, c randfill.Continue) {
			if i := c.Intn(len(fieldsV1) + 1); i < len(fieldsV1) {
				v.Raw = []byte(fieldsV1[i])
			}
		},
	)
	fields := map[string]bool{}
	for range 500 {
		var m metav1.ObjectMeta
		f.Fill(&m.ManagedFields)
		u, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&m)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := u["managedFields"].([]any)
		got, err := ManagedFields(m.ManagedFields)
		if err != nil {
			t.Fatal(err)
		}
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("ManagedFields differs from the converter's (-want +got):\n%s", diff)
		}
		for _, e := range got {
			for k := range e.(map[string]any) {
				fields[k] = true
			}
		}
	}
	typ := reflect.TypeFor[metav1.ManagedFieldsEntry]()
	for i := range typ.NumField() {
		if name, _, _ := cutComma(typ.Field(i).Tag.Get("json")); !fields[name] {
			t.Errorf("ManagedFieldsEntry.%s (%s) was never converted", typ.Field(i).Name, name)
		}
	}
	if _, err := ManagedFields([]metav1.ManagedFieldsEntry{{Manager: "m", FieldsV1: &metav1.FieldsV1{Raw: []byte("{")}}}); err == nil {
		t.Error("fieldsV1 that is not JSON: no error")
	}
}
