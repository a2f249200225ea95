package applier

import (
	"context"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
)

// An apply's writes, named in the notice of its end (bus.Applying.Wrote):
// the watcher syncs the parent again only once its caches saw each of them,
// so that the hook's next request observes the whole apply at once. The
// writes are made at the far ends of an apply — the children by the
// writer, the status, the finalizer, a decorated object — so the list
// rides in the apply's context, as the trace's span does.

// wrote is the list of one apply's writes.
type wrote struct {
	mu   sync.Mutex
	list []bus.Written
}

type wroteKey struct{}

// maxNotedWrites bounds the writes an apply notice names; past it, the
// notice names none, and the watcher syncs the parent as soon as the apply
// ended (as the notice of an applier that names no writes does).
const maxNotedWrites = 2000

// withWrote is ctx with an empty list of writes, to which the writes made
// with it are added.
func withWrote(ctx context.Context) (context.Context, *wrote) {
	w := &wrote{}
	return context.WithValue(ctx, wroteKey{}, w), w
}

// noteWritten adds obj, as the apiserver answered a write of it, to the
// writes of the apply of ctx.
func noteWritten(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) {
	if obj != nil {
		note(ctx, written(gvr, obj.GetNamespace(), obj.GetName(), obj.GetResourceVersion(), ""))
	}
}

// noteDeleted adds the delete of the object with that uid to the writes of
// the apply of ctx.
func noteDeleted(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured, uid types.UID) {
	note(ctx, written(gvr, obj.GetNamespace(), obj.GetName(), "", string(uid)))
}

func written(gvr schema.GroupVersionResource, namespace, name, resourceVersion, deleted string) bus.Written {
	return bus.Written{Group: gvr.Group, Version: gvr.Version, Resource: gvr.Resource,
		Namespace: namespace, Name: name, ResourceVersion: resourceVersion, Deleted: deleted}
}

func note(ctx context.Context, wr bus.Written) {
	w, _ := ctx.Value(wroteKey{}).(*wrote)
	if w == nil {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	w.list = append(w.list, wr)
}

// resourceVersion is the resourceVersion the apply's last write of the
// object left, if it wrote it.
func (w *wrote) resourceVersion(gvr schema.GroupVersionResource, namespace, name string) (string, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for i := len(w.list) - 1; i >= 0; i-- {
		wr := w.list[i]
		if wr.Group == gvr.Group && wr.Version == gvr.Version && wr.Resource == gvr.Resource && wr.Namespace == namespace && wr.Name == name {
			return wr.ResourceVersion, wr.Deleted == ""
		}
	}
	return "", false
}

// all is the writes, none when there were more than maxNotedWrites.
func (w *wrote) all() []bus.Written {
	w.mu.Lock()
	defer w.mu.Unlock()
	if len(w.list) > maxNotedWrites {
		return nil
	}
	return w.list
}
