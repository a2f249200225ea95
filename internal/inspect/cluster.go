package inspect

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/restmapper"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/registry"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Cluster reads the parents, their controllers, children and Events. It
// only reads.
type Cluster struct {
	dyn  dynamic.Interface
	kube kubernetes.Interface
	// mapper resolves a controller's resources; kinds also expands the
	// short names a person types (deploy, uc).
	mapper meta.ResettableRESTMapper
	kinds  meta.RESTMapper
}

// NewCluster reads the cluster of cfg.
func NewCluster(cfg *rest.Config) (*Cluster, error) {
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	disco := memory.NewMemCacheClient(kube.Discovery())
	mapper := restmapper.NewDeferredDiscoveryRESTMapper(disco)
	return &Cluster{dyn: dyn, kube: kube, mapper: mapper, kinds: restmapper.NewShortcutExpander(mapper, disco, nil)}, nil
}

// Target is a parent named on the command line: KIND/NAME in a namespace.
type Target struct {
	// Kind is the parent's resource as a person types it: its kind, plural
	// or short name, with its group when two groups have it
	// (foos.samplecontroller.k8s.io).
	Kind      string
	Name      string
	Namespace string
}

// ParseTarget reads KIND/NAME; namespace is the parent's if it is
// namespaced.
func ParseTarget(arg, namespace string) (Target, error) {
	kind, name, ok := strings.Cut(arg, "/")
	if !ok || kind == "" || name == "" || strings.Contains(name, "/") {
		return Target{}, fmt.Errorf("%q is not KIND/NAME (e.g. foo/example-foo)", arg)
	}
	return Target{Kind: kind, Name: name, Namespace: namespace}, nil
}

// String is the target as typed.
func (t Target) String() string { return t.Kind + "/" + t.Name }

// resolve resolves a resource of a controller's spec.
func (c *Cluster) resolve(rule v1alpha1.ResourceRule) (core.Resource, error) {
	return registry.ResolveResource(c.mapper, rule)
}

// resourceOf is the resource of a kind, plural or short name.
func (c *Cluster) resourceOf(kind string) (schema.GroupResource, error) {
	gvr, err := c.kinds.ResourceFor(schema.ParseGroupResource(kind).WithVersion(""))
	if meta.IsNoMatchError(err) {
		c.mapper.Reset() // a CRD just installed
		gvr, err = c.kinds.ResourceFor(schema.ParseGroupResource(kind).WithVersion(""))
	}
	if err != nil {
		return schema.GroupResource{}, fmt.Errorf("the server has no resource %q: %w", kind, err)
	}
	return gvr.GroupResource(), nil
}

// controllers are the UniversalControllers resolved, the one named only
// when name is not "". A controller whose resources cannot be resolved is
// left out, unless it is the one named.
func (c *Cluster) controllers(ctx context.Context, name string) ([]*core.Controller, error) {
	var objs []unstructured.Unstructured
	res := c.dyn.Resource(v1alpha1.Resource)
	if name != "" {
		u, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return nil, fmt.Errorf("UniversalController %s: %w", name, err)
		}
		objs = append(objs, *u)
	} else {
		list, err := res.List(ctx, metav1.ListOptions{})
		if err != nil {
			return nil, fmt.Errorf("list UniversalControllers: %w", err)
		}
		objs = list.Items
	}
	var out []*core.Controller
	for i := range objs {
		ctl, err := core.NewController(&objs[i], objs[i].GetName(), c.resolve)
		switch {
		case err == nil:
			out = append(out, ctl)
		case name != "":
			return nil, fmt.Errorf("UniversalController %s: %w", name, err)
		}
	}
	return out, nil
}

// errNoController says no UniversalController manages a kind.
var errNoController = errors.New("no UniversalController manages it")

// parentOf finds the target and the controllers of its resource: the one
// named controller when not "", else every one whose labelSelector selects
// it, or, when none does, every one of its resource (each trace then says
// that it does not select the parent).
func (c *Cluster) parentOf(ctx context.Context, t Target, controller string) (*unstructured.Unstructured, []*core.Controller, error) {
	gr, err := c.resourceOf(t.Kind)
	if err != nil {
		return nil, nil, err
	}
	ctls, err := c.controllers(ctx, controller)
	if err != nil {
		return nil, nil, err
	}
	var ofKind, selecting []*core.Controller
	var parent *unstructured.Unstructured
	for _, ctl := range ctls {
		if ctl.Parent.GVR.GroupResource() != gr {
			continue
		}
		if parent == nil {
			if parent, err = c.get(ctx, ctl.Parent, t.Namespace, t.Name); err != nil {
				return nil, nil, fmt.Errorf("%s: %w", t, err)
			}
		}
		ofKind = append(ofKind, ctl)
		if ctl.ParentSelector.Matches(labels.Set(parent.GetLabels())) {
			selecting = append(selecting, ctl)
		}
	}
	switch {
	case len(ofKind) == 0 && controller != "":
		return nil, nil, fmt.Errorf("%s: UniversalController %s manages %s, not %s", t, controller, ctls[0].Parent.GVR.GroupResource(), gr)
	case len(ofKind) == 0:
		return nil, nil, fmt.Errorf("%s (%s): %w", t, gr, errNoController)
	case len(selecting) == 0:
		return parent, ofKind, nil
	}
	return parent, selecting, nil
}

// get reads an object of a resource; namespace is ignored for a
// cluster-scoped one.
func (c *Cluster) get(ctx context.Context, res core.Resource, namespace, name string) (*unstructured.Unstructured, error) {
	if !res.Namespaced {
		return c.dyn.Resource(res.GVR).Get(ctx, name, metav1.GetOptions{})
	}
	return c.dyn.Resource(res.GVR).Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// list lists the objects of a resource in namespace ("": every
// namespace), those sel matches.
func (c *Cluster) list(ctx context.Context, res core.Resource, namespace string, sel labels.Selector) ([]unstructured.Unstructured, error) {
	ri := dynamic.ResourceInterface(c.dyn.Resource(res.GVR))
	if res.Namespaced && namespace != "" {
		ri = c.dyn.Resource(res.GVR).Namespace(namespace)
	}
	list, err := ri.List(ctx, metav1.ListOptions{LabelSelector: sel.String()})
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", res.GVR.Resource, err)
	}
	return list.Items, nil
}

// ParentsOf are the controller's parents in namespace ("": in every
// namespace): the objects of its parent resource that its labelSelector
// selects.
func (c *Cluster) ParentsOf(ctx context.Context, controller, namespace string) (*core.Controller, []unstructured.Unstructured, error) {
	ctls, err := c.controllers(ctx, controller)
	if err != nil {
		return nil, nil, err
	}
	parents, err := c.list(ctx, ctls[0].Parent, namespace, ctls[0].ParentSelector)
	return ctls[0], parents, err
}
