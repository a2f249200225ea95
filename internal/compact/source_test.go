package compact

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// TestFromJSON: an object decoded straight from JSON is the one the
// dynamic client's decoding made compact gives, with every field.
func TestFromJSON(t *testing.T) {
	for _, name := range []string{"configmap.json", "fanout.json", "pod.json"} {
		t.Run(name, func(t *testing.T) {
			data := testdata(t, name)
			if diff, direct := fromJSONViaMaps(t, data); diff != "" {
				t.Errorf("(-via maps +direct):\n%s", diff)
			} else if direct.ManagedFields != nil {
				t.Error("managedFields kept")
			}
		})
	}
}

// fromJSONViaMaps decodes data straight into an Object, and tells how it
// differs from the dynamic client's decoding of it made compact.
func fromJSONViaMaps(t *testing.T, data []byte) (string, *Object) {
	t.Helper()
	direct, err := FromJSON(data)
	if err != nil {
		t.Fatalf("%s: %v", data, err)
	}
	viaMaps, err := New(decode(t, data))
	if err != nil {
		t.Fatal(err)
	}
	got, err := direct.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	want, err := viaMaps.Unstructured()
	if err != nil {
		t.Fatal(err)
	}
	return cmp.Diff(want.Object, got.Object), direct
}

// TestFromJSONRandom: objects whose other fields are random values (strings
// with quotes, escapes and brackets; fields the metadata does not know;
// indented or not) decode straight from JSON as through the dynamic
// client's decoding made compact.
func TestFromJSONRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for i := range 1000 {
		obj := map[string]any{"apiVersion": "example.com/v1", "kind": "Thing"}
		meta := map[string]any{"name": randomString(r), "namespace": "ns", "resourceVersion": "7"}
		for range r.IntN(3) {
			meta[randomString(r)] = randomValue(r, 2) // unknown to ObjectMeta: dropped
		}
		if r.IntN(2) == 0 {
			meta["labels"] = map[string]any{randomString(r): randomString(r)}
		}
		obj["metadata"] = meta
		for range r.IntN(5) {
			obj["f"+randomString(r)] = randomValue(r, 3)
		}
		data, err := json.Marshal(obj)
		if i%3 == 0 {
			data, err = json.MarshalIndent(obj, " ", "\t")
		}
		if err != nil {
			t.Fatal(err)
		}
		if diff, _ := fromJSONViaMaps(t, data); diff != "" {
			t.Fatalf("%s (-via maps +direct):\n%s", data, diff)
		}
	}
}

// TestCodec decodes what an apiserver answers a Source: a list, a watch
// event, an object, the Status of a refusal, and JSON that is none.
func TestCodec(t *testing.T) {
	cm := string(testdata(t, "configmap.json"))
	list := `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"42","continue":"c"},"items":[` + cm + `,` + cm + `]}`
	var c codec
	t.Run("list", func(t *testing.T) {
		into := &List{}
		out, gvk, err := c.Decode([]byte(list), nil, into)
		if err != nil || out != into || gvk.Kind != "ConfigMapList" {
			t.Fatalf("got %v, %v, %v", out, gvk, err)
		}
		if into.ResourceVersion != "42" || into.Continue != "c" || len(into.Items) != 2 || into.Items[1].Name == "" {
			t.Errorf("got %+v", into)
		}
	})
	t.Run("watch event, then its object", func(t *testing.T) {
		event := &metav1.WatchEvent{}
		if _, _, err := c.Decode([]byte(`{"type":"ADDED","object":`+cm+`}`), nil, event); err != nil || event.Type != "ADDED" {
			t.Fatalf("got %+v, %v", event, err)
		}
		obj, err := runtime.Decode(c, event.Object.Raw)
		if o, ok := obj.(*Object); err != nil || !ok || o.Kind != "ConfigMap" || !o.Contains(`"data"`) {
			t.Errorf("got %#v, %v", obj, err)
		}
	})
	t.Run("status", func(t *testing.T) {
		obj, err := runtime.Decode(c, []byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Gone","code":410,"message":"too old"}`))
		if !apierrors.IsResourceExpired(apierrors.FromObject(obj)) && !apierrors.IsGone(apierrors.FromObject(obj)) {
			t.Errorf("got %#v, %v", obj, err)
		}
	})
	t.Run("watch event of a null object, then one of another type", func(t *testing.T) {
		event := &metav1.WatchEvent{}
		if _, _, err := c.Decode([]byte(`{"type":"BOOKMARK","object":null}`), nil, event); err != nil || event.Type != "BOOKMARK" || event.Object.Raw != nil {
			t.Fatalf("got %+v, %v", event, err)
		}
		if _, _, err := c.Decode([]byte(`{"type":3,"object":{}}`), nil, event); err == nil {
			t.Fatalf("a type that is not a string decoded as %+v", event)
		}
	})
	t.Run("empty list", func(t *testing.T) {
		into := &List{}
		if _, _, err := c.Decode([]byte(`{"kind":"ConfigMapList","apiVersion":"v1","metadata":{},"items":null}`), nil, into); err != nil || len(into.Items) != 0 {
			t.Fatalf("got %+v, %v", into, err)
		}
	})
	for _, bad := range []string{`null`, `[]`, `{"metadata":3}`, `{"kind":3}`, `{"kind":"ConfigMapList","items":{}}`, `{"kind":"ConfigMapList","items":[{},]}`,
		`{"kind":"ConfigMapList","items":[{}`, `{"kind":"ConfigMapList","items":[3]}`, `{`, `{"a":1,}`, `{"metadata":{"name":"x"`} {
		t.Run("bad "+bad, func(t *testing.T) {
			if obj, err := runtime.Decode(c, []byte(bad)); err == nil {
				t.Errorf("decoded %#v", obj)
			}
		})
	}
}

// TestSourceInformer runs an informer of a Source against an apiserver
// that lists two ConfigMaps and then watches one change: its cache holds
// Objects, the change applied, and the requests carry the tweaked options.
func TestSourceInformer(t *testing.T) {
	cm := func(name, rv string) string {
		return fmt.Sprintf(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":%q,"namespace":"ns","resourceVersion":%q},"data":{"v":%q}}`, name, rv, rv)
	}
	selectors := make(chan string, 10)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/configmaps" {
			http.NotFound(w, r)
			return
		}
		selectors <- r.URL.Query().Get("labelSelector")
		w.Header().Set("Content-Type", "application/json")
		q := r.URL.Query()
		switch {
		case q.Get("watch") == "true" && q.Get("sendInitialEvents") == "true":
			// Streaming lists are not served: the informer lists.
			w.WriteHeader(http.StatusBadRequest)
			fmt.Fprint(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"BadRequest","code":400,"message":"no"}`)
		case q.Get("watch") == "true":
			fmt.Fprintf(w, `{"type":"MODIFIED","object":%s}`+"\n", cm("b", "12"))
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		default:
			fmt.Fprintf(w, `{"kind":"ConfigMapList","apiVersion":"v1","metadata":{"resourceVersion":"11"},"items":[%s,%s]}`, cm("a", "10"), cm("b", "11"))
		}
	}))
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL}
	httpClient, err := rest.HTTPClientFor(cfg)
	if err != nil {
		t.Fatal(err)
	}
	source, err := NewSource(cfg, httpClient)
	if err != nil {
		t.Fatal(err)
	}
	inf := source.Informer(schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		func(o *metav1.ListOptions) { o.LabelSelector = "x=y" }, cache.Indexers{})
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	for {
		obj, ok, err := inf.GetStore().GetByKey("ns/b")
		if err != nil {
			t.Fatal(err)
		}
		if ok && obj.(*Object).ResourceVersion == "12" && len(inf.GetStore().List()) == 2 {
			if !obj.(*Object).Contains(`"v":"12"`) {
				t.Errorf("b holds %s", obj.(*Object).rest)
			}
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("the cache never held a and b at 12: %v", inf.GetStore().ListKeys())
		case <-time.After(10 * time.Millisecond):
		}
	}
	cancel()
	for len(selectors) > 0 {
		if sel := <-selectors; sel != "x=y" {
			t.Errorf("a request selected %q, want x=y", sel)
		}
	}
}
