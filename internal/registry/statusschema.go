package registry

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"golang.org/x/sync/singleflight"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/core"
)

// crdResource is the GroupVersionResource of CustomResourceDefinitions.
var crdResource = apiextensionsv1.SchemeGroupVersion.WithResource("customresourcedefinitions")

// statusSchemas knows the status schema of every parent kind from one
// informer on CustomResourceDefinitions, which keeps of each CRD only the
// status part of its schemas. It is not one of the shared informers: a
// controller may watch CRDs as children or related objects, whole.
type statusSchemas struct {
	informer cache.SharedIndexInformer // nil: not watched, every schema is unknown
	log      *slog.Logger

	mu    sync.Mutex
	byGVR map[schema.GroupVersionResource]*cachedSchema
	whole map[string]*wholeCRD // CRDs read whole, by name (see CustomResourceDefinition)
	reads singleflight.Group
}

// cachedSchema is the schema of a kind as of one state of its CRD.
type cachedSchema struct {
	state  string // the CRD's resourceVersion, or why there is none
	schema *core.StatusSchema
}

func newStatusSchemas(log *slog.Logger) *statusSchemas {
	return &statusSchemas{log: log, byGVR: map[schema.GroupVersionResource]*cachedSchema{}, whole: map[string]*wholeCRD{}}
}

// watch makes the informer that run starts.
func (s *statusSchemas) watch(dyn dynamic.Interface) {
	inf := dynamicinformer.NewFilteredDynamicInformer(dyn, crdResource, metav1.NamespaceAll, 0, cache.Indexers{}, nil).Informer()
	s.informer = inf
	// Not started yet, so setting the handlers cannot fail.
	_ = inf.SetTransform(statusSchemasOnly)
	_ = inf.SetWatchErrorHandlerWithContext(func(ctx context.Context, r *cache.Reflector, err error) {
		s.log.Warn("list or watch CustomResourceDefinitions (until they are listed, parents' status schemas are unknown)", "err", err)
		cache.DefaultWatchErrorHandler(ctx, r, err)
	})
}

// run watches CRDs, if asked to, until ctx ends. It returns once they are
// listed, or after wait: a parent's status can be written without its
// schema.
func (s *statusSchemas) run(ctx context.Context, wait time.Duration) {
	if s.informer == nil {
		return
	}
	go s.informer.Run(ctx.Done())
	ctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	if !cache.WaitForCacheSync(ctx.Done(), s.informer.HasSynced) {
		s.log.Warn("CustomResourceDefinitions not listed yet: parents' status schemas are unknown until they are")
	}
}

// StatusSchema returns the status schema of a parent resource, as of the
// latest state of its CRD that uc has seen.
func (r *Registry) StatusSchema(res core.Resource) *core.StatusSchema {
	return r.schemas.get(res.GVR)
}

func (s *statusSchemas) get(gvr schema.GroupVersionResource) *core.StatusSchema {
	name := gvr.GroupResource().String() // a CRD is named <plural>.<group>
	var crd *unstructured.Unstructured
	state := "CustomResourceDefinitions are not watched"
	switch {
	case s.informer == nil:
	case !s.informer.HasSynced():
		state = "CustomResourceDefinitions are not listed yet"
	default:
		obj, exists, err := s.informer.GetStore().GetByKey(name)
		state = "no CustomResourceDefinition " + name
		if err == nil && exists {
			crd = obj.(*unstructured.Unstructured)
			state = crd.GetResourceVersion()
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.byGVR[gvr]; c != nil && c.state == state {
		return c.schema
	}
	out := &core.StatusSchema{Source: state}
	if crd != nil {
		var err error
		if out, err = core.StatusSchemaOf(crd, gvr.Version); err != nil {
			out = &core.StatusSchema{Source: fmt.Sprintf("CustomResourceDefinition %s (unreadable: %v)", name, err)}
			s.log.Warn("the status schema of a parent resource is unreadable", "resource", gvr.String(), "err", err)
		}
	}
	s.byGVR[gvr] = &cachedSchema{state: state, schema: out}
	return out
}

// statusSchemasOnly is the CRD informer's transform: it keeps of a CRD its
// name and resourceVersion and, for each version, only the root and the
// status of its schema, so that caching every CRD of a cluster costs little.
func statusSchemasOnly(obj any) (any, error) {
	crd, ok := obj.(*unstructured.Unstructured)
	if !ok {
		return obj, nil
	}
	versions, _, _ := unstructured.NestedFieldNoCopy(crd.Object, "spec", "versions")
	list, _ := versions.([]any)
	kept := make([]any, 0, len(list))
	for _, v := range list {
		m, _ := v.(map[string]any)
		raw, _, _ := unstructured.NestedFieldNoCopy(m, "schema", "openAPIV3Schema")
		root, _ := raw.(map[string]any)
		slim := map[string]any{}
		for _, k := range []string{"type", "x-kubernetes-preserve-unknown-fields"} {
			if x, ok := root[k]; ok {
				slim[k] = x
			}
		}
		if status, ok, _ := unstructured.NestedFieldNoCopy(root, "properties", "status"); ok {
			slim["properties"] = map[string]any{"status": status}
		}
		kept = append(kept, map[string]any{"name": m["name"], "schema": map[string]any{"openAPIV3Schema": slim}})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": crd.GetAPIVersion(),
		"kind":       crd.GetKind(),
		"metadata":   map[string]any{"name": crd.GetName(), "resourceVersion": crd.GetResourceVersion()},
		"spec":       map[string]any{"versions": kept},
	}}, nil
}
