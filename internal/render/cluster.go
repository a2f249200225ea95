package render

import (
	"context"
	"fmt"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"
	"k8s.io/client-go/tools/clientcmd"
)

// cluster reads a cluster, and nothing else: its clients' transport
// refuses any request but a GET before it leaves the process, so render
// lists and gets, and cannot write, whatever code runs on it.
type cluster struct {
	mapper meta.RESTMapper
	kube   kubernetes.Interface
	dyn    dynamic.Interface
}

// connect reads the cluster of a kubeconfig file, read-only.
func connect(kubeconfig string) (*cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err == nil {
		var c *cluster
		if c, err = readCluster(cfg); err == nil {
			return c, nil
		}
	}
	return nil, fmt.Errorf("--kubeconfig: %w", err)
}

// readCluster reads the cluster of cfg, read-only.
func readCluster(cfg *rest.Config) (*cluster, error) {
	cfg = rest.CopyConfig(cfg)
	cfg.Wrap(func(next http.RoundTripper) http.RoundTripper { return readOnly{next} })
	c := &cluster{}
	var err error
	if c.kube, err = kubernetes.NewForConfig(cfg); err != nil {
		return nil, err
	}
	if c.dyn, err = dynamic.NewForConfig(cfg); err != nil {
		return nil, err
	}
	c.mapper = restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(c.kube.Discovery()))
	return c, nil
}

// readOnly lets GET requests through, and refuses any other.
type readOnly struct{ next http.RoundTripper }

func (t readOnly) RoundTrip(r *http.Request) (*http.Response, error) {
	if r.Method != http.MethodGet {
		return nil, fmt.Errorf("uc render only reads the cluster: %s %s refused", r.Method, r.URL.Path)
	}
	return t.next.RoundTrip(r)
}

// list lists the objects of a resource in a namespace ("" for all), as
// uc's caches hold them: without managedFields.
func (c *cluster) list(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]*unstructured.Unstructured, error) {
	l, err := c.dyn.Resource(gvr).Namespace(namespace).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", gvr.GroupResource(), err)
	}
	out := make([]*unstructured.Unstructured, len(l.Items))
	for i := range l.Items {
		out[i] = &l.Items[i]
		out[i].SetManagedFields(nil)
	}
	return out, nil
}

// uid is the UID of the parent's namesake in the cluster, or "" when there
// is none.
func (c *cluster) uid(ctx context.Context, gvr schema.GroupVersionResource, parent *unstructured.Unstructured) (string, error) {
	live, err := c.dyn.Resource(gvr).Namespace(parent.GetNamespace()).Get(ctx, parent.GetName(), metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return "", nil
	case err != nil:
		return "", fmt.Errorf("read the parent: %w", err)
	}
	return string(live.GetUID()), nil
}
