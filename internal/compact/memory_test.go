package compact

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"runtime"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	kruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	restwatch "k8s.io/client-go/rest/watch"
	"k8s.io/client-go/tools/cache"
)

// BenchmarkCacheMemory measures what an informer's cache holds per object
// of a kind, as uc's registry indexes it (by namespace and by controller
// owner): the live heap per object, unstructured (the dynamic informer's
// own form, managedFields stripped) and compact, against the object's JSON
// as the apiserver sends it. The objects are the bench's Fanouts and their
// ConfigMaps, and a Pod as kube-scheduler and kwok leave it. Each is decoded
// from JSON of its own, as the reflector does, so nothing is shared that
// would not be.
func BenchmarkCacheMemory(b *testing.B) {
	const objects = 5000
	for _, kind := range []string{"configmap", "fanout", "pod"} {
		template := testdata(b, kind+".json")
		for _, form := range []struct {
			name      string
			transform cache.TransformFunc
		}{
			{"unstructured", stripManagedFields},
			{"compact", Transform},
		} {
			b.Run(kind+"/"+form.name, func(b *testing.B) {
				var perObject, allocations, jsonBytes float64
				for b.Loop() {
					perObject, allocations, jsonBytes = fill(b, template, objects, form.transform)
				}
				b.ReportMetric(perObject, "heap-B/object")
				b.ReportMetric(allocations, "heap-allocs/object")
				b.ReportMetric(jsonBytes, "json-B/object")
				b.ReportMetric(perObject/jsonBytes, "×json")
			})
		}
	}
}

// TestCachedAllocations: a cached ConfigMap of uc's is five allocations
// (the Object, one string of the strings it alone holds, one slice of its
// labels and annotations, its owner references, the rest of its JSON) and
// the cache's key and index entries: seven, where it was twelve before
// pack, each marked by the garbage collector on every cycle.
func TestCachedAllocations(t *testing.T) {
	_, allocations, _ := fill(t, testdata(t, "configmap.json"), 5000, Transform)
	if allocations > 8 {
		t.Errorf("%.1f live allocations per cached ConfigMap, want at most 8", allocations)
	}
}

// fill caches n objects like template, each with a name, UID and owner of
// its own (five to an owner), and returns the live heap the cache holds per
// object, in bytes and in allocations (what the garbage collector marks on
// each cycle), and the mean size of their JSON.
func fill(b testing.TB, template []byte, n int, transform cache.TransformFunc) (perObject, allocations, jsonBytes float64) {
	docs := make([][]byte, n)
	size := 0
	for i := range docs {
		u := decode(b, template)
		u.SetName(fmt.Sprintf("%s-%05d", u.GetName(), i))
		u.SetUID(types.UID(fmt.Sprintf("%08d-e1f2-4a3b-8c4d-5e6f7a8b9c0d", i)))
		u.SetResourceVersion(fmt.Sprint(1000000 + i))
		if refs := u.GetOwnerReferences(); len(refs) > 0 {
			refs[0].Name = fmt.Sprintf("%s-%05d", refs[0].Name, i/5)
			refs[0].UID = types.UID(fmt.Sprintf("%08d-0000-4a3b-8c4d-5e6f7a8b9c0d", i/5))
			u.SetOwnerReferences(refs)
		}
		data, err := json.Marshal(u)
		if err != nil {
			b.Fatal(err)
		}
		docs[i] = data
		size += len(data)
	}
	before, beforeAllocs := liveHeap()
	store := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{
		cache.NamespaceIndex: cache.MetaNamespaceIndexFunc,
		"owner":              byOwner,
	})
	for _, data := range docs {
		obj, err := transform(decode(b, data))
		if err != nil {
			b.Fatal(err)
		}
		if err := store.Add(obj); err != nil {
			b.Fatal(err)
		}
	}
	after, afterAllocs := liveHeap()
	held, heldAllocs := after-before, afterAllocs-beforeAllocs // the documents are still held, as before
	runtime.KeepAlive(docs)
	runtime.KeepAlive(store)
	return float64(held) / float64(n), float64(heldAllocs) / float64(n), float64(size) / float64(n)
}

// byOwner indexes an object by its controller's UID, as the registry does.
func byOwner(obj any) ([]string, error) {
	if ref := metav1.GetControllerOfNoCopy(obj.(metav1.Object)); ref != nil {
		return []string{string(ref.UID)}, nil
	}
	return nil, nil
}

func stripManagedFields(obj any) (any, error) {
	obj.(*unstructured.Unstructured).SetManagedFields(nil)
	return obj, nil
}

// liveHeap is the bytes and the allocations live on the heap.
func liveHeap() (bytes, allocations int64) {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return int64(m.HeapAlloc), int64(m.HeapObjects)
}

// BenchmarkDecode measures what reading a whole cached object costs, per
// kind: a compact Object decoded, against its unstructured form deep-copied
// (what a reader that may change the object pays with an unstructured
// cache).
func BenchmarkDecode(b *testing.B) {
	for _, kind := range []string{"configmap", "fanout", "pod"} {
		u := decode(b, testdata(b, kind+".json"))
		u.SetManagedFields(nil)
		o, err := New(u)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(kind+"/compact", func(b *testing.B) {
			for b.Loop() {
				if _, err := o.Unstructured(); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind+"/deepcopy", func(b *testing.B) {
			for b.Loop() {
				_ = u.DeepCopy()
			}
		})
	}
}

// BenchmarkReceive measures what taking an object into a cache costs, per
// kind, from the JSON the apiserver sent: decoded straight into an Object
// (a Source's informers), against decoded into unstructured maps and made
// compact (a dynamic informer with Transform).
func BenchmarkReceive(b *testing.B) {
	for _, kind := range []string{"configmap", "fanout", "pod"} {
		data := testdata(b, kind+".json")
		b.Run(kind+"/source", func(b *testing.B) {
			for b.Loop() {
				if _, err := kruntime.Decode(codec{}, data); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(kind+"/dynamic", func(b *testing.B) {
			for b.Loop() {
				obj, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := Transform(obj); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkWatch measures what taking one watch event of an object in
// costs, per kind, as a Source's informer reads its watch stream: the
// event framed out of the stream, its envelope decoded, its object decoded
// into an Object.
func BenchmarkWatch(b *testing.B) {
	for _, kind := range []string{"configmap", "fanout", "pod"} {
		var stream bytes.Buffer
		const events = 1000
		for range events {
			stream.WriteString(`{"type":"MODIFIED","object":`)
			if err := json.Compact(&stream, testdata(b, kind+".json")); err != nil {
				b.Fatal(err)
			}
			stream.WriteString("}\n")
		}
		serializer := negotiated{}.SupportedMediaTypes()[0].StreamSerializer
		b.Run(kind, func(b *testing.B) {
			b.SetBytes(int64(stream.Len() / events))
			var d *restwatch.Decoder
			n := events
			for b.Loop() {
				if n == events {
					frames := serializer.Framer.NewFrameReader(io.NopCloser(bytes.NewReader(stream.Bytes())))
					d, n = restwatch.NewDecoder(streaming.NewDecoder(frames, serializer.Serializer), codec{}), 0
				}
				if _, _, err := d.Decode(); err != nil {
					b.Fatal(err)
				}
				n++
			}
		})
	}
}
