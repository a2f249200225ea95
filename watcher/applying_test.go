package watcher

import (
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
)

// fakeCache is an objectCache of ConfigMaps.
type fakeCache struct {
	objects  map[string]*unstructured.Unstructured // by name
	lastSync string
}

func (c fakeCache) Object(gvr schema.GroupVersionResource, namespace, name string) (*unstructured.Unstructured, error) {
	if obj, ok := c.objects[name]; ok && gvr == configMaps.GVR {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func (c fakeCache) LastSyncResourceVersion(schema.GroupVersionResource) string { return c.lastSync }

func configMap(name, uid, rv string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap"}}
	u.SetName(name)
	u.SetNamespace("ns")
	u.SetUID(types.UID(uid))
	u.SetResourceVersion(rv)
	return u
}

func terminating(u *unstructured.Unstructured) *unstructured.Unstructured {
	now := metav1.Now()
	u.SetDeletionTimestamp(&now)
	u.SetFinalizers([]string{"example.com/wait"})
	return u
}

func TestWritesSeen(t *testing.T) {
	written := func(name, rv string) bus.Written {
		return bus.Written{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: name, ResourceVersion: rv}
	}
	deleted := func(name, uid string) bus.Written {
		return bus.Written{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: name, Deleted: uid}
	}
	cache := fakeCache{lastSync: "120", objects: map[string]*unstructured.Unstructured{
		"a": configMap("a", "uid-a", "100"),
		"b": configMap("b", "uid-b", "110"),
	}}
	for _, tc := range []struct {
		name  string
		cache fakeCache
		wrote []bus.Written
		want  bool
	}{
		{"nothing written", cache, nil, true},
		{"at the written version", cache, []bus.Written{written("a", "100")}, true},
		{"past the written version", cache, []bus.Written{written("a", "90"), written("b", "105")}, true},
		{"one not yet seen", cache, []bus.Written{written("a", "100"), written("b", "111")}, false},
		{"created, not yet seen", fakeCache{lastSync: "99"}, []bus.Written{written("c", "100")}, false},
		{"created, then deleted", fakeCache{lastSync: "120"}, []bus.Written{written("c", "100")}, true},
		{"deleted, still cached", cache, []bus.Written{deleted("a", "uid-a")}, false},
		{"deleted, cached being deleted (finalizers)", fakeCache{objects: map[string]*unstructured.Unstructured{"a": terminating(configMap("a", "uid-a", "100"))}}, []bus.Written{deleted("a", "uid-a")}, true},
		{"deleted, gone", cache, []bus.Written{deleted("c", "uid-c")}, true},
		{"deleted, replaced by another object", cache, []bus.Written{deleted("a", "uid-old")}, true},
		{"a resource not watched", cache, []bus.Written{{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "d", ResourceVersion: "999"}}, true},
		{"a resourceVersion that does not parse", fakeCache{objects: map[string]*unstructured.Unstructured{"a": configMap("a", "uid-a", "x")}}, []bus.Written{written("a", "y")}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			watched := func(gvr schema.GroupVersionResource) bool { return gvr == configMaps.GVR }
			if got := writesSeen(tc.cache, tc.wrote, watched); got != tc.want {
				t.Errorf("writesSeen = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestWatches(t *testing.T) {
	ctl := fixtureController(t, "ctl", "v1", deployments, configMaps)
	deco := fixtureDecorator(t, "v1", deployments, secrets)
	for _, tc := range []struct {
		name string
		ctl  bool
		res  registry.Resource
		want bool
	}{
		{"a controller's parents", true, deployments, true},
		{"a controller's children", true, configMaps, true},
		{"another resource", true, secrets, false},
		{"a decorator's objects", false, deployments, true},
		{"a decorator's attachments", false, secrets, true},
		{"not a decorator's", false, configMaps, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := deco
			if tc.ctl {
				c = ctl
			}
			if got := watches(c, tc.res.GVR); got != tc.want {
				t.Errorf("watches(%s) = %v, want %v", tc.res.GVR, got, tc.want)
			}
		})
	}
}

// TestHolds follows a parent's syncs through an apply: held back while it
// runs, and after it until the caches saw its writes, or until the hold's
// deadline.
func TestHolds(t *testing.T) {
	key := parentKey{Controller: "ctl", Namespace: "ns", Name: "p"}
	resync := key
	resync.Resync = true
	wrote := []bus.Written{{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: "c", ResourceVersion: "7"}}
	var cacheSaw bool
	seen := func(controller string, w []bus.Written) bool { return len(w) == 0 || cacheSaw }
	t0 := time.Unix(1000, 0)

	t.Run("no apply: nothing held", func(t *testing.T) {
		var hs holds
		if _, _, held := hs.held(key, t0, seen); held {
			t.Fatal("held without an apply")
		}
	})
	t.Run("held during the apply, then until its writes are seen", func(t *testing.T) {
		var hs holds
		cacheSaw = false
		hs.start(key, t0)
		sync, after, held := hs.held(resync, t0.Add(time.Second), seen)
		if !held || after != maxApplyHold-time.Second || sync != resync {
			t.Fatalf("during the apply: held %v, again as %+v after %s", held, sync, after)
		}
		if _, ok := hs.end(key, wrote, t0.Add(2*time.Second), seen); ok {
			t.Fatal("released before the cache saw the writes")
		}
		if _, after, held := hs.held(key, t0.Add(3*time.Second), seen); !held || after != maxWriteLag-time.Second {
			t.Fatalf("after the apply, writes not seen: held %v after %s", held, after)
		}
		cacheSaw = true
		sync, after, held = hs.held(key, t0.Add(4*time.Second), seen)
		if !held || after != 0 || sync != resync {
			t.Fatalf("writes seen: held %v, again as %+v after %s; want at once, as a resync", held, sync, after)
		}
		if _, _, held := hs.held(key, t0.Add(4*time.Second), seen); held {
			t.Fatal("still held once released")
		}
	})
	t.Run("an apply whose writes are already seen ends the hold at once", func(t *testing.T) {
		var hs holds
		cacheSaw = true
		hs.start(key, t0)
		if _, ok := hs.end(key, wrote, t0, seen); ok {
			t.Fatal("a sync released that was never held back")
		}
		hs.start(key, t0)
		hs.held(key, t0, seen)
		if sync, ok := hs.end(key, wrote, t0, seen); !ok || sync != key {
			t.Fatalf("the held sync: %+v, %v", sync, ok)
		}
		if _, _, held := hs.held(key, t0, seen); held {
			t.Fatal("still held")
		}
	})
	t.Run("a sync held back by an apply stays held back by the next apply", func(t *testing.T) {
		var hs holds
		cacheSaw = false
		hs.start(key, t0)
		hs.end(key, wrote, t0, seen)
		hs.held(resync, t0.Add(time.Second), seen)
		hs.start(key, t0.Add(2*time.Second))
		sync, ok := hs.end(key, nil, t0.Add(3*time.Second), seen)
		if !ok || sync != resync {
			t.Fatalf("the held resync: %+v, %v", sync, ok)
		}
	})
	t.Run("writes never seen: the hold ends at its deadline", func(t *testing.T) {
		var hs holds
		cacheSaw = false
		hs.start(key, t0)
		hs.end(key, wrote, t0, seen)
		if _, _, held := hs.held(key, t0.Add(maxWriteLag+time.Millisecond), seen); held {
			t.Fatal("held past maxWriteLag")
		}
	})
	t.Run("an apply that never ends: the hold ends at its deadline", func(t *testing.T) {
		var hs holds
		hs.start(key, t0)
		if _, _, held := hs.held(key, t0.Add(maxApplyHold+time.Millisecond), seen); held {
			t.Fatal("held past maxApplyHold")
		}
	})
	t.Run("an end whose start was not heard waits for its writes", func(t *testing.T) {
		var hs holds
		cacheSaw = false
		if _, ok := hs.end(key, nil, t0, seen); ok {
			t.Fatal("released a sync never held")
		}
		if _, _, held := hs.held(key, t0, seen); held {
			t.Fatal("an end without writes holds")
		}
		hs.end(key, wrote, t0, seen)
		if _, _, held := hs.held(key, t0, seen); !held {
			t.Fatal("an end with writes not yet seen does not hold")
		}
	})
}
