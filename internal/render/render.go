// Package render runs a controller's hook once, offline (`uc render`): it
// builds the request uc would send for a parent, calls the hook with it,
// and checks the reply as the applier would, without a bus and, unless
// asked to read the observed objects from one, without a cluster.
// Everything that decides is uc's own code, fed from files: the request is
// the watcher's (core.Claim, core.NewSyncRequest), the call the
// hook workers' (exechook, the dispatcher's webhook client), the reply's
// rules and the plan the applier's (core.Check).
package render

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/google/uuid"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/schemas/hooks"
)

// Options are what to render.
type Options struct {
	// Controller are the files of the controller object (a
	// UniversalController or UniversalDecorator, or Metacontroller's
	// CompositeController or DecoratorController; of several, the one whose
	// parents are of the parent's kind); CustomResourceDefinitions among
	// them, and in CRDs, define the custom resources it names.
	Controller, CRDs []string
	// Parent is the file of the parent object: a decorator's, the object
	// it decorates.
	Parent string
	// Observed and Related are files or directories of the objects the
	// parent's request observes: its children, and what its customize hook
	// may select. Without Observed, the parent has no children yet.
	Observed, Related []string
	// Kubeconfig, when set, reads the observed and related objects from
	// that cluster instead of files, read-only.
	Kubeconfig string
	// Hook is the hook called: sync, finalize or customize; empty, the one
	// uc would call for the parent (finalize for a parent being deleted).
	Hook string
	// Exec is a command line, run by sh -c, that serves the hook as `uc
	// worker` runs one; URL is a webhook. With neither, the controller's
	// own webhook is called.
	Exec, URL string
	// Timeout bounds the call; 0 is the controller's delivery timeout for
	// the hook, as uc's workers use it.
	Timeout time.Duration
	// MaxReplyBytes bounds the reply; MaxChildren its children.
	MaxReplyBytes int64
	MaxChildren   int
	// Output is yaml, json, or request (the request alone, no call).
	Output string
	// Save, when set, is a directory where RunReplay writes the request it
	// replays as files Run reads.
	Save string
}

// Run renders one call of the hook, writing the result to out and notes
// (what render assumed, the hook's standard error) to notes. A reply the
// applier would reject, or a call that fails, is an *core.Rejection
// that says what the parent would.
func Run(ctx context.Context, opts Options, out, notes io.Writer) (err error) {
	in, err := load(ctx, opts, notes)
	if err != nil {
		return err
	}
	defer func() {
		if r := (*core.Rejection)(nil); in.decorated != nil && errors.As(err, &r) {
			r.Decorated = true
		}
	}()
	hook, err := in.hook(opts.Hook)
	if err != nil {
		return err
	}
	call := in.caller(opts, notes)
	if hook == hooks.Customize {
		return renderCustomize(ctx, in, call, opts, out)
	}
	related, err := in.relatedObjects(ctx, call, hook)
	if err != nil {
		return err
	}
	req, err := in.request(hook, related)
	if err != nil {
		return err
	}
	if opts.Output == OutputRequest {
		return printJSON(out, req)
	}
	return in.callAndPrint(ctx, call, hook, req, opts, out, notes)
}

// callAndPrint calls the hook with a sync or finalize request, checks and
// plans its reply as the applier would, and prints the result.
func (in *inputs) callAndPrint(ctx context.Context, call caller, hook string, req any, opts Options, out, notes io.Writer) error {
	reply, err := call(ctx, hook, req)
	if err != nil {
		return err
	}
	r, err := in.check(hook, reply, opts.MaxChildren)
	if err != nil {
		return err
	}
	if in.ctl.Rolling() {
		fmt.Fprintln(notes, "note: the controller rolls its children out: uc moves them to this reply's one at a time, and asks the hook about older revisions too; the plan is as if every child were on the latest revision")
	}
	return printResult(out, opts.Output, r)
}

// hook is the hook called: the one asked for, or the one uc would call.
func (in *inputs) hook(asked string) (string, error) {
	if asked != "" {
		return asked, nil
	}
	var hook string
	var ok bool
	if in.decorated != nil {
		hook, ok = core.HookForDecorated(in.ctl, in.decorated, in.parent)
	} else {
		hook, ok = core.HookFor(in.ctl, in.parent)
	}
	if !ok {
		return "", errors.New("the parent is being deleted, or no longer selected, and no finalizer of uc's holds it: uc sends it no request")
	}
	return hook, nil
}

// request builds the parent's sync or finalize request, a controller's or
// a decorator's.
func (in *inputs) request(hook string, related hooks.GroupedObjects) (any, error) {
	if in.decorated == nil {
		return in.syncRequest(hook, related)
	}
	attached, err := core.Attachments(in.children, in.ctl, in.parent)
	if err != nil {
		return nil, err
	}
	return core.NewDecoratorRequest(in.ctl, in.parent, attached, related, in.ctl.HookVersion(hook), hook == hooks.Finalize), nil
}

// check checks and plans a reply as the applier would.
func (in *inputs) check(hook string, reply []byte, maxChildren int) (*Result, error) {
	if in.decorated == nil {
		checked, err := core.Check(in.ctl, in.parent, hook, reply, maxChildren, in.children)
		if err != nil {
			return nil, err
		}
		resp := checked.Response
		return newResult(in, hook, replied{status: resp.Status, children: resp.Children, resync: resp.ResyncAfterSeconds, finalized: resp.Finalized,
			events: resp.Events, conditions: resp.Conditions}, checked.Writes), nil
	}
	checked, err := core.CheckDecoration(in.ctl, in.parent, hook, reply, maxChildren, in.children)
	if err != nil {
		return nil, err
	}
	resp := checked.Response
	return newResult(in, hook, replied{status: resp.Status, children: resp.Attachments, resync: resp.ResyncAfterSeconds, finalized: resp.Finalized,
		labels: resp.Labels, annotations: resp.Annotations}, checked.Writes), nil
}

// syncRequest builds the parent's sync or finalize request as the
// watcher does.
func (in *inputs) syncRequest(hook string, related hooks.GroupedObjects) (*hooks.SyncRequest, error) {
	sel, err := in.ctl.Selector(in.parent)
	if err != nil {
		// The watcher asks no hook, and reports why on the parent.
		return nil, core.HookFailed(hook, core.InvalidSelector(err))
	}
	claimed, err := core.Claim(in.children, in.ctl, in.parent, sel)
	if err != nil {
		return nil, err
	}
	return core.NewSyncRequest(in.ctl, in.parent, claimed, related, in.ctl.HookVersion(hook), hook == hooks.Finalize), nil
}

// preparedParent makes the parent from its file as it would be in the
// cluster and in uc's cache: in its namespace (default, for a namespaced
// parent without one), with a UID (when it has none, its namesake's that
// liveUID finds, if any, else one made up from its kind and name; said in
// notes), without managedFields. A parent uc would not sync is an error.
func preparedParent(ctl *core.Controller, parent *unstructured.Unstructured, liveUID func(*unstructured.Unstructured) (string, error), notes io.Writer) error {
	if gvk := parent.GroupVersionKind(); gvk != ctl.Parent.GVK {
		return fmt.Errorf("the parent is a %s, but %s's parents are %s", gvk, ctl.Name, ctl.Parent.GVK)
	}
	switch {
	case ctl.Parent.Namespaced && parent.GetNamespace() == "":
		parent.SetNamespace("default")
	case !ctl.Parent.Namespaced && parent.GetNamespace() != "":
		return fmt.Errorf("the parent has a namespace, but %s is cluster-scoped", ctl.Parent.GVR.GroupResource())
	}
	if parent.GetUID() == "" && liveUID != nil {
		uid, err := liveUID(parent)
		if err != nil {
			return err
		}
		if uid != "" {
			parent.SetUID(types.UID(uid))
			fmt.Fprintf(notes, "note: the parent has no metadata.uid; rendered with its namesake's in the cluster, %s\n", uid)
		}
	}
	if parent.GetUID() == "" {
		uid := uuid.NewSHA1(uuid.NameSpaceURL, []byte("uc-render:"+ctl.Parent.Key()+"/"+parent.GetNamespace()+"/"+parent.GetName()))
		parent.SetUID(types.UID(uid.String()))
		fmt.Fprintf(notes, "note: the parent has no metadata.uid; rendered with %s\n", uid)
	}
	parent.SetManagedFields(nil)
	if ctl.Decorator == nil && !ctl.ParentSelector.Matches(labels.Set(parent.GetLabels())) {
		return fmt.Errorf("the parent's labels do not match %s's parentResource.labelSelector %q: uc does not sync it", ctl.Name, ctl.ParentSelector)
	}
	return nil
}
