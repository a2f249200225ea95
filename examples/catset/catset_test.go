package catset

import (
	"context"
	"slices"
	"testing"

	"universalcontroller.dev/uc/sdk/go/hook"
)

func catsetParent(replicas int64) hook.Object {
	return hook.Object{
		"apiVersion": "catset.examples.universalcontroller.dev/v1", "kind": "CatSet",
		"metadata": map[string]any{"name": "web", "namespace": "ns"},
		"spec": map[string]any{
			"replicas": replicas,
			"selector": map[string]any{"matchLabels": map[string]any{"app": "web"}},
			"template": map[string]any{
				"metadata": map[string]any{"labels": map[string]any{"app": "web"}},
				"spec":     map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}},
			},
			"volumeClaimTemplates": []any{map[string]any{"metadata": map[string]any{"name": "www"}}},
		},
	}
}

// observed makes a request with the named Pods (ready or not) and PVCs.
func observed(replicas int64, pods map[string]bool, pvcs ...string) *hook.SyncRequest {
	children := hook.GroupedObjects{podsKey: hook.ObjectMap{}, pvcsKey: hook.ObjectMap{}}
	for name, isReady := range pods {
		status := "False"
		if isReady {
			status = "True"
		}
		children[podsKey][name] = hook.Object{
			"metadata": map[string]any{"name": name},
			"status":   map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": status}}},
		}
	}
	for _, name := range pvcs {
		children[pvcsKey][name] = hook.Object{"metadata": map[string]any{"name": name}}
	}
	return &hook.SyncRequest{Parent: catsetParent(replicas), Children: children}
}

// names are the names of the children of one kind.
func names(t *testing.T, resp *hook.SyncResponse, kind string) []string {
	var out []string
	for _, c := range resp.Children {
		obj, err := hook.ObjectOf(c)
		if err != nil {
			t.Fatal(err)
		}
		if obj.GetKind() == kind {
			out = append(out, obj.GetName())
		}
	}
	return out
}

func TestSync(t *testing.T) {
	tests := []struct {
		name       string
		req        *hook.SyncRequest
		finalize   bool
		pods, pvcs []string
		finalized  bool
	}{
		{name: "the first Pod comes alone", req: observed(3, nil),
			pods: []string{"web-0"}, pvcs: []string{"www-web-0"}},
		{name: "the next Pod waits for the ones before it to be Ready", req: observed(3, map[string]bool{"web-0": false}, "www-web-0"),
			pods: []string{"web-0"}, pvcs: []string{"www-web-0"}},
		{name: "Pods are listed highest ordinal first", req: observed(3, map[string]bool{"web-0": true, "web-1": true}, "www-web-0", "www-web-1"),
			pods: []string{"web-2", "web-1", "web-0"}, pvcs: []string{"www-web-0", "www-web-1", "www-web-2"}},
		{name: "scale-down removes the highest Pod first and keeps PVCs", req: observed(1, map[string]bool{"web-0": true, "web-1": true, "web-2": true}, "www-web-0", "www-web-1", "www-web-2"),
			pods: []string{"web-1", "web-0"}, pvcs: []string{"www-web-0", "www-web-1", "www-web-2"}},
		{name: "finalize scales to zero from the top", req: observed(2, map[string]bool{"web-0": true, "web-1": true}, "www-web-0", "www-web-1"), finalize: true,
			pods: []string{"web-0"}, pvcs: []string{"www-web-0", "www-web-1"}},
		{name: "finalized once no Pod is left", req: observed(2, nil, "www-web-0"), finalize: true,
			pvcs: []string{"www-web-0"}, finalized: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fn := Sync
			if tt.finalize {
				fn = Finalize
			}
			resp, err := fn(context.Background(), tt.req)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(t, resp, "Pod"); !slices.Equal(got, tt.pods) {
				t.Errorf("pods %v, want %v", got, tt.pods)
			}
			if got := names(t, resp, "PersistentVolumeClaim"); !slices.Equal(got, tt.pvcs) {
				t.Errorf("pvcs %v, want %v", got, tt.pvcs)
			}
			if resp.Finalized != tt.finalized {
				t.Errorf("finalized %v, want %v", resp.Finalized, tt.finalized)
			}
		})
	}
}
