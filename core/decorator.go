package core

import (
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// A UniversalDecorator is registered as a Controller named
// bus.DecoratorController(name), so it runs through the same pipeline as a
// UniversalController: its attachments are its Children, its hooks and
// resync period are in Spec, and Decorator holds what only a decorator has,
// the resources it decorates. It has no Parent of its own: the watcher and
// the applier take, for each decorated object, the decorator's view for the
// object's resource (Decorating), whose Parent is that resource. An
// attachment is a child whose controller is the decorated object and that
// carries AnnotationDecorator; a decorator adopts nothing.

// AnnotationDecorator on an attachment names the decorator that made it: an
// object may be decorated by several decorators, and have children of its
// own controller, all controlled by it.
const AnnotationDecorator = "universalcontroller.dev/decorator"

// Decoration is what a decorator has besides a controller's fields.
type Decoration struct {
	// Name is the UniversalDecorator's name.
	Name      string
	Resources []Decorated
	// Annotation on an attachment names the decorator that made it:
	// AnnotationDecorator, or Metacontroller's for a DecoratorController.
	Annotation string
}

// Decorated is a resource a decorator decorates, resolved, with the
// selectors that pick its objects.
type Decorated struct {
	Resource
	// Labels and Annotations select the objects (everything when unset).
	Labels, Annotations labels.Selector
	IgnoreStatusChanges bool
	// StatusSubresource tells a resource whose status is written through
	// its status subresource.
	StatusSubresource bool
}

// Selects tells whether the decorator decorates obj, an object of the
// resource: both selectors match it.
func (d *Decorated) Selects(obj metav1.Object) bool {
	return d.Labels.Matches(labels.Set(obj.GetLabels())) && d.Annotations.Matches(labels.Set(obj.GetAnnotations()))
}

// Decorated returns the decorated resource of that key.
func (d *Decoration) Decorated(key string) (*Decorated, bool) {
	i := slices.IndexFunc(d.Resources, func(r Decorated) bool { return r.Key() == key })
	if i < 0 {
		return nil, false
	}
	return &d.Resources[i], true
}

// Decorating is the decorator as the controller of the objects of one of
// its resources: a copy whose Parent is that resource.
func (c *Controller) Decorating(d *Decorated) *Controller {
	view := *c
	view.Parent = d.Resource
	view.ParentSelector = d.Labels
	return &view
}

// Decorates tells, for a decorator, whether obj (an object of one of its
// resources) is one it decorates or still has to let go: its selectors
// match obj, or obj carries its finalizer.
func (c *Controller) Decorates(d *Decorated, obj metav1.Object) bool {
	return d.Selects(obj) || slices.Contains(obj.GetFinalizers(), c.Finalizer())
}

// IsAttachment tells, for a decorator, whether obj, controlled by a
// decorated object, is one of the decorator's attachments.
func (c *Controller) IsAttachment(obj metav1.Object) bool {
	return obj.GetAnnotations()[c.Decorator.Annotation] == c.Decorator.Name
}

// NewDecorator turns a UniversalDecorator object (or a DecoratorController,
// its spec the same field for field) into the Controller named name, its
// resources resolved with resolve; statusSubresource tells whether a
// decorated resource has a status subresource.
func NewDecorator(u *unstructured.Unstructured, name string, resolve ResolveFunc, statusSubresource func(Resource) (bool, error)) (*Controller, error) {
	var ud v1alpha1.UniversalDecorator
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &ud); err != nil {
		return nil, fmt.Errorf("decode %s: %w", u.GetName(), err)
	}
	if ud.Spec.Hooks.Sync.Shadow != nil {
		return nil, fmt.Errorf("hooks.sync.shadow: a UniversalDecorator's sync hook has no shadow")
	}
	c := &Controller{
		Name: name, Generation: ud.Generation, Object: u, ParentSelector: labels.Everything(),
		Spec: v1alpha1.UniversalControllerSpec{ResyncPeriodSeconds: ud.Spec.ResyncPeriodSeconds,
			Hooks: v1alpha1.ControllerHooks{Hooks: ud.Spec.Hooks}, EndpointConfigs: ud.Spec.EndpointConfigs},
		Decorator: &Decoration{Name: ud.Name, Annotation: AnnotationDecorator},
	}
	for i, rule := range ud.Spec.Resources {
		d, err := resolveDecorated(rule, resolve, statusSubresource)
		if err != nil {
			return nil, fmt.Errorf("resources[%d]: %w", i, err)
		}
		if _, dup := c.Decorator.Decorated(d.Key()); dup {
			return nil, fmt.Errorf("resources[%d]: %s is named twice", i, d.Key())
		}
		c.Decorator.Resources = append(c.Decorator.Resources, d)
	}
	for i, rule := range ud.Spec.Attachments {
		res, err := resolve(rule.ResourceRule)
		if err != nil {
			return nil, fmt.Errorf("attachments[%d]: %w", i, err)
		}
		if _, dup := c.Child(res.APIVersion(), res.GVK.Kind); dup {
			return nil, fmt.Errorf("attachments[%d]: %s is named twice", i, res.GVR.GroupResource())
		}
		method := v1alpha1.ChildUpdateOnDelete
		if rule.UpdateStrategy != nil && rule.UpdateStrategy.Method != "" {
			method = rule.UpdateStrategy.Method
		}
		c.Children = append(c.Children, Child{Resource: res, Method: notRolling(method)})
	}
	return c, nil
}

func resolveDecorated(rule v1alpha1.DecoratorResourceRule, resolve ResolveFunc, statusSubresource func(Resource) (bool, error)) (Decorated, error) {
	res, err := resolve(rule.ResourceRule)
	if err != nil {
		return Decorated{}, err
	}
	d := Decorated{Resource: res, Labels: labels.Everything(), Annotations: labels.Everything(),
		IgnoreStatusChanges: rule.IgnoreStatusChanges != nil && *rule.IgnoreStatusChanges}
	if rule.LabelSelector != nil {
		if d.Labels, err = metav1.LabelSelectorAsSelector(rule.LabelSelector); err != nil {
			return Decorated{}, fmt.Errorf("labelSelector: %w", err)
		}
	}
	if as := rule.AnnotationSelector; as != nil {
		sel := &metav1.LabelSelector{MatchLabels: as.MatchAnnotations, MatchExpressions: as.MatchExpressions}
		if d.Annotations, err = metav1.LabelSelectorAsSelector(sel); err != nil {
			return Decorated{}, fmt.Errorf("annotationSelector: %w", err)
		}
	}
	if d.StatusSubresource, err = statusSubresource(res); err != nil {
		return Decorated{}, err
	}
	return d, nil
}

// notRolling is the method a decorator uses for an attachment's update
// method: attachments never roll out, a rolling method acts as its plain
// counterpart (as in Metacontroller).
func notRolling(m v1alpha1.ChildUpdateMethod) v1alpha1.ChildUpdateMethod {
	switch m {
	case v1alpha1.ChildUpdateRollingRecreate:
		return v1alpha1.ChildUpdateRecreate
	case v1alpha1.ChildUpdateRollingInPlace:
		return v1alpha1.ChildUpdateInPlace
	}
	return m
}
