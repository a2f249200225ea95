package watcher

import (
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
