package watcher

import (
	"context"

	"k8s.io/client-go/tools/cache"

	"universalcontroller.dev/uc/core"
)

// A kind is what the watcher does for one kind of controller: a
// UniversalController's parents (followParents, syncParent) or a
// UniversalDecorator's decorated objects (followDecorator, syncDecorated).
// The controller's kind is chosen in one place, kindOf.
type kind interface {
	// follow adds the informer handlers that queue the controller's
	// parents when they or what their requests carry change.
	follow(ctl *core.Controller, add func(core.Resource, cache.ResourceEventHandler))
	// sync publishes the request of one parent as it is.
	sync(ctx context.Context, ctl *core.Controller, key parentKey, resync bool) error
}

// composite is the kind of a UniversalController.
type composite struct{ *Watcher }

func (k composite) follow(ctl *core.Controller, add func(core.Resource, cache.ResourceEventHandler)) {
	k.followParents(ctl, add)
}

func (k composite) sync(ctx context.Context, ctl *core.Controller, key parentKey, resync bool) error {
	return k.syncParent(ctx, ctl, key, resync)
}

// decorator is the kind of a UniversalDecorator.
type decorator struct{ *Watcher }

func (k decorator) follow(ctl *core.Controller, add func(core.Resource, cache.ResourceEventHandler)) {
	k.followDecorator(ctl, add)
}

func (k decorator) sync(ctx context.Context, ctl *core.Controller, key parentKey, resync bool) error {
	return k.syncDecorated(ctx, ctl, key, resync)
}

// kindOf is the kind of a controller.
func (w *Watcher) kindOf(ctl *core.Controller) kind {
	if ctl.Decorator != nil {
		return decorator{w}
	}
	return composite{w}
}
