package inspect

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// Trace is one parent of one controller along the pipeline: the parent as
// it is, the request and the reply on their way, the last reply applied,
// what the parent and its children say, and the requests no hook served.
type Trace struct {
	Controller string `json:"controller"`
	Parent     Parent `json:"parent"`
	// Selected: the controller's parentResource.labelSelector selects the
	// parent. A parent it does not select gets no requests.
	Selected bool `json:"selected"`
	// Verdict says in one line where the parent is, and what to do.
	Verdict Verdict `json:"verdict"`
	// Published is the last request the active watcher published for the
	// parent since it became active: nil when it did not answer
	// (WatcherProblem says why), no ID when it published none.
	Published      *bus.LastPublished `json:"published,omitempty"`
	WatcherProblem string             `json:"watcherProblem,omitempty"`
	// Hooks are the controller's hooks, each with its request and reply
	// on their way.
	Hooks []Hook `json:"hooks"`
	// Fence is the last reply applied (nil: none yet).
	Fence *Fence `json:"fence,omitempty"`
	// Partition is the parent's applier partition, and the replica that
	// holds it.
	Partition Partition `json:"partition"`
	// Conditions are the parent's status.conditions.
	Conditions []Condition `json:"conditions,omitempty"`
	// Children are the parent's children, and the objects it could adopt.
	Children []Child `json:"children"`
	// ChildrenProblem says why children could not be told apart (a
	// parent without a selector).
	ChildrenProblem string `json:"childrenProblem,omitempty"`
	// Events are the parent's latest Events, the oldest first.
	Events []Event `json:"events,omitempty"`
	// DeadLetters are the parent's requests no hook could serve, the
	// oldest first.
	DeadLetters []*DeadLetter `json:"deadLetters,omitempty"`
	// DryRun: the controller writes nothing (spec.dryRun); its applier
	// publishes plans instead.
	DryRun bool `json:"dryRun,omitempty"`
	// Plans are the parent's last plans, one per hook planned: a dry-run
	// controller's sync and finalize replies, and a shadow's reply
	// (sync-shadow) with how it differs from the sync hook's.
	Plans []*Message `json:"plans,omitempty"`
}

// Parent is the parent as the apiserver has it.
type Parent struct {
	APIVersion      string `json:"apiVersion"`
	Kind            string `json:"kind"`
	Namespace       string `json:"namespace,omitempty"`
	Name            string `json:"name"`
	UID             string `json:"uid"`
	Generation      int64  `json:"generation"`
	ResourceVersion string `json:"resourceVersion"`
	// ObservedGeneration is status.observedGeneration, when there.
	ObservedGeneration *int64 `json:"observedGeneration,omitempty"`
	// Deleting: it has a deletionTimestamp; its finalize hook runs.
	Deleting   bool     `json:"deleting,omitempty"`
	Finalizers []string `json:"finalizers,omitempty"`
}

// Key is the parent's namespace/name.
func (p Parent) Key() string {
	if p.Namespace == "" {
		return p.Name
	}
	return p.Namespace + "/" + p.Name
}

// Hook is one hook of the controller for the parent.
type Hook struct {
	Name string `json:"name"`
	// Serves says who serves the hook: bus-native workers, or the
	// dispatcher for a webhook or a destination.
	Serves string `json:"serves"`
	// Consumer is the hook's durable consumer (nil: it does not exist).
	Consumer *Consumer `json:"consumer,omitempty"`
	// Request is the parent's request waiting in UC_REQUESTS, served or
	// not (nil: none).
	Request *Message `json:"request,omitempty"`
	// Delivered: the consumer delivered the request to a worker, which
	// has not acknowledged it yet (it serves it, or waits to retry it).
	Delivered bool `json:"delivered,omitempty"`
	// Reply is the parent's reply (or failure) waiting in UC_REPLIES for
	// an applier (nil: none).
	Reply *Message `json:"reply,omitempty"`
}

// Partition is the parent's applier partition.
type Partition struct {
	Number int `json:"number"`
	// Holder is the applier replica that holds it; empty when none does.
	Holder string `json:"holder,omitempty"`
}

// Condition is one of the parent's status.conditions.
type Condition struct {
	Type               string     `json:"type"`
	Status             string     `json:"status"`
	Reason             string     `json:"reason,omitempty"`
	Message            string     `json:"message,omitempty"`
	ObservedGeneration *int64     `json:"observedGeneration,omitempty"`
	LastTransition     *time.Time `json:"lastTransitionTime,omitempty"`
}

// TraceOptions tune Trace.
type TraceOptions struct {
	// Controller, when not empty, is the one controller to trace for.
	Controller string
	// Partitions is the installation's --partitions, for a parent none of
	// whose messages is on the bus.
	Partitions int
	// Events is how many of the parent's latest Events to show.
	Events int
}

// Follow follows one parent through the pipeline of each controller that
// manages it: one Trace per controller.
func Follow(ctx context.Context, c *Cluster, b *Bus, t Target, opts TraceOptions) ([]*Trace, error) {
	parent, ctls, err := c.parentOf(ctx, t, opts.Controller)
	if err != nil {
		return nil, err
	}
	var out []*Trace
	for _, ctl := range ctls {
		tr, err := trace(ctx, c, b, ctl, parent, opts)
		if err != nil {
			return nil, fmt.Errorf("%s of %s: %w", t, ctl.Name, err)
		}
		out = append(out, tr)
	}
	return out, nil
}

// partitionOf is a parent's partition as uc's roles have it
// (core.Controller.Partition): its label's when it carries
// v1alpha1.LabelPartition naming one (watchers sharded), else its UID's.
func partitionOf(parent *unstructured.Unstructured, partitions int) int {
	partitions = max(partitions, 1)
	return (&core.Controller{Partitions: partitions}).Partition(parent, partitions)
}

// trace follows the parent through the pipeline of one controller.
func trace(ctx context.Context, c *Cluster, b *Bus, ctl *core.Controller, parent *unstructured.Unstructured, opts TraceOptions) (*Trace, error) {
	tr := &Trace{Controller: ctl.Name, Parent: parentOf(parent), Selected: ctl.ParentSelector.Matches(labels.Set(parent.GetLabels())),
		Conditions: conditionsOf(parent), Partition: Partition{Number: partitionOf(parent, opts.Partitions)}}
	key := bus.Address{Controller: ctl.Name, ParentUID: parent.GetUID()}.ApplyKey()
	var err error
	if tr.Fence, err = b.fence(ctx, key); err != nil {
		return nil, err
	}
	if tr.Published, err = b.lastPublished(ctx, ctl.Name, parent, false); err != nil {
		tr.WatcherProblem = err.Error()
	}
	for _, name := range []string{hooks.Sync, hooks.Finalize, hooks.Customize, hooks.SyncShadow} {
		h := ctl.Spec.Hooks.Named(name)
		if h == nil {
			continue
		}
		hook, err := b.hook(ctx, ctl.Name, name, h, parent)
		if err != nil {
			return nil, err
		}
		tr.Hooks = append(tr.Hooks, hook)
		for _, m := range []*Message{hook.Request, hook.Reply} {
			if m != nil { // the partition the installation really uses
				tr.Partition.Number = m.Partition
			}
		}
	}
	if tr.Partition.Holder, err = b.holder(ctx, tr.Partition.Number); err != nil {
		return nil, err
	}
	if tr.DeadLetters, err = b.deadLetters(ctx, bus.ParentSubjects(bus.DeadLetterPrefix, ctl.Name, "*", parent.GetUID())); err != nil {
		return nil, err
	}
	if tr.Children, err = c.children(ctx, ctl, parent); err != nil {
		tr.ChildrenProblem = err.Error()
	}
	if tr.Events, err = c.events(ctx, parent, opts.Events); err != nil {
		return nil, err
	}
	var planned []string
	if tr.DryRun = ctl.DryRun(); tr.DryRun {
		planned = append(planned, hooks.Sync, hooks.Finalize)
	}
	if ctl.Shadow() != nil {
		planned = append(planned, hooks.SyncShadow)
	}
	if tr.Plans, err = b.plans(ctx, ctl.Name, parent.GetUID(), planned...); err != nil {
		return nil, err
	}
	tr.Verdict = verdict(tr)
	return tr, nil
}

// hook reads the parent's request and reply of one hook on the bus, and
// the state of the hook's consumer.
func (b *Bus) hook(ctx context.Context, controller, name string, h *v1alpha1.Hook, parent *unstructured.Unstructured) (Hook, error) {
	hook := Hook{Name: name, Serves: serves(h)}
	var err error
	if hook.Consumer, err = b.consumer(ctx, bus.RequestStream, bus.HookConsumer(controller, name)); err != nil {
		return hook, err
	}
	if hook.Request, err = b.last(ctx, bus.RequestStream, bus.ParentSubjects(bus.RequestPrefix, controller, name, parent.GetUID())); err != nil {
		return hook, err
	}
	hook.Delivered = hook.Request != nil && hook.Consumer != nil && hook.Consumer.Delivered >= hook.Request.Sequence
	hook.Reply, err = b.last(ctx, bus.ReplyStream, bus.ParentSubjects(bus.ReplyPrefix, controller, name, parent.GetUID()))
	return hook, err
}

// serves says who serves a hook.
func serves(h *v1alpha1.Hook) string {
	switch {
	case h.Webhook != nil && h.Webhook.URL != nil:
		return "the dispatcher, calling the webhook " + *h.Webhook.URL
	case h.Webhook != nil && h.Webhook.Service != nil:
		path := ""
		if h.Webhook.Path != nil {
			path = *h.Webhook.Path
		}
		return fmt.Sprintf("the dispatcher, calling the webhook of Service %s/%s%s", h.Webhook.Service.Namespace, h.Webhook.Service.Name, path)
	case h.Destination != nil:
		return "the dispatcher, calling a Knative destination"
	}
	return "bus-native workers"
}

// parentOf reads what a trace shows of the parent.
func parentOf(u *unstructured.Unstructured) Parent {
	p := Parent{APIVersion: u.GetAPIVersion(), Kind: u.GetKind(), Namespace: u.GetNamespace(), Name: u.GetName(),
		UID: string(u.GetUID()), Generation: u.GetGeneration(), ResourceVersion: u.GetResourceVersion(),
		Deleting: u.GetDeletionTimestamp() != nil, Finalizers: u.GetFinalizers()}
	if g, ok, _ := unstructured.NestedInt64(u.Object, "status", "observedGeneration"); ok {
		p.ObservedGeneration = &g
	}
	return p
}

// conditionsOf reads the parent's status.conditions, sorted by type.
func conditionsOf(u *unstructured.Unstructured) []Condition {
	list, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var out []Condition
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok {
			continue
		}
		str := func(k string) string { s, _ := m[k].(string); return s }
		c := Condition{Type: str("type"), Status: str("status"), Reason: str("reason"), Message: str("message")}
		if g, ok, _ := unstructured.NestedInt64(m, "observedGeneration"); ok {
			c.ObservedGeneration = &g
		}
		if at, err := time.Parse(time.RFC3339, str("lastTransitionTime")); err == nil {
			c.LastTransition = &at
		}
		out = append(out, c)
	}
	slices.SortFunc(out, func(a, b Condition) int { return strings.Compare(a.Type, b.Type) })
	return out
}

// condition is the parent's condition of that type, or nil.
func (t *Trace) condition(typ string) *Condition {
	for i := range t.Conditions {
		if t.Conditions[i].Type == typ {
			return &t.Conditions[i]
		}
	}
	return nil
}
