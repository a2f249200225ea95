package render

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestClusterReadOnly: render's clients list and get, and any write is
// refused before it reaches the apiserver.
func TestClusterReadOnly(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Method+" "+r.URL.Path)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, `{"apiVersion": "v1", "kind": "ConfigMapList", "metadata": {}, "items": [
			{"metadata": {"name": "a", "namespace": "ns", "managedFields": [{"manager": "kubectl"}]}}]}`)
	}))
	defer srv.Close()
	kubeconfig := writeFile(t, "kubeconfig", fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: %q}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
users: [{name: u, user: {token: t}}]
current-context: c
`, srv.URL))
	c, err := connect(kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	cms := schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}
	objs, err := c.list(t.Context(), cms, "ns")
	if err != nil || len(objs) != 1 || objs[0].GetName() != "a" || objs[0].GetKind() != "ConfigMap" || objs[0].GetManagedFields() != nil {
		t.Fatalf("listed %v, %v", objs, err)
	}
	cm := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "b"}}}
	writes := map[string]error{}
	_, writes["create"] = c.dyn.Resource(cms).Namespace("ns").Create(t.Context(), cm, metav1.CreateOptions{})
	_, writes["apply"] = c.dyn.Resource(cms).Namespace("ns").Apply(t.Context(), "b", cm, metav1.ApplyOptions{FieldManager: "x"})
	writes["delete"] = c.kube.CoreV1().ConfigMaps("ns").Delete(t.Context(), "a", metav1.DeleteOptions{})
	for verb, err := range writes {
		if err == nil || !strings.Contains(err.Error(), "uc render only reads the cluster") {
			t.Errorf("%s: %v, want it refused", verb, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 1 || seen[0] != "GET /api/v1/namespaces/ns/configmaps" {
		t.Errorf("the apiserver saw %v, want the list alone", seen)
	}
}
