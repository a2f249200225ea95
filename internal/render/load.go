package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// inputs are what a render starts from.
type inputs struct {
	// ctl is the controller; a decorator's view for the decorated
	// resource of the parent.
	ctl *core.Controller
	// parent is the parent, or the object the decorator decorates.
	parent *unstructured.Unstructured
	// decorated is the decorator's resource of the parent; nil for a
	// controller.
	decorated *core.Decorated
	// mapper resolves resources: offline, or the cluster's discovery.
	mapper meta.RESTMapper
	// world lists the observed objects: from files, or the cluster.
	world lister
	// children are the observed objects of the controller's child
	// resources where the parent's children may be.
	children objects
	// kube reads the Secrets a webhook's connection names; nil offline.
	kube kubernetes.Interface
}

// lister lists the objects of a resource in a namespace ("" for all).
type lister interface {
	list(ctx context.Context, gvr schema.GroupVersionResource, namespace string) ([]*unstructured.Unstructured, error)
}

// load reads the controller, the parent and the observed objects, from
// files or, with a kubeconfig, the observed ones from the cluster.
func load(ctx context.Context, opts Options, notes io.Writer) (*inputs, error) {
	docs, err := readObjects(opts.Controller...)
	if err != nil {
		return nil, fmt.Errorf("--controller: %w", err)
	}
	more, err := readObjects(opts.CRDs...)
	if err != nil {
		return nil, fmt.Errorf("--crd: %w", err)
	}
	crds, controllers := SplitCRDs(append(docs, more...))
	parents, err := readObjects(opts.Parent)
	if err != nil {
		return nil, fmt.Errorf("--parent: %w", err)
	}
	if len(parents) != 1 {
		return nil, fmt.Errorf("--parent: want one object, found %d", len(parents))
	}
	in := &inputs{parent: parents[0]}
	var liveUID func(*unstructured.Unstructured) (string, error)
	if opts.Kubeconfig != "" {
		c, err := connect(opts.Kubeconfig)
		if err != nil {
			return nil, err
		}
		in.mapper, in.world, in.kube = c.mapper, c, c.kube
		liveUID = func(p *unstructured.Unstructured) (string, error) { return c.uid(ctx, in.ctl.Parent.GVR, p) }
	} else if in.mapper, err = OfflineMapper(crds); err != nil {
		return nil, err
	}
	if in.ctl, err = in.controllerFor(controllers); err != nil {
		return nil, fmt.Errorf("--controller: %w", err)
	}
	if in.ctl.Decorator != nil {
		if err := in.decorating(); err != nil {
			return nil, fmt.Errorf("--parent: %w", err)
		}
	}
	if err := preparedParent(in.ctl, in.parent, liveUID, notes); err != nil {
		return nil, fmt.Errorf("--parent: %w", err)
	}
	if in.world == nil {
		objs, err := readObjects(append(opts.Observed, opts.Related...)...)
		if err != nil {
			return nil, fmt.Errorf("--observed, --related: %w", err)
		}
		if in.world, err = newObjects(in.mapper, objs, in.parent.GetNamespace()); err != nil {
			return nil, fmt.Errorf("--observed, --related: %w", err)
		}
	}
	in.children = objects{}
	for _, child := range in.ctl.Children {
		objs, err := in.world.list(ctx, child.GVR, in.childNamespace())
		if err != nil {
			return nil, err
		}
		in.children.add(child.GVR, objs...)
	}
	return in, nil
}

// controllerFor registers the controller among the objects, or, when
// there are several, the one whose parents are of the parent's kind: a
// controller's parent resource, or one of a decorator's resources.
func (in *inputs) controllerFor(objs []*unstructured.Unstructured) (*core.Controller, error) {
	// render writes no status: whether a resource has a status
	// subresource does not matter.
	noStatus := func(core.Resource) (bool, error) { return false, nil }
	// A typo is an error, as kubectl --validate=strict makes it: the
	// apiserver would prune the field, and uc would run without it.
	for _, o := range objs {
		problems, err := core.Validate(o)
		if err != nil {
			return nil, err
		}
		if len(problems) > 0 {
			return nil, fmt.Errorf("%s %s: %s", o.GetKind(), o.GetName(), strings.Join(problems, "; "))
		}
	}
	switch len(objs) {
	case 0:
		return nil, errors.New("no controller object")
	case 1:
		return core.ControllerOf(objs[0], in.resolve, noStatus)
	}
	gvk := in.parent.GroupVersionKind()
	var found []*core.Controller
	var names []string
	for _, o := range objs {
		c, err := core.ControllerOf(o, in.resolve, noStatus)
		if err != nil {
			return nil, err
		}
		names = append(names, c.Name)
		if c.Parent.GVK == gvk || c.Decorator != nil && slices.ContainsFunc(c.Decorator.Resources, func(d core.Decorated) bool { return d.GVK == gvk }) {
			found = append(found, c)
		}
	}
	if len(found) != 1 {
		return nil, fmt.Errorf("%d of the controllers %v have parents of the parent's kind %s: want one", len(found), names, gvk)
	}
	return found[0], nil
}

// decorating makes in.ctl the decorator's view for the resource of the
// object it decorates, the parent.
func (in *inputs) decorating() error {
	gvk := in.parent.GroupVersionKind()
	var kinds []string
	for i := range in.ctl.Decorator.Resources {
		d := &in.ctl.Decorator.Resources[i]
		if d.GVK == gvk {
			if !in.ctl.Decorates(d, in.parent) {
				return fmt.Errorf("%s does not decorate it: its selectors do not match it, and it lacks the finalizer %s", in.ctl.Name, in.ctl.Finalizer())
			}
			in.decorated, in.ctl = d, in.ctl.Decorating(d)
			return nil
		}
		kinds = append(kinds, d.GVK.String())
	}
	return fmt.Errorf("the object is a %s, but %s decorates %v", gvk, in.ctl.Name, kinds)
}

// childNamespace is where the parent's children are: its namespace, or
// anywhere for a cluster-scoped parent.
func (in *inputs) childNamespace() string {
	if in.ctl.Parent.Namespaced {
		return in.parent.GetNamespace()
	}
	return ""
}

// resolve resolves a resource as uc does, through the mapper.
func (in *inputs) resolve(rule v1alpha1.ResourceRule) (core.Resource, error) {
	res, err := core.ResolveWith(in.mapper, rule)
	if meta.IsNoMatchError(err) && in.kube == nil {
		err = fmt.Errorf("%w (give its CustomResourceDefinition with --crd, or read the cluster's with --kubeconfig)", err)
	}
	return res, err
}

var crdKind = schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}

// SplitCRDs tells the CustomResourceDefinitions among objs from the rest.
func SplitCRDs(objs []*unstructured.Unstructured) (crds, rest []*unstructured.Unstructured) {
	for _, o := range objs {
		if o.GroupVersionKind().GroupKind() == crdKind {
			crds = append(crds, o)
		} else {
			rest = append(rest, o)
		}
	}
	return crds, rest
}
