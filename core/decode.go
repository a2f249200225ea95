package core

import (
	"errors"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"universalcontroller.dev/uc/internal/ujson"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// DecodeData decodes the data of a hook's reply (see decodeReply).
func DecodeData[T any](hook string, data []byte, strict bool) (*T, error) {
	var resp T
	if sync, ok := any(&resp).(*hooks.SyncResponse); ok && decodeCommonSync(data, sync) {
		return &resp, nil
	}
	if err := hooks.DecodeReply(data, &resp, strict); err != nil {
		return nil, fmt.Errorf("not a valid %s response: %w", hook, err)
	}
	return &resp, nil
}

// decodeCommonSync decodes the sync reply of most hooks — a status,
// children, resyncAfterSeconds and finalized, nothing else, no key given
// twice, each child an object with a kind — in one pass (ujson), into what
// hooks.DecodeReply makes of it, strict or not: such a reply has nothing a
// strict reading refuses. It returns false for any other reply, which
// hooks.DecodeReply decodes, and judges, as ever. hooks.DecodeReply reads
// a reply three times over: it checks it whole, then checks and decodes
// each child again as a document of its own (Unstructured's UnmarshalJSON).
func decodeCommonSync(data []byte, into *hooks.SyncResponse) bool {
	v, ok := ujson.TryDecode(data)
	fields, isObject := v.(map[string]any)
	if !ok || !isObject {
		return false
	}
	var resp hooks.SyncResponse
	for k, v := range fields {
		switch k {
		case "status":
			if resp.Status, ok = v.(map[string]any); !ok {
				return false
			}
		case "children":
			if resp.Children, ok = objects(v); !ok {
				return false
			}
		case "resyncAfterSeconds":
			// A float64 field holds a whole number as it is, but for
			// "-0", which it keeps negative.
			switch n := v.(type) {
			case float64:
				resp.ResyncAfterSeconds = n
			case int64:
				if n == 0 {
					return false
				}
				resp.ResyncAfterSeconds = float64(n)
			default:
				return false
			}
		case "finalized":
			if resp.Finalized, ok = v.(bool); !ok {
				return false
			}
		default:
			return false
		}
	}
	*into = resp
	return true
}

// objects are the children of a reply, each an object that names its
// kind, as Unstructured's UnmarshalJSON takes it.
func objects(v any) ([]*unstructured.Unstructured, bool) {
	list, ok := v.([]any)
	if !ok {
		return nil, false
	}
	out := make([]*unstructured.Unstructured, len(list))
	for i, item := range list {
		obj, ok := item.(map[string]any)
		out[i] = &unstructured.Unstructured{Object: obj}
		if !ok || out[i].GroupVersionKind().Kind == "" {
			return nil, false
		}
	}
	return out, true
}

// DecodeSync decodes the data of a sync or finalize reply, which may have
// at most maxChildren children.
func DecodeSync(hook string, data []byte, strict bool, maxChildren int) (*hooks.SyncResponse, error) {
	resp, err := DecodeData[hooks.SyncResponse](hook, data, strict)
	if err == nil {
		err = CheckCount(len(resp.Children), maxChildren)
	}
	return resp, err
}

// CheckCount refuses a reply with more than limit children or attachments.
func CheckCount(n, limit int) error {
	if n > limit {
		return fmt.Errorf("%d children, more than the %d a reply may have (uc's --max-children-per-reply)", n, limit)
	}
	return nil
}

// Failed is the reason and problem reported on the parent for a failure
// report. A hook's failure says the same whether its request is tried
// again at once (a delivery that failed, Retrying) or later (a request
// dead-lettered: the watcher asks the parent again after its backoff):
// the same failure reported again changes nothing on the parent — no
// status write — and counts once more on its one Warning Event.
func Failed(hook string, f bus.Failure) (string, error) {
	if f.Deliveries == 0 {
		return f.Reason, errors.New(f.Message)
	}
	return v1alpha1.ReasonHookFailed, fmt.Errorf("%s hook failed, will retry: %s: %s", hook, f.Reason, f.Message)
}

// InvalidReply is the reason and problem reported on the parent for a
// reply uc refuses: err says why.
func InvalidReply(hook string, err error) (string, error) {
	return v1alpha1.ReasonInvalidHookReply, fmt.Errorf("%s hook reply rejected: %w", hook, err)
}
