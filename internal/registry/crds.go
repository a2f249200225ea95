package registry

import (
	"context"
	"errors"
	"fmt"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// CustomResourceDefinition returns the CRD of a resource, whole, as of the
// latest state of it the registry has seen: nil, and no error, for a
// resource no CRD defines (a built-in kind, an aggregated API). The
// informer on CRDs keeps only their status schemas, so a CRD is read from
// the apiserver once per state of it that is asked for. It fails while
// CRDs are not watched (WithStatusSchemas) or not listed yet.
func (r *Registry) CustomResourceDefinition(ctx context.Context, gr schema.GroupResource) (*apiextensionsv1.CustomResourceDefinition, error) {
	s := r.schemas
	name := gr.String() // a CRD is named <plural>.<group>
	switch {
	case s.informer == nil:
		return nil, errors.New("CustomResourceDefinitions are not watched")
	case !s.informer.HasSynced():
		return nil, errors.New("CustomResourceDefinitions are not listed yet")
	}
	obj, exists, err := s.informer.GetStore().GetByKey(name)
	if err != nil || !exists {
		return nil, err
	}
	state := obj.(*unstructured.Unstructured).GetResourceVersion()
	s.mu.Lock()
	c := s.whole[name]
	s.mu.Unlock()
	if c != nil && c.state == state {
		return c.crd, nil
	}
	v, err, _ := s.reads.Do(name+"@"+state, func() (any, error) {
		u, err := r.related.dyn.Resource(crdResource).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("read CustomResourceDefinition %s: %w", name, err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &crd); err != nil {
			return nil, fmt.Errorf("read CustomResourceDefinition %s: %w", name, err)
		}
		s.mu.Lock()
		s.whole[name] = &wholeCRD{state: state, crd: &crd}
		s.mu.Unlock()
		return &crd, nil
	})
	if err != nil {
		return nil, err
	}
	return v.(*apiextensionsv1.CustomResourceDefinition), nil
}

// wholeCRD is a CRD read whole, for one state of it in the informer (its
// resourceVersion there; the one read may be newer).
type wholeCRD struct {
	state string
	crd   *apiextensionsv1.CustomResourceDefinition
}
