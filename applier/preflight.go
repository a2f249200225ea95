package applier

import (
	"context"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/preflight"
)

// Preflight tells why the apiserver could refuse a write, or "" when it
// cannot (preflight.Checker).
type Preflight interface {
	CouldRefuse(ctx context.Context, w preflight.Write) string
}

// mayBeRefused tells why the apiserver could refuse one of the writes, or
// "" when it could refuse none: then they need no dry run.
func (w *writer) mayBeRefused(ctx context.Context, actions []core.Write) string {
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
// an apply changes as it was planned on.
func (w *writer) writeOf(act core.Write) preflight.Write {
	out := preflight.Write{Resource: act.Child.Resource, Old: act.Object}
	switch act.Verb {
	case core.VerbCreate:
		out.Verb, out.New, out.Old = preflight.Create, act.Object, nil
	case core.VerbApply:
		out.Verb, out.New, out.Old = preflight.Apply, act.Object, act.Live
	case core.VerbRelease:
		out.Verb = preflight.Release
	case core.VerbDelete:
		out.Verb = preflight.Delete
	}
	return out
}
