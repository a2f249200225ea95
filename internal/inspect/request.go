package inspect

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
)

// LastRequest is the last request uc published for a parent, as the
// active watcher gives it (uc render --from-trace).
type LastRequest struct {
	// Controller is the controller the request is for.
	Controller *core.Controller
	// Published is what the watcher last published for the parent; the
	// request is that one's when Request.Published is true.
	Published *bus.LastPublished
	Request   *bus.CurrentRequest
}

// RequestOf asks the active watcher for the parent's last request: of the
// controller named, or of the one controller that selects the parent.
func RequestOf(ctx context.Context, c *Cluster, b *Bus, t Target, controller string) (*LastRequest, error) {
	parent, ctls, err := c.parentOf(ctx, t, controller)
	if err != nil {
		return nil, err
	}
	if len(ctls) > 1 {
		var names []string
		for _, ctl := range ctls {
			names = append(names, ctl.Name)
		}
		return nil, fmt.Errorf("%s is managed by %d controllers, %v: name one with --controller", t, len(ctls), names)
	}
	ctl := ctls[0]
	if !ctl.ParentSelector.Matches(labels.Set(parent.GetLabels())) {
		return nil, fmt.Errorf("%s: %s's parentResource.labelSelector does not select it: uc sends it no request", t, ctl.Name)
	}
	answer, err := b.lastPublished(ctx, ctl.Name, parent, true)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", t, err)
	}
	if answer.Request == nil {
		problem := answer.RequestProblem
		if problem == "" {
			problem = "the watcher gave no request (is it older than this uc?)"
		}
		return nil, fmt.Errorf("%s: %s", t, problem)
	}
	return &LastRequest{Controller: ctl, Published: answer, Request: answer.Request}, nil
}
