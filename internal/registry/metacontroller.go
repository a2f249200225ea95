package registry

import (
	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
)

// WithMetacontrollerAPI makes the registry also register Metacontroller's
// CompositeControllers and DecoratorControllers.
func WithMetacontrollerAPI() Option {
	return func(r *Registry) {
		r.addSource(core.CompositeControllerResource, bus.CompositeController, core.AsMetacontroller(r.resolve))
		r.addSource(core.DecoratorControllerResource, bus.MetacontrollerDecorator, core.AsMetacontroller(r.resolveDecorator))
	}
}
