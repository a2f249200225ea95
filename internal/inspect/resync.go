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
	addr := bus.Address{Controller: controller, Hook: hooks.Sync, Partition: partitionOf(parent, partitions), ParentUID: parent.GetUID()}
	r := Resynced{Controller: controller, Parent: Parent{Namespace: parent.GetNamespace(), Name: parent.GetName()}.Key()}
	var answer bus.ResyncAnswer
	if err := askWatcher(ctx, nc, addr.ResyncSubject(), bus.Resync{Namespace: parent.GetNamespace(), Name: parent.GetName()}, &answer); err != nil {
		return r, fmt.Errorf("resync %s: %w", r.Parent, err)
	}
	r.Error = answer.Error
	return r, nil
}

// watcherTimeout bounds the watcher's answer to a request.
const watcherTimeout = 5 * time.Second

// askWatcher sends the active watcher a request on subject (a resync
// request, a bus.Resync, or a question, a bus.Question) and decodes its
// answer into answer.
func askWatcher(ctx context.Context, nc Requester, subject string, request, answer any) error {
	body, err := json.Marshal(request)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, watcherTimeout)
	defer cancel()
	msg, err := nc.RequestWithContext(ctx, subject, body)
	switch {
	case errors.Is(err, nats.ErrNoResponders):
		return errNoWatcher
	case errors.Is(err, context.DeadlineExceeded):
		return fmt.Errorf("no answer from the watcher within %s (may its NATS user answer? see uc nats-config): %w", watcherTimeout, err)
	case err != nil:
		return err
	}
	if err := json.Unmarshal(msg.Data, answer); err != nil {
		return fmt.Errorf("the watcher's answer %q: %w", msg.Data, err)
	}
	return nil
}
