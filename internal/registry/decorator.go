package registry

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/core"
)

// resolveDecorator turns a UniversalDecorator object into a core.Controller,
// its resources resolved through discovery.
func (r *Registry) resolveDecorator(u *unstructured.Unstructured, name string) (*core.Controller, error) {
	return core.NewDecorator(u, name, r.Resolve, r.statusSubresource)
}
