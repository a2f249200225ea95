package compact

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestEncoded: an object to be encoded encodes as the whole object does —
// byte for byte when uc made it compact (its JSON is json.Marshal's), the
// same JSON value when the apiserver's bytes are kept (a Pod's fields in
// its struct's order) — and its metadata reads as the whole object's.
func TestEncoded(t *testing.T) {
	for name, file := range map[string]string{
		"a ConfigMap uc applied":  "configmap.json",
		"a parent with a status":  "fanout.json",
		"a Pod the scheduler ran": "pod.json",
	} {
		in := testdata(t, file)
		fromMaps, err := New(decode(t, in))
		if err != nil {
			t.Fatal(err)
		}
		fromJSON, err := FromJSON(in)
		if err != nil {
			t.Fatal(err)
		}
		for how, o := range map[string]*Object{"made from maps": fromMaps, "decoded from JSON": fromJSON} {
			t.Run(name+", "+how, func(t *testing.T) {
				whole, err := o.Unstructured()
				if err != nil {
					t.Fatal(err)
				}
				enc, err := o.Encoded()
				if err != nil {
					t.Fatal(err)
				}
				want, err := json.Marshal(whole.Object)
				if err != nil {
					t.Fatal(err)
				}
				got, err := json.Marshal(enc.Object)
				if err != nil {
					t.Fatal(err)
				}
				if how == "made from maps" && !bytes.Equal(got, want) {
					t.Errorf("not json.Marshal's bytes:\n got %s\nwant %s", got, want)
				}
				if diff := cmp.Diff(decode(t, want).Object, decode(t, got).Object); diff != "" {
					t.Errorf("(-whole +encoded):\n%s", diff)
				}
				if enc.GetUID() != whole.GetUID() || enc.GetResourceVersion() != whole.GetResourceVersion() ||
					!cmp.Equal(enc.GetLabels(), whole.GetLabels()) || !cmp.Equal(enc.GetOwnerReferences(), whole.GetOwnerReferences()) ||
					enc.GetKind() != whole.GetKind() || enc.GetAPIVersion() != whole.GetAPIVersion() {
					t.Error("the metadata differs from the whole object's")
				}
			})
		}
	}
}

// TestSplitObject holds the split to encoding/json's reading of the same
// objects into json.RawMessages, on random objects whose strings hold
// quotes, escapes and brackets, indented or not; and refuses JSON that
// ends early or is not an object.
func TestSplitObject(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		obj := map[string]any{}
		for range r.IntN(6) {
			obj[randomString(r)] = randomValue(r, 3)
		}
		data, err := json.Marshal(obj)
		if i%3 == 0 {
			data, err = json.MarshalIndent(obj, " ", "\t")
		}
		if err != nil {
			t.Fatal(err)
		}
		var want map[string]json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		fields, err := splitObject(data)
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		got := map[string]json.RawMessage{}
		for _, f := range fields {
			got[f.name] = f.value
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s (-encoding/json +split):\n%s", data, diff)
		}
	}
	for _, bad := range []string{``, `[]`, `"a"`, `{`, `{"a"`, `{"a":`, `{"a":1`, `{"a":1,`, `{"a":"b`, `{"a":{"b":[1,2}`, `{"a" 1}`, `{"a":1 "b":2}`, `{1:2}`, `{"a":1,}`, `{,"a":1}`} {
		if fields, err := splitObject([]byte(bad)); err == nil {
			t.Errorf("%q split as %q, want an error", bad, fields)
		}
	}
}

// TestSplitArray holds the split of a JSON array to encoding/json's
// reading of it into json.RawMessages, and refuses JSON that is not one.
func TestSplitArray(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for i := range 1000 {
		var list []any
		for range r.IntN(6) {
			list = append(list, randomValue(r, 3))
		}
		data, err := json.Marshal(list)
		if i%3 == 0 {
			data, err = json.MarshalIndent(list, " ", "\t")
		}
		if err != nil {
			t.Fatal(err)
		}
		var want []json.RawMessage
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatal(err)
		}
		values, err := splitArray(data)
		if err != nil {
			t.Fatalf("%s: %v", data, err)
		}
		got := make([]json.RawMessage, len(values))
		for i, v := range values {
			got[i] = v
		}
		if len(want) == 0 && len(got) == 0 {
			continue
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Fatalf("%s (-encoding/json +split):\n%s", data, diff)
		}
	}
	for _, bad := range []string{``, `{}`, `"a"`, `[`, `[1`, `[1,`, `[1,]`, `[,1]`, `[1 2]`, `["a]`, `[{"a":1]`} {
		if values, err := splitArray([]byte(bad)); err == nil {
			t.Errorf("%q split as %q, want an error", bad, values)
		}
	}
}

func randomString(r *rand.Rand) string {
	const alphabet = `ab"\{}[]:, é` + "\n\u2028<&"
	runes := []rune(alphabet)
	var b strings.Builder
	for range r.IntN(8) {
		b.WriteRune(runes[r.IntN(len(runes))])
	}
	return b.String()
}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(8); {
	case n == 0 && depth > 0:
		m := map[string]any{}
		for range r.IntN(4) {
			m[randomString(r)] = randomValue(r, depth-1)
		}
		return m
	case n == 1 && depth > 0:
		var l []any
		for range r.IntN(4) {
			l = append(l, randomValue(r, depth-1))
		}
		return l
	case n == 2:
		return r.Float64() * 1e22
	case n == 3:
		return r.IntN(2) == 0
	case n == 4:
		return nil
	case n == 5:
		return r.Int64()
	}
	return randomString(r)
}
