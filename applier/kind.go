package applier

import (
	"context"
	"log/slog"

	"universalcontroller.dev/uc/core"
)

// A kind is how the applier applies the replies of one kind of controller:
// a UniversalController's to its parents (composite, reconcile.go), a
// UniversalDecorator's to the objects it decorates (decorate,
// decorator.go). The controller's kind is chosen in one place, kindOf.
type kind interface {
	apply(ctx context.Context, parents *knownParents, ctl *core.Controller, b *batch, log *slog.Logger) error
}

// composite is the kind of a UniversalController.
type composite struct{ *reconciler }

func (k composite) apply(ctx context.Context, parents *knownParents, ctl *core.Controller, b *batch, log *slog.Logger) error {
	return k.applyToParent(ctx, parents, ctl, b, log)
}

// decorator is the kind of a UniversalDecorator.
type decorator struct{ *reconciler }

func (k decorator) apply(ctx context.Context, parents *knownParents, ctl *core.Controller, b *batch, log *slog.Logger) error {
	return k.decorate(ctx, parents, ctl, b, log)
}

// kindOf is the kind of a controller.
func (rc *reconciler) kindOf(ctl *core.Controller) kind {
	if ctl.Decorator != nil {
		return decorator{rc}
	}
	return composite{rc}
}
