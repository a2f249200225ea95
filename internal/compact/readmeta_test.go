package compact

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// sameAsEncodingJSON checks decodeMeta on data against encoding/json into
// an ObjectMeta: the same metadata (managedFields skipped), the same
// error. It tells whether readMeta took the metadata.
func sameAsEncodingJSON(t *testing.T, data []byte) (read bool) {
	t.Helper()
	var want metav1.ObjectMeta
	wantErr := json.Unmarshal(data, &struct {
		*metav1.ObjectMeta
		ManagedFields skipped `json:"managedFields"`
	}{ObjectMeta: &want})
	var got metav1.ObjectMeta
	err := decodeMeta(data, &got)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("%s:\n got %#v (%v)\nwant %#v (%v)", data, got, err, want, wantErr)
	}
	return readMeta(data, &metav1.ObjectMeta{})
}

// TestReadMetaAsEncodingJSON holds decodeMeta to encoding/json on the
// metadata of objects an apiserver wrote (kube-scheduler's and kwok's Pod
// among them), which it reads by hand, and on metadata it must leave to
// encoding/json.
func TestReadMetaAsEncodingJSON(t *testing.T) {
	for _, kind := range []string{"configmap", "fanout", "pod"} {
		fs, err := splitObject(testdata(t, kind+".json"))
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := fs.get("metadata")
		if !sameAsEncodingJSON(t, meta) {
			t.Errorf("%s: the apiserver's metadata was left to encoding/json", kind)
		}
	}
	const ref = `{"apiVersion":"v1","kind":"K","name":"p","uid":"u","controller":true,"blockOwnerDeletion":false}`
	for _, tc := range []struct {
		meta string
		read bool
	}{
		{`{"name":"a","namespace":"ns","uid":"u","resourceVersion":"7","generation":3,"creationTimestamp":"2026-11-30T10:00:00Z",` +
			`"deletionTimestamp":"2026-11-30T11:00:00+02:00","deletionGracePeriodSeconds":0,"labels":{"a":"b","é":"日"},"annotations":{},` +
			`"ownerReferences":[` + ref + `,{"apiVersion":"v1","kind":"K","name":"q","uid":"v"}],"finalizers":["x","y"],` +
			`"managedFields":[{"manager":"m","fieldsV1":{"f:data":{}}}],"generateName":"a-","selfLink":"/x"}`, true},
		{` { "name" : "a\u00e9\n" , "labels" : { "k" : "v\"" } , "ownerReferences" : [ ] , "finalizers" : [ ] } `, true},
		{`{"generation":-9223372036854775808,"deletionGracePeriodSeconds":9223372036854775807}`, true},
		{`{}`, true},
		{"{\"name\":\"\xff\"}", true}, // invalid UTF-8: U+FFFD, as encoding/json decodes it
		{`{"Name":"a"}`, false},       // encoding/json matches a field in any case
		{`{"name":"a","name":"b"}`, false},
		{`{"labels":{"a":"1","a":"2"}}`, false},
		{`{"name":null}`, false},
		{`{"labels":null,"finalizers":null,"ownerReferences":null,"deletionTimestamp":null}`, false},
		{`{"labels":{"a":1}}`, false},
		{`{"generation":1.0}`, false},
		{`{"generation":1e3}`, false},
		{`{"generation":+1}`, false},
		{`{"generation":01}`, false},
		{`{"generation":9223372036854775808}`, false},
		{`{"generation":"1"}`, false},
		{`{"creationTimestamp":"yesterday"}`, false},
		{`{"creationTimestamp":""}`, false},
		{`{"ownerReferences":[{"apiVersion":"v1","extra":1}]}`, false},
		{`{"ownerReferences":[{"controller":null}]}`, false},
		{`{"ownerReferences":[null]}`, false},
		{`{"unknown":1}`, false},
		{"{\"name\":\"a\tb\"}", false},
		{`{"name":"a"`, false},
		{`[]`, false},
		{"{\"labels\":{\"\xff\":\"v\"}}", false}, // a key not UTF-8: U+FFFD
		{"{\"labels\":{\"a\tb\":\"v\"}}", false}, // a control character in a key: an error
		{"{\"annotations\":{\"a\x00\":\"v\"}}", false},
		{"{\"annotations\":{\"\\u0061\":\"v\"}}", true}, // a key with an escape
		{manyAnnotations(3000, ""), true},
		{manyAnnotations(3000, `,"k0":"again"`), false},
	} {
		if read := sameAsEncodingJSON(t, []byte(tc.meta)); read != tc.read {
			t.Errorf("%s: read by hand %v, want %v", tc.meta, read, tc.read)
		}
	}
}

// manyAnnotations is metadata with n annotations, then more.
func manyAnnotations(n int, more string) string {
	var b strings.Builder
	b.WriteString(`{"annotations":{`)
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%d":"v"`, i)
	}
	b.WriteString(more + `}}`)
	return b.String()
}

// TestMetadataTwice: an object whose metadata is given twice has them
// merged, as encoding/json merges them, and the owner flags every cached
// object shares are left as they are.
func TestMetadataTwice(t *testing.T) {
	o, err := FromJSON([]byte(`{"apiVersion":"v1","kind":"ConfigMap",` +
		`"metadata":{"name":"a","labels":{"x":"1"},"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"p","uid":"u","controller":true}]},` +
		`"metadata":{"namespace":"b","labels":{"y":"2"},"ownerReferences":[{"apiVersion":"v1","kind":"K","name":"p","uid":"u","controller":false}]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if o.Name != "a" || o.Namespace != "b" || !reflect.DeepEqual(o.GetLabels(), map[string]string{"x": "1", "y": "2"}) {
		t.Errorf("name %q, namespace %q, labels %v: want the two merged", o.Name, o.Namespace, o.GetLabels())
	}
	if !yes || no {
		t.Errorf("the shared flags are %v and %v, want true and false", yes, no)
	}
}
