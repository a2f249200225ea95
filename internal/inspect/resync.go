package inspect

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Requester sends core NATS requests; *nats.Conn does.
type Requester interface {
	RequestWithContext(ctx context.Context, subject string, data []byte) (*nats.Msg, error)
}

// Resynced says what the watcher answered for one parent.
type Resynced struct {
	Controller string `json:"controller"`
	Parent     string `json:"parent"`
	// Error is why the watcher did not queue it; empty when it did.
	Error string `json:"error,omitempty"`
}

// errNoWatcher says no watcher took a resync request.
var errNoWatcher = errors.New("no watcher answered: is uc's watcher running (uc run, or the active uc watcher)?")

// resyncTimeout bounds the watcher's answer to one resync request.
const resyncTimeout = 5 * time.Second

// ResyncParent asks the watcher to sync the target now, for each
// controller that manages it (or the one named), with a new hook request
// even when nothing changed. partitions is the installation's
// --partitions.
func ResyncParent(ctx context.Context, c *Cluster, nc Requester, t Target, controller string, partitions int) ([]Resynced, error) {
	parent, ctls, err := c.parentOf(ctx, t, controller)
	if err != nil {
		return nil, err
	}
	var out []Resynced
	for _, ctl := range ctls {
		if !ctl.ParentSelector.Matches(labels.Set(parent.GetLabels())) {
			out = append(out, Resynced{Controller: ctl.Name, Parent: parent.GetName(), Error: "the controller's parentResource.labelSelector does not select it"})
			continue
		}
		r, err := resync(ctx, nc, ctl.Name, partitions, parent)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// ResyncController asks the watcher to sync every parent of the controller
// in namespace ("": in every namespace) now.
func ResyncController(ctx context.Context, c *Cluster, nc Requester, controller, namespace string, partitions int) ([]Resynced, error) {
	ctl, parents, err := c.ParentsOf(ctx, controller, namespace)
	if err != nil {
		return nil, err
	}
	out := make([]Resynced, 0, len(parents))
	for i := range parents {
		r, err := resync(ctx, nc, ctl.Name, partitions, &parents[i])
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

// resync sends one resync request (see bus.ResyncPrefix) and reads the
// watcher's answer.
func resync(ctx context.Context, nc Requester, controller string, partitions int, parent *unstructured.Unstructured) (Resynced, error) {
	addr := bus.Address{Controller: controller, Hook: hooks.Sync, Partition: bus.Partition(parent.GetUID(), max(partitions, 1)), ParentUID: parent.GetUID()}
	r := Resynced{Controller: controller, Parent: bus.Meta{Namespace: parent.GetNamespace(), Name: parent.GetName()}.Key()}
	body, err := json.Marshal(bus.Resync{Namespace: parent.GetNamespace(), Name: parent.GetName()})
	if err != nil {
		return r, err
	}
	ctx, cancel := context.WithTimeout(ctx, resyncTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, addr.ResyncSubject(), body)
	if errors.Is(err, nats.ErrNoResponders) {
		return r, errNoWatcher
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return r, fmt.Errorf("resync %s: no answer from the watcher within %s (does its NATS user allow responses? see uc nats-config): %w", r.Parent, resyncTimeout, err)
	}
	if err != nil {
		return r, fmt.Errorf("resync %s: %w", r.Parent, err)
	}
	var answer bus.ResyncAnswer
	if err := json.Unmarshal(msg.Data, &answer); err != nil {
		return r, fmt.Errorf("resync %s: the watcher's answer %q: %w", r.Parent, msg.Data, err)
	}
	r.Error = answer.Error
	return r, nil
}
