package core

import (
	"errors"
	"fmt"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// DecodeData decodes the data of a hook's reply (see decodeReply).
func DecodeData[T any](hook string, data []byte, strict bool) (*T, error) {
	var resp T
	if err := hooks.DecodeReply(data, &resp, strict); err != nil {
		return nil, fmt.Errorf("not a valid %s response: %w", hook, err)
	}
	return &resp, nil
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
