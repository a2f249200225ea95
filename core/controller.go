package core

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Resource is a resource type resolved through discovery.
type Resource struct {
	GVR        schema.GroupVersionResource
	GVK        schema.GroupVersionKind
	Namespaced bool
}

// APIVersion is the resource's apiVersion, e.g. "apps/v1".
func (r Resource) APIVersion() string { return r.GVK.GroupVersion().String() }

// Key names the resource as a decorated object's events, resync requests
// and apply notices do: "<apiVersion>/<resource>", e.g.
// "apps/v1/statefulsets".
func (r Resource) Key() string { return r.APIVersion() + "/" + r.GVR.Resource }

// Child is a declared child resource with its update method.
type Child struct {
	Resource
	Method v1alpha1.ChildUpdateMethod
	// StatusChecks gate a rolling update: a child on the latest revision
	// must pass them before the next one moves.
	StatusChecks []v1alpha1.StatusConditionCheck
}

// Rolling tells children that roll out one at a time, through revisions.
func (c *Child) Rolling() bool {
	return c.Method == v1alpha1.ChildUpdateRollingRecreate || c.Method == v1alpha1.ChildUpdateRollingInPlace
}

// Controller is a registered UniversalController, resolved.
type Controller struct {
	Name       string
	Generation int64
	Spec       v1alpha1.UniversalControllerSpec
	// Object is the UniversalController as the hooks receive it.
	Object   *unstructured.Unstructured
	Parent   Resource
	Children []Child
	// ParentSelector is parentResource.labelSelector (everything when unset).
	ParentSelector labels.Selector
	// Decorator is set for a UniversalDecorator (see Decoration).
	Decorator *Decoration
	// Metacontroller tells a controller registered by one of
	// Metacontroller's objects (WithMetacontrollerAPI).
	Metacontroller bool
	// Partitions, when not 0, is the number of partitions parents are
	// spread over in an installation whose watchers are sharded: uc labels
	// each parent, child and revision with the parent's partition
	// (PartitionLabel), so that a watcher shard lists only the objects of
	// the partitions it holds.
	Partitions int
}

// Rolling tells a controller with a child kind that rolls out: its parents
// have ControllerRevisions.
func (c *Controller) Rolling() bool {
	return slices.ContainsFunc(c.Children, func(ch Child) bool { return ch.Rolling() })
}

// Shadow is the sync hook's shadow (spec.hooks.sync.shadow), or nil.
func (c *Controller) Shadow() *v1alpha1.Hook { return c.Spec.Hooks.Sync.Shadow }

// DryRun tells a controller that writes nothing: its applier publishes
// its plans instead (spec.dryRun).
func (c *Controller) DryRun() bool { return c.Spec.DryRun != nil && *c.Spec.DryRun }

// Child returns the declared child resource of the given apiVersion and kind.
func (c *Controller) Child(apiVersion, kind string) (*Child, bool) {
	for i := range c.Children {
		if c.Children[i].APIVersion() == apiVersion && c.Children[i].GVK.Kind == kind {
			return &c.Children[i], true
		}
	}
	return nil, false
}

// HookVersion is the version of the named hook ("v1" unless set).
func (c *Controller) HookVersion(hook string) string {
	h := c.Spec.Hooks.Named(hook)
	if h == nil || h.Version == "" {
		return string(v1alpha1.HookV1)
	}
	return string(h.Version)
}

// DeclaredHooks names the controller of a Listener's change and the hooks
// it declares now, by name: none once it is removed.
func DeclaredHooks(old, cur *Controller) (string, map[string]*v1alpha1.Hook) {
	if cur == nil {
		return old.Name, nil
	}
	declared := map[string]*v1alpha1.Hook{}
	for _, name := range hooks.All {
		if h := cur.Spec.Hooks.Named(name); h != nil {
			declared[name] = h
		}
	}
	return cur.Name, declared
}

// ResolveFunc resolves an apiVersion and plural resource name: Registry's
// Resolve through discovery, or anything that knows the resources without
// a cluster.
type ResolveFunc func(v1alpha1.ResourceRule) (Resource, error)

// NewController turns a UniversalController object (or a CompositeController,
// its spec the same field for field) into the Controller named name, its
// resources resolved with resolve.
func NewController(u *unstructured.Unstructured, name string, resolve ResolveFunc) (*Controller, error) {
	var uc v1alpha1.UniversalController
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &uc); err != nil {
		return nil, fmt.Errorf("decode %s: %w", u.GetName(), err)
	}
	c := &Controller{Name: name, Generation: uc.Generation, Spec: uc.Spec, Object: u, ParentSelector: labels.Everything()}
	var err error
	if c.Parent, err = resolve(uc.Spec.ParentResource.ResourceRule); err != nil {
		return nil, fmt.Errorf("parent resource: %w", err)
	}
	if sel := uc.Spec.ParentResource.LabelSelector; sel != nil {
		if c.ParentSelector, err = metav1.LabelSelectorAsSelector(sel); err != nil {
			return nil, fmt.Errorf("parentResource.labelSelector: %w", err)
		}
	}
	for _, cr := range uc.Spec.ChildResources {
		res, err := resolve(cr.ResourceRule)
		if err != nil {
			return nil, fmt.Errorf("child resource: %w", err)
		}
		child := Child{Resource: res, Method: v1alpha1.ChildUpdateOnDelete}
		if us := cr.UpdateStrategy; us != nil {
			if us.Method != "" {
				child.Method = us.Method
			}
			if us.StatusChecks != nil {
				child.StatusChecks = us.StatusChecks.Conditions
			}
		}
		c.Children = append(c.Children, child)
	}
	if c.Rolling() && !c.Parent.Namespaced {
		return nil, fmt.Errorf("rolling update methods need a namespaced parent resource: its ControllerRevisions live in the parent's namespace")
	}
	return c, nil
}

// ResolveResource resolves an apiVersion and plural resource name with
// mapper, resetting it once when the resource is not known yet (its CRD
// may be new).
func ResolveResource(mapper meta.ResettableRESTMapper, rule v1alpha1.ResourceRule) (Resource, error) {
	res, err := ResolveWith(mapper, rule)
	if meta.IsNoMatchError(err) {
		mapper.Reset()
		res, err = ResolveWith(mapper, rule)
	}
	return res, err
}

// ResolveWith resolves an apiVersion and plural resource name with mapper.
func ResolveWith(mapper meta.RESTMapper, rule v1alpha1.ResourceRule) (Resource, error) {
	gv, err := schema.ParseGroupVersion(rule.APIVersion)
	if err != nil {
		return Resource{}, fmt.Errorf("apiVersion %q: %w", rule.APIVersion, err)
	}
	gvr := gv.WithResource(rule.Resource)
	gvk, err := mapper.KindFor(gvr)
	if err != nil {
		return Resource{}, fmt.Errorf("resolve %s: %w", gvr, err)
	}
	mapping, err := mapper.RESTMapping(gvk.GroupKind(), gvk.Version)
	if err != nil {
		return Resource{}, fmt.Errorf("resolve %s: %w", gvk, err)
	}
	return Resource{GVR: gvr, GVK: gvk, Namespaced: mapping.Scope.Name() == meta.RESTScopeNameNamespace}, nil
}

// ParentResources are the resources of a controller's parents: its parent
// resource, or a decorator's decorated resources.
func (c *Controller) ParentResources() []schema.GroupVersionResource {
	if c.Decorator == nil {
		return []schema.GroupVersionResource{c.Parent.GVR}
	}
	var out []schema.GroupVersionResource
	for _, d := range c.Decorator.Resources {
		out = append(out, d.GVR)
	}
	return out
}

// ErrNoSelector is returned for a parent with neither a spec.selector nor a
// controller that generates one.
var ErrNoSelector = errors.New("the parent has no spec.selector (set one, or generateSelector: true on the UniversalController)")

// Selector is the label selector that claims a parent's children: the
// generated controller-uid=<UID> with generateSelector, else the parent's
// spec.selector, which must not be empty.
func (c *Controller) Selector(parent *unstructured.Unstructured) (labels.Selector, error) {
	if c.Spec.GenerateSelector != nil && *c.Spec.GenerateSelector {
		return labels.SelectorFromSet(labels.Set{v1alpha1.LabelControllerUID: string(parent.GetUID())}), nil
	}
	raw, found, err := unstructured.NestedFieldNoCopy(parent.Object, "spec", "selector")
	if err != nil || !found || raw == nil {
		return nil, ErrNoSelector
	}
	var ls metav1.LabelSelector
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(asMap(raw), &ls); err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	sel, err := metav1.LabelSelectorAsSelector(&ls)
	if err != nil {
		return nil, fmt.Errorf("spec.selector: %w", err)
	}
	if sel.Empty() {
		return nil, ErrNoSelector
	}
	return sel, nil
}

func asMap(v any) map[string]any {
	m, _ := v.(map[string]any)
	return m
}

// Finalizer is the finalizer uc puts on parents of a controller that has a
// finalize hook; a decorator's has a domain of its own, so it never is a
// controller's. Metacontroller's objects keep Metacontroller's finalizers.
func (c *Controller) Finalizer() string {
	switch {
	case c.Metacontroller && c.Decorator != nil:
		return "metacontroller.io/decoratorcontroller-" + c.Decorator.Name
	case c.Metacontroller:
		return "metacontroller.io/compositecontroller-" + c.Object.GetName()
	case c.Decorator != nil:
		return v1alpha1.DecoratorFinalizer(c.Decorator.Name)
	}
	return v1alpha1.ControllerFinalizer(c.Name)
}
