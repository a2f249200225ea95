package compact

import (
	"encoding/json"
	"fmt"
	"reflect"
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
	} {
		if read := sameAsEncodingJSON(t, []byte(tc.meta)); read != tc.read {
			t.Errorf("%s: read by hand %v, want %v", tc.meta, read, tc.read)
		}
	}
}
