package applier

import (
	"errors"
	"fmt"

	utiljson "k8s.io/apimachinery/pkg/util/json"

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
			err = checkCount(len(resp.Children), maxChildren)
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
	return decodeData[T](r.meta.Hook, r.data, strict)
}

// checkType checks that a reply is its hook's response, not a failure.
func checkType(r *reply) error {
	if want := bus.ResponseType(r.meta.Hook); r.typ != want {
		return fmt.Errorf("event type %q, want %q", r.typ, want)
	}
	return nil
}

// decodeData decodes the data of a hook's reply (see decodeReply).
func decodeData[T any](hook string, data []byte, strict bool) (*T, error) {
	var resp T
	if err := hooks.DecodeReply(data, &resp, strict); err != nil {
		return nil, fmt.Errorf("not a valid %s response: %w", hook, err)
	}
	return &resp, nil
}

// decodeSync decodes the data of a sync or finalize reply, which may have
// at most maxChildren children.
func decodeSync(hook string, data []byte, strict bool, maxChildren int) (*hooks.SyncResponse, error) {
	resp, err := decodeData[hooks.SyncResponse](hook, data, strict)
	if err == nil {
		err = checkCount(len(resp.Children), maxChildren)
	}
	return resp, err
}

// checkCount refuses a reply with more than limit children or attachments.
func checkCount(n, limit int) error {
	if n > limit {
		return fmt.Errorf("%d children, more than the %d a reply may have (uc's --max-children-per-reply)", n, limit)
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
	return failed(r.meta.Hook, f)
}

// failed is the reason and problem reported on the parent for a failure
// report. A hook's failure says the same whether its request is tried
// again at once (a delivery that failed, Retrying) or later (a request
// dead-lettered: the watcher asks the parent again after its backoff):
// the same failure reported again changes nothing on the parent — no
// status write — and counts once more on its one Warning Event.
func failed(hook string, f bus.Failure) (string, error) {
	if f.Deliveries == 0 {
		return f.Reason, errors.New(f.Message)
	}
	return v1alpha1.ReasonHookFailed, fmt.Errorf("%s hook failed, will retry: %s: %s", hook, f.Reason, f.Message)
}

// invalidReply is the reason and problem reported on the parent for a
// reply uc refuses: err says why.
func invalidReply(hook string, err error) (string, error) {
	return v1alpha1.ReasonInvalidHookReply, fmt.Errorf("%s hook reply rejected: %w", hook, err)
}
