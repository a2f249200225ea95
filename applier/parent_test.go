package applier

import (
	"context"
	"log/slog"
	"testing"

	"k8s.io/apimachinery/pkg/types"
	fakediscovery "k8s.io/client-go/discovery/fake"
	ktesting "k8s.io/client-go/testing"

	"universalcontroller.dev/uc/core/coretest"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// TestParentNotInCacheYet: a reply for a parent this replica's cache has not
// seen yet (another replica's watcher published it) is applied to the parent
// the apiserver has, not dropped as if the parent were gone.
func TestParentNotInCacheYet(t *testing.T) {
	ctl := coretest.Controller(v1alpha1.ChildUpdateInPlace)
	_, dyn := fakeParent(ctl, nil) // its UID is "uid"
	reg := registry.New(dyn, &fakediscovery.FakeDiscovery{Fake: &ktesting.Fake{}}, slog.Default())
	a := New(reg, dyn, nil, nil, Options{}, slog.Default()).rec // the cache is empty: never started

	for _, tt := range []struct {
		uid  string
		want bool
	}{{"uid", true}, {"older-uid", false}} {
		m := bus.Meta{Address: bus.Address{Controller: ctl.Name, ParentUID: types.UID(tt.uid)}, Namespace: "ns", Name: "p"}
		p, err := a.parent(context.Background(), ctl, m)
		if err != nil {
			t.Fatal(err)
		}
		if got := p != nil; got != tt.want {
			t.Errorf("reply for UID %s: parent found %v, want %v", tt.uid, got, tt.want)
		}
	}
}
