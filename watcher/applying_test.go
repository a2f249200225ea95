package watcher

import (
	"log/slog"
	"reflect"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
)

// fakeCache is an objectCache of ConfigMaps.
type fakeCache struct {
	objects  map[string]*unstructured.Unstructured // by name
	lastSync string                                // the version the handlers were given
}

func (c fakeCache) Meta(gvr schema.GroupVersionResource, namespace, name string) (metav1.Object, error) {
	if obj, ok := c.objects[name]; ok && gvr == configMaps.GVR {
		return obj, nil
	}
	return nil, apierrors.NewNotFound(gvr.GroupResource(), name)
}

func (c fakeCache) HandledVersion(schema.GroupVersionResource) string { return c.lastSync }

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

func TestWritesBehind(t *testing.T) {
	written := func(name, rv string) bus.Written {
		return bus.Written{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: name, ResourceVersion: rv}
	}
	watched := func(gvr schema.GroupVersionResource) bool { return gvr == configMaps.GVR }
	for _, tc := range []struct {
		name     string
		lastSync string
		wrote    []bus.Written
		want     bool
	}{
		{"nothing written", "100", nil, false},
		{"heard of every write", "120", []bus.Written{written("a", "100"), written("b", "120")}, false},
		{"one write later than the informer", "110", []bus.Written{written("a", "100"), written("b", "111")}, true},
		{"a delete", "90", []bus.Written{{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: "a", Deleted: "uid-a"}}, false},
		{"a resource not watched", "90", []bus.Written{{Group: "apps", Version: "v1", Resource: "deployments", Namespace: "ns", Name: "d", ResourceVersion: "999"}}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := writesBehind(fakeCache{lastSync: tc.lastSync}, tc.wrote, watched); got != tc.want {
				t.Errorf("writesBehind = %v, want %v", got, tc.want)
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
		res  core.Resource
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

// queued records the syncs a writeWaits queues.
type queued struct{ syncs []queuedSync }

// queuedSync is a sync queued: of key, a resync if resync.
type queuedSync struct {
	key    parentKey
	resync bool
}

func (q *queued) sync(key parentKey, resync bool, _ time.Duration) {
	q.syncs = append(q.syncs, queuedSync{key, resync})
}

// TestWriteWaits follows a parent's syncs through an apply: deferred while
// it runs, and after it until the caches saw its writes, or until the
// wait's deadline; a sync deferred is queued once when the wait ends.
func TestWriteWaits(t *testing.T) {
	key := parentKey{Controller: "ctl", Namespace: "ns", Name: "p"}
	plain, resync := queuedSync{key, false}, queuedSync{key, true}
	wrote := []bus.Written{{Version: "v1", Resource: "configmaps", Namespace: "ns", Name: "c", ResourceVersion: "7"}}
	var cacheSaw, cacheBehind bool
	seen := func(controller string, w []bus.Written) bool { return len(w) == 0 || cacheSaw }
	behind := func(controller string, w []bus.Written) bool { return len(w) > 0 && cacheBehind }
	t0 := time.Unix(1000, 0)
	newWaits := func() (*writeWaits, *queued) {
		q := &queued{}
		cacheSaw, cacheBehind = false, false
		return &writeWaits{sync: q.sync, behind: behind, unseen: func(string, []bus.Written) []any { return nil }, log: slog.New(slog.DiscardHandler)}, q
	}
	// deferredSync has an apply to the parent end at t0, with wrote, and a
	// sync deferred 1 s later: the wait it returns is for the writes.
	deferredSync := func(ws *writeWaits) *writeWait {
		ws.start(key, t0)
		ws.end(key, wrote, t0, seen)
		ws.awaiting(key, false, t0.Add(time.Second), seen)
		return ws.byKey[key]
	}
	want := func(t *testing.T, q *queued, syncs ...queuedSync) {
		t.Helper()
		if !reflect.DeepEqual(q.syncs, syncs) {
			t.Fatalf("syncs queued %+v, want %+v", q.syncs, syncs)
		}
	}

	t.Run("no apply: no wait", func(t *testing.T) {
		ws, q := newWaits()
		if ws.awaiting(key, false, t0, seen) {
			t.Fatal("waits without an apply")
		}
		want(t, q)
	})
	t.Run("waits during the apply, then until its writes are seen", func(t *testing.T) {
		ws, q := newWaits()
		cacheSaw = false
		ws.start(key, t0)
		if !ws.awaiting(key, true, t0.Add(time.Second), seen) {
			t.Fatal("no wait during the apply")
		}
		ws.end(key, wrote, t0.Add(2*time.Second), seen)
		want(t, q)
		if !ws.awaiting(key, false, t0.Add(3*time.Second), seen) {
			t.Fatal("no wait until the writes are seen")
		}
		want(t, q)
		cacheSaw = true
		if !ws.awaiting(key, false, t0.Add(4*time.Second), seen) {
			t.Fatal("the sync that sees the writes goes ahead; want it queued once, as the deferred resync")
		}
		want(t, q, resync)
		if ws.awaiting(key, false, t0.Add(4*time.Second), seen) {
			t.Fatal("still waits once released")
		}
	})
	t.Run("an apply whose writes are already seen ends the wait at once", func(t *testing.T) {
		ws, q := newWaits()
		cacheSaw = true
		ws.start(key, t0)
		ws.end(key, wrote, t0, seen)
		want(t, q) // no sync was deferred
		ws.start(key, t0)
		ws.awaiting(key, false, t0, seen)
		ws.end(key, wrote, t0, seen)
		want(t, q, plain)
		if ws.awaiting(key, false, t0, seen) {
			t.Fatal("still waits")
		}
	})
	t.Run("a sync deferred by an apply stays deferred by the next apply", func(t *testing.T) {
		ws, q := newWaits()
		cacheSaw = false
		ws.start(key, t0)
		ws.end(key, wrote, t0, seen)
		ws.awaiting(key, true, t0.Add(time.Second), seen)
		ws.start(key, t0.Add(2*time.Second))
		ws.end(key, nil, t0.Add(3*time.Second), seen)
		want(t, q, resync)
	})
	t.Run("writes never seen: the wait ends at its deadline, with the sync deferred", func(t *testing.T) {
		ws, q := newWaits()
		cacheSaw = false
		h := deferredSync(ws)
		if h.until != t0.Add(maxWriteLag) {
			t.Fatalf("the wait ends at %s, want %s", h.until, t0.Add(maxWriteLag))
		}
		ws.expire(key, h, h.until)
		want(t, q, plain)
		if ws.awaiting(key, false, t0.Add(time.Second), seen) {
			t.Fatal("waits past its deadline")
		}
	})
	t.Run("an informer behind the writes: the wait goes on, up to maxWriteLagBehind", func(t *testing.T) {
		ws, q := newWaits()
		cacheBehind = true
		h := deferredSync(ws)
		for h.until.Before(t0.Add(maxWriteLagBehind)) {
			at := h.until
			ws.expire(key, h, at)
			want(t, q)
			if !ws.awaiting(key, false, at.Add(time.Millisecond), seen) {
				t.Fatalf("the wait ended at %s with the informer behind", at.Sub(t0))
			}
			if !h.until.After(at) {
				t.Fatalf("the wait was not extended at %s", at.Sub(t0))
			}
		}
		if h.until != t0.Add(maxWriteLagBehind) {
			t.Fatalf("the wait ends %s after the apply, want %s", h.until.Sub(t0), maxWriteLagBehind)
		}
		ws.expire(key, h, h.until)
		want(t, q, plain)
	})
	t.Run("an informer past the writes: the wait ends at its deadline", func(t *testing.T) {
		ws, q := newWaits()
		cacheBehind = true
		h := deferredSync(ws)
		ws.expire(key, h, h.until)
		want(t, q)
		cacheBehind = false
		ws.expire(key, h, h.until)
		want(t, q, plain)
	})
	t.Run("an apply that never ends: the wait ends at its deadline", func(t *testing.T) {
		ws, q := newWaits()
		ws.start(key, t0)
		if ws.awaiting(key, false, t0.Add(maxApplyWait+time.Millisecond), seen) {
			t.Fatal("waits past maxApplyWait")
		}
		ws.expire(key, &writeWait{}, t0) // a deadline of a wait no longer the parent's
		want(t, q)
	})
	t.Run("an end whose start was not heard waits for its writes", func(t *testing.T) {
		ws, _ := newWaits()
		cacheSaw = false
		ws.end(key, nil, t0, seen)
		if ws.awaiting(key, false, t0, seen) {
			t.Fatal("an end without writes waits")
		}
		ws.end(key, wrote, t0, seen)
		if !ws.awaiting(key, false, t0, seen) {
			t.Fatal("an end with writes not yet seen does not wait")
		}
	})
}

// countingHandler counts the events it is given.
type countingHandler struct{ events *int }

func (h countingHandler) OnAdd(any, bool)   { *h.events++ }
func (h countingHandler) OnUpdate(any, any) { *h.events++ }
func (h countingHandler) OnDelete(any)      { *h.events++ }

// TestHandledVersions: the handler of an informer notes the latest
// resourceVersion it was given, per resource, tombstones included, and
// hands every event on.
func TestHandledVersions(t *testing.T) {
	var handled handledVersions
	events := 0
	h := noting{next: countingHandler{&events}, gvr: configMaps.GVR, handled: &handled}
	if got := handled.HandledVersion(configMaps.GVR); got != "" {
		t.Fatalf("before any event: %q", got)
	}
	h.OnAdd(configMap("a", "uid-a", "5"), true)
	h.OnUpdate(configMap("a", "uid-a", "5"), configMap("a", "uid-a", "9"))
	h.OnDelete(cache.DeletedFinalStateUnknown{Key: "ns/b", Obj: configMap("b", "uid-b", "12")})
	h.OnAdd(configMap("c", "uid-c", "7"), false) // an older version does not go back
	h.OnAdd(configMap("d", "uid-d", "not-a-number"), false)
	if got := handled.HandledVersion(configMaps.GVR); got != "12" {
		t.Errorf("handled version %q, want 12", got)
	}
	if got := handled.HandledVersion(secrets.GVR); got != "" {
		t.Errorf("another resource: %q, want none", got)
	}
	if events != 5 {
		t.Errorf("%d events handed on, want 5", events)
	}
}
