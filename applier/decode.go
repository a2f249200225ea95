package applier

import (
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// decode decodes every reply of a batch, by revision. Strict (hook version
// v2 by default, see v1alpha1.Hook.StrictReplies), a field the response
// does not have, or has twice, is an error that names it. A reply with
// more than maxChildren children is an error.
func (b *batch) decode(strict bool, maxChildren int) (map[string]*hooks.SyncResponse, error) {
	out := map[string]*hooks.SyncResponse{}
	for rev, r := range b.replies {
		resp, err := decodeReply[hooks.SyncResponse](r, strict)
		if err == nil {
			err = core.CheckCount(len(resp.Children), maxChildren)
		}
		if err != nil && rev != b.meta.LatestRevision() {
			err = fmt.Errorf("the reply for the parent at its older revision %s: %w", rev, err)
		}
		if err != nil {
			return nil, err
		}
		out[rev] = resp
	}
	return out, nil
}

// decodeReply decodes a sync or finalize reply: a hooks.SyncResponse, or a
// decorator's hooks.DecoratorResponse. Strict, a field the response type
// does not have, or one given twice, is an error.
func decodeReply[T any](r *reply, strict bool) (*T, error) {
	if err := checkType(r); err != nil {
		return nil, err
	}
	return core.DecodeData[T](r.meta.Hook, r.data, strict)
}

// checkType checks that a reply is its hook's response, not a failure.
func checkType(r *reply) error {
	if want := bus.ResponseType(r.meta.Hook); r.typ != want {
		return fmt.Errorf("event type %q, want %q", r.typ, want)
	}
	return nil
}

// decodeFailure turns a failure event into the reason and problem reported
// on the parent: a hook that failed its deliveries, or a parent the watcher
// could not make a request for.
func decodeFailure(r *reply) (string, error) {
	var f bus.Failure
	if err := utiljson.Unmarshal(r.data, &f); err != nil {
		return v1alpha1.ReasonHookFailed, fmt.Errorf("%s hook failed (its failure report is unreadable: %w)", r.meta.Hook, err)
	}
	return core.Failed(r.meta.Hook, f)
}
