package applier

import (
	"context"

	"universalcontroller.dev/uc/internal/preflight"
)

// Preflight tells why the apiserver could refuse a write, or "" when it
// cannot (preflight.Checker).
type Preflight interface {
	CouldRefuse(ctx context.Context, w preflight.Write) string
}

// mayBeRefused tells why the apiserver could refuse one of the writes, or
// "" when it could refuse none: then they need no dry run.
func (a *Applier) mayBeRefused(ctx context.Context, actions []action) string {
	for _, act := range actions {
		if a.opts.Preflight == nil {
			return "writes are not checked before they are made"
		}
		if why := a.opts.Preflight.CouldRefuse(ctx, a.writeOf(act)); why != "" {
			return why
		}
	}
	return ""
}

// writeOf describes an action to the preflight check, with the live object
// an apply changes as the cache has it.
func (a *Applier) writeOf(act action) preflight.Write {
	w := preflight.Write{Resource: act.child.Resource, Old: act.obj}
	switch act.verb {
	case verbCreate:
		w.Verb, w.New, w.Old = preflight.Create, act.obj, nil
	case verbApply:
		w.Verb, w.New, w.Old = preflight.Apply, act.obj, nil
		if live, err := a.reg.Object(act.child.GVR, act.obj.GetNamespace(), act.obj.GetName()); err == nil {
			w.Old = live
		}
	case verbRelease:
		w.Verb = preflight.Release
	case verbDelete:
		w.Verb = preflight.Delete
	}
	return w
}
