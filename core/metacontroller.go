package core

import (
	"cmp"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"universalcontroller.dev/uc/internal/revision"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Metacontroller's own API, served with WithMetacontrollerAPI: its
// CompositeControllers and DecoratorControllers, as Metacontroller's CRDs
// declare them. A CompositeController's spec is a UniversalController's
// field for field, a DecoratorController's a UniversalDecorator's, so they
// are decoded as those; they register controllers named
// bus.CompositeController(name) and bus.MetacontrollerDecorator(name)
// (see the registry's WithMetacontrollerAPI).
// Such a controller keeps what Metacontroller put on the objects it
// manages, so that parents and children are adopted as Metacontroller left
// them: its finalizer names, its attachments' annotation, and its field
// manager, whose fields uc's apply takes over.
var (
	CompositeControllerResource = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "compositecontrollers"}
	DecoratorControllerResource = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "decoratorcontrollers"}
	// MetacontrollerRevisionResource holds Metacontroller's record of its
	// CompositeControllers' rolling updates: its ControllerRevisions.
	MetacontrollerRevisionResource = schema.GroupVersionResource{Group: "metacontroller.k8s.io", Version: "v1alpha1", Resource: "controllerrevisions"}
)

// MetacontrollerFieldManager is the field manager Metacontroller writes
// children with (the default of its --apply-strategy-ssa-field-manager, and
// its user agent's name for creates and merge patches).
const MetacontrollerFieldManager = "metacontroller"

// annotationMetacontrollerDecorator on an attachment names the
// DecoratorController that made it.
const annotationMetacontrollerDecorator = "metacontroller.k8s.io/decorator-controller"

// AsMetacontroller makes a function that turns uc's controller objects
// into Controllers one that turns Metacontroller's, their spec the same
// field for field.
func AsMetacontroller(resolve func(u *unstructured.Unstructured, name string) (*Controller, error)) func(u *unstructured.Unstructured, name string) (*Controller, error) {
	return func(u *unstructured.Unstructured, name string) (*Controller, error) {
		c, err := resolve(u, name)
		if err != nil {
			return nil, err
		}
		c.Metacontroller = true
		if c.Decorator != nil {
			c.Decorator.Annotation = annotationMetacontrollerDecorator
		}
		return c, nil
	}
}

// ControllerOf turns a controller object as a file holds it — a
// UniversalController, a UniversalDecorator, or one of Metacontroller's
// CompositeControllers and DecoratorControllers — into the Controller uc
// registers for it, under the name it has on the bus, its resources
// resolved with resolve; statusSubresource tells whether a decorated
// resource has a status subresource.
func ControllerOf(u *unstructured.Unstructured, resolve ResolveFunc, statusSubresource func(Resource) (bool, error)) (*Controller, error) {
	newController := func(u *unstructured.Unstructured, name string) (*Controller, error) {
		return NewController(u, name, resolve)
	}
	newDecorator := func(u *unstructured.Unstructured, name string) (*Controller, error) {
		return NewDecorator(u, name, resolve, statusSubresource)
	}
	switch gk := u.GroupVersionKind().GroupKind(); gk {
	case schema.GroupKind{Group: v1alpha1.Group, Kind: "UniversalController"}:
		return newController(u, u.GetName())
	case schema.GroupKind{Group: v1alpha1.Group, Kind: "UniversalDecorator"}:
		return newDecorator(u, bus.DecoratorController(u.GetName()))
	case schema.GroupKind{Group: CompositeControllerResource.Group, Kind: "CompositeController"}:
		return AsMetacontroller(newController)(u, bus.CompositeController(u.GetName()))
	case schema.GroupKind{Group: DecoratorControllerResource.Group, Kind: "DecoratorController"}:
		return AsMetacontroller(newDecorator)(u, bus.MetacontrollerDecorator(u.GetName()))
	default:
		return nil, fmt.Errorf("%s %q is not a controller object: a UniversalController or UniversalDecorator (%s), or a CompositeController or DecoratorController (%s)",
			gk, u.GetName(), v1alpha1.Resource.GroupVersion(), CompositeControllerResource.GroupVersion())
	}
}

// ImportRevisions makes Metacontroller's revisions of a parent (mc) uc's:
// each with children becomes the uc revision of the same parentPatch,
// holding the same children (but those of kinds the controller does not
// roll out), numbered in the order Metacontroller created them. uc's
// revisions of the parent, revs, give way: one of the same parentPatch is
// reused with Metacontroller's children, the others lose their children
// (and so are deleted as unused, unless one is the latest). It returns the
// parent's revisions and the names of those to save.
func ImportRevisions(ctl *Controller, parent *unstructured.Unstructured, revs []*revision.Revision, mc []*unstructured.Unstructured) ([]*revision.Revision, []string, error) {
	if len(mc) == 0 {
		return revs, nil, nil
	}
	mc = slices.Clone(mc)
	slices.SortFunc(mc, func(x, y *unstructured.Unstructured) int {
		return cmp.Or(x.GetCreationTimestamp().Compare(y.GetCreationTimestamp().Time), cmp.Compare(x.GetName(), y.GetName()))
	})
	ours := map[string]*revision.Revision{}
	for _, rev := range revs {
		ours[rev.Name] = rev
	}
	var out []*revision.Revision
	made := map[string]*revision.Revision{}
	for _, u := range mc {
		theirs, err := revision.Decode(u)
		if err != nil {
			return nil, nil, err
		}
		if !theirs.HasChildren() {
			continue // Metacontroller's latest before any child moved to it
		}
		patch, err := theirs.PatchOf()
		if err != nil {
			return nil, nil, err
		}
		hash, err := revision.Hash(patch)
		if err != nil {
			return nil, nil, err
		}
		name := revision.Name(parent.GetName(), hash)
		rev := made[name]
		if rev == nil {
			if rev = ours[name]; rev != nil {
				rev.Children = nil // uc's: Metacontroller's children replace its own
				delete(ours, name)
			} else if rev, err = newRevision(ctl, parent, patch, hash); err != nil {
				return nil, nil, err
			}
			made[name] = rev
			out = append(out, rev)
		}
		for _, c := range theirs.Children {
			if !rolls(ctl, c.APIGroup, c.Kind) {
				continue // as Metacontroller forgets them: the kind no longer rolls
			}
			for _, child := range c.Names {
				rev.Add(c.APIGroup, c.Kind, child)
			}
		}
	}
	names := make([]string, 0, len(out)+len(ours))
	for i, rev := range out {
		rev.Revision = int64(i + 1)
		names = append(names, rev.Name)
	}
	for _, rev := range revs {
		if ours[rev.Name] == rev {
			rev.Children, rev.Revision = nil, 0
			out = append(out, rev)
			names = append(names, rev.Name)
		}
	}
	return out, names, nil
}

// rolls tells a child kind the controller rolls out.
func rolls(ctl *Controller, group, kind string) bool {
	return slices.ContainsFunc(ctl.Children, func(c Child) bool {
		return c.Rolling() && c.GVK.Group == group && c.GVK.Kind == kind
	})
}
