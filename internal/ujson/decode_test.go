package ujson

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	utiljson "k8s.io/apimachinery/pkg/util/json"
)

// sameAsUtiljson checks Decode, DecodeObject and TryDecode on data against
// utiljson.Unmarshal: the same value (int64s, float64s, empty lists all
// told apart) and the same error.
func sameAsUtiljson(t *testing.T, data []byte) {
	t.Helper()
	var want any
	wantErr := utiljson.Unmarshal(data, &want)
	got, err := Decode(data)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(got, want) {
		t.Fatalf("Decode(%q) = %#v, %v; utiljson: %#v, %v", data, got, err, want, wantErr)
	}
	if v, ok := TryDecode(data); ok && (wantErr != nil || !reflect.DeepEqual(v, want)) {
		t.Fatalf("TryDecode(%q) = %#v; utiljson: %#v, %v", data, v, want, wantErr)
	}
	var wantMap map[string]any
	wantErr = utiljson.Unmarshal(data, &wantMap)
	gotMap, err := DecodeObject(data)
	if fmt.Sprint(err) != fmt.Sprint(wantErr) || !reflect.DeepEqual(gotMap, wantMap) {
		t.Fatalf("DecodeObject(%q) = %#v, %v; utiljson: %#v, %v", data, gotMap, err, wantMap, wantErr)
	}
}

// TestDecodeAsUtiljson holds Decode to utiljson on random documents: the
// encoding of random unstructured content, spaced out, and each cut short
// and with a byte changed (mostly invalid documents, some valid other ones).
func TestDecodeAsUtiljson(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	spaces := []string{"", " ", "\n\t", "\r "}
	for range 3000 {
		data, err := json.Marshal(randomValue(r, 4))
		if err != nil {
			t.Fatal(err)
		}
		sameAsUtiljson(t, data)
		var spaced []byte
		for _, c := range data {
			if strings.IndexByte(",:{}[]", c) >= 0 {
				spaced = append(spaced, spaces[r.IntN(len(spaces))]...)
			}
			spaced = append(spaced, c)
		}
		sameAsUtiljson(t, spaced)
		sameAsUtiljson(t, data[:r.IntN(len(data))])
		changed := []byte(string(data))
		const bytes = "\"\\{}[],:-+.eE0123456789 tfnul\x00\x80"
		changed[r.IntN(len(changed))] = bytes[r.IntN(len(bytes))]
		sameAsUtiljson(t, changed)
	}
}

// TestDecodeFixed: documents utiljson has a rule for, each decoded as it
// decodes them, and which of them the fast path takes.
func TestDecodeFixed(t *testing.T) {
	deep := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	for _, tc := range []struct {
		doc  string
		fast bool
	}{
		{`{"a":1,"b":[],"c":{},"d":null,"e":true,"f":false,"g":"x"}`, true},
		{` [ 1 , -0 , 0.5 , 1e3 , 1E-3 , -12.5e+2 ] `, true},
		{`9223372036854775807`, true},            // int64's largest
		{`9223372036854775808`, true},            // a float64
		{`-9223372036854775809`, true},           // a float64
		{`1e-400`, true},                         // underflows to 0
		{`"é日😀 <&> \u2028"`, true},               // a string of UTF-8, and one with escapes
		{`"\ud83d\ude00 \ud800 \n\"\\\/"`, true}, // surrogates, a lone one
		{`{"\u0061":1,"b":"\t\u0000"}`, true},
		{deep(maxDepth), true},
		{`{"a":1,"a":2}`, false},       // utiljson keeps the last
		{`{"a":{"b":1,"b":1}}`, false}, // at any depth
		{"\"\xff\xfe\"", true},         // invalid UTF-8: U+FFFD, as encoding/json decodes it
		{`1e400`, false},               // out of range: an error
		{deep(maxDepth + 1), false},    // too deep: an error
		{`01`, false}, {`-`, false}, {`1.`, false}, {`.5`, false}, {`+1`, false}, {`1e`, false}, {`1e+`, false},
		{`[1,]`, false}, {`{"a":1,}`, false}, {`{"a" 1}`, false}, {`{a:1}`, false}, {`[1 2]`, false},
		{`tru`, false}, {`nul`, false}, {`"a`, false}, {"\"a\tb\"", false}, {`"\x"`, false}, {`"\u12"`, false},
		{``, false}, {` `, false}, {`1 2`, false}, {`{} x`, false},
	} {
		t.Run(tc.doc[:min(len(tc.doc), 24)], func(t *testing.T) {
			sameAsUtiljson(t, []byte(tc.doc))
			if _, ok := TryDecode([]byte(tc.doc)); ok != tc.fast {
				t.Errorf("TryDecode took it: %v, want %v", ok, tc.fast)
			}
		})
	}
}

// FuzzDecode holds Decode to utiljson on any input.
func FuzzDecode(f *testing.F) {
	for _, seed := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v\n"}}`,
		`[1,-0,0.5,1e3,"\u00e9",true,false,null,{},[]]`, `{"a":1,"a":2}`, "\"\xff\"", `1e400`,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) { sameAsUtiljson(t, data) })
}

// BenchmarkDecode: a ConfigMap's data and a Pod's spec and status, by
// Decode and by utiljson.
func BenchmarkDecode(b *testing.B) {
	docs := map[string]string{
		"configmap": `{"data":{"index":"3","parent":"fanout-00042","payload":"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"}}`,
		"pod": `{"spec":{"containers":[{"name":"c","image":"registry.k8s.io/pause:3.10","resources":{"requests":{"cpu":"10m"}},` +
			`"ports":[{"containerPort":8080,"protocol":"TCP"}],"terminationMessagePath":"/dev/termination-log","imagePullPolicy":"IfNotPresent"}],` +
			`"restartPolicy":"Always","terminationGracePeriodSeconds":30,"dnsPolicy":"ClusterFirst","schedulerName":"default-scheduler",` +
			`"tolerations":[{"key":"node.kubernetes.io/not-ready","operator":"Exists","effect":"NoExecute","tolerationSeconds":300}]},` +
			`"status":{"phase":"Running","conditions":[{"type":"Ready","status":"True","lastTransitionTime":"2026-11-30T10:00:00Z"}],` +
			`"podIP":"10.0.0.7","startTime":"2026-11-30T10:00:00Z","qosClass":"Burstable"}}`,
	}
	for name, doc := range docs {
		data := []byte(doc)
		b.Run(name+"/ujson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecodeObject(data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(name+"/utiljson", func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var m map[string]any
				if err := utiljson.Unmarshal(data, &m); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
