package watcher

// A fuzz target of request building. `make fuzz-smoke` (part of `make
// test`) runs it briefly, `make fuzz` for longer. Its seed corpus is the
// recorded requests of the hook contract's golden tests (testdata/*.json),
// and the crashers found are kept in testdata/fuzz/.

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/hooks"
)

// FuzzSyncRequest reads the parent, children and related objects of a
// request, builds the request again for each hook version and for a
// namespaced and a cluster-scoped parent, and checks the contract whatever
// the objects hold: the request encodes and reads back; every declared
// child kind has an entry, and only those; every object is keyed by the
// version's rule; what the request observed (its event id's input) is the
// same however often it is computed, and changes with any child's
// resourceVersion.
func FuzzSyncRequest(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*.json"))
	if err != nil || len(files) == 0 {
		f.Fatalf("no recorded requests: %v", err)
	}
	for _, name := range files {
		data, err := os.ReadFile(name)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	var ctls []*core.Controller
	for _, version := range []string{"v1", "v2"} {
		ctls = append(ctls,
			fixtureController(f, "parents", version, resource("example.com", "v1", "Parent", "parents", true), configMaps, deployments, secrets),
			fixtureController(f, "clusterparents", version, resource("example.com", "v1", "ClusterParent", "clusterparents", false), configMaps, clusterRoles))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var in struct {
			Parent     *unstructured.Unstructured `json:"parent"`
			Children   hooks.GroupedObjects       `json:"children"`
			Related    hooks.GroupedObjects       `json:"related"`
			Finalizing bool                       `json:"finalizing"`
		}
		if json.Unmarshal(data, &in) != nil || in.Parent == nil {
			return
		}
		if in.Related == nil {
			in.Related = hooks.GroupedObjects{} // as the watcher's related gives it
		}
		for _, ctl := range ctls {
			checkSyncRequest(t, ctl, in.Parent, in.Children, in.Related, in.Finalizing)
		}
	})
}

// checkSyncRequest builds the request of parent with the children of
// declared kinds, and checks it.
func checkSyncRequest(t *testing.T, ctl *core.Controller, parent *unstructured.Unstructured, children, related hooks.GroupedObjects, finalizing bool) {
	version := ctl.HookVersion(hooks.Sync)
	claimed := make([][]*unstructured.Unstructured, len(ctl.Children))
	wantKeys := map[string]map[string]bool{}
	for i, c := range ctl.Children {
		group := hooks.GroupKey(c.GVK.Kind, c.APIVersion())
		wantKeys[group] = map[string]bool{}
		for _, objs := range children {
			for _, o := range objs {
				// The informer of a child resource holds objects of its
				// kind and apiVersion only.
				if o != nil && o.GetKind() == c.GVK.Kind && o.GetAPIVersion() == c.APIVersion() {
					claimed[i] = append(claimed[i], o)
					wantKeys[group][hooks.ObjectKey(version, ctl.Parent.Namespaced, o)] = true
				}
			}
		}
	}
	req := core.NewSyncRequest(ctl, parent, claimed, related, version, finalizing)
	data, err := json.Marshal(req)
	if err != nil {
		t.Fatalf("%s %s: the request does not encode: %v", ctl.Name, version, err)
	}
	var wire struct {
		Controller, Parent map[string]any
		Children, Related  map[string]map[string]any
		Finalizing         *bool
	}
	if err := json.Unmarshal(data, &wire); err != nil {
		t.Fatalf("%s %s: the request does not read back: %v\n%s", ctl.Name, version, err, data)
	}
	if wire.Controller == nil || wire.Parent == nil || wire.Children == nil || wire.Related == nil || wire.Finalizing == nil || *wire.Finalizing != finalizing {
		t.Fatalf("%s %s: the request lacks a field:\n%s", ctl.Name, version, data)
	}
	if got, want := slices.Sorted(maps.Keys(wire.Children)), slices.Sorted(maps.Keys(wantKeys)); !slices.Equal(got, want) {
		t.Fatalf("%s %s: children groups %v, want the declared kinds %v", ctl.Name, version, got, want)
	}
	for group, keys := range wantKeys {
		if got, want := slices.Sorted(maps.Keys(wire.Children[group])), slices.Sorted(maps.Keys(keys)); !slices.Equal(got, want) {
			t.Fatalf("%s %s: children[%q] keys %q, want %q", ctl.Name, version, group, got, want)
		}
	}
	seen := observed(ctl, req)
	if again := observed(ctl, req); !bytes.Equal(seen, again) {
		t.Fatalf("%s %s: what the request observed changed between two looks: %q, then %q", ctl.Name, version, seen, again)
	}
	// A child at a new resourceVersion is a new observation.
	for group, objs := range req.Children {
		for key, o := range objs {
			newer := o.DeepCopy()
			newer.SetResourceVersion(o.GetResourceVersion() + "1")
			if newer.GetResourceVersion() == o.GetResourceVersion() {
				continue // metadata is not an object: nothing to change
			}
			objs[key] = newer
			if bytes.Equal(seen, observed(ctl, req)) {
				t.Fatalf("%s %s: %s %s at a new resourceVersion left what the request observed unchanged: %q", ctl.Name, version, group, key, seen)
			}
			objs[key] = o
		}
	}
}
