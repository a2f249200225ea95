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
func (w *writer) mayBeRefused(ctx context.Context, actions []action) string {
	for _, act := range actions {
		if w.preflight == nil {
			return "writes are not checked before they are made"
		}
		if why := w.preflight.CouldRefuse(ctx, w.writeOf(act)); why != "" {
			return why
		}
	}
	return ""
}

// writeOf describes an action to the preflight check, with the live object
// an apply changes as the cache has it.
func (w *writer) writeOf(act action) preflight.Write {
	out := preflight.Write{Resource: act.child.Resource, Old: act.obj}
	switch act.verb {
	case verbCreate:
		out.Verb, out.New, out.Old = preflight.Create, act.obj, nil
	case verbApply:
		out.Verb, out.New, out.Old = preflight.Apply, act.obj, nil
		if live, err := w.live.Object(act.child.GVR, act.obj.GetNamespace(), act.obj.GetName()); err == nil {
			out.Old = live
		}
	case verbRelease:
		out.Verb = preflight.Release
	case verbDelete:
		out.Verb = preflight.Delete
	}
	return out
}
