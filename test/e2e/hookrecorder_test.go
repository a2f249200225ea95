package e2e

// The recording hook: a hook.Handler that records each call (what the
// parent and its children were) before it runs the hook, so that tests
// can count calls and say what each call observed.

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"sync"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// hookCall is one recorded hook call.
type hookCall struct {
	hook            string
	generation      int64
	resourceVersion string
	finalizing      bool
	children        map[string][]string // keys of the observed children, by group
}

// recorder records a controller's hook calls per parent (namespace/name).
type recorder struct {
	mu    sync.Mutex
	calls map[string][]hookCall
}

func newRecorder() *recorder { return &recorder{calls: map[string][]hookCall{}} }

// handler serves fn as the hook, recording every call before it runs.
func (r *recorder) handler(name string, fn func(context.Context, *hooks.SyncRequest) (any, error)) hook.Handler {
	return recordingHandler{name, r, fn}
}

// recordingHandler is the hook.Handler recorder.handler returns.
type recordingHandler struct {
	hook string
	r    *recorder
	fn   func(context.Context, *hooks.SyncRequest) (any, error)
}

func (h recordingHandler) Hook() string { return h.hook }

// Handle records the call, then runs the hook.
func (h recordingHandler) Handle(ctx context.Context, data []byte) (any, error) {
	var req hooks.SyncRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	c := hookCall{hook: h.hook, generation: req.Parent.GetGeneration(), resourceVersion: req.Parent.GetResourceVersion(),
		finalizing: req.Finalizing, children: map[string][]string{}}
	for group, objs := range req.Children {
		c.children[group] = slices.Sorted(maps.Keys(objs))
	}
	key := req.Parent.GetNamespace() + "/" + req.Parent.GetName()
	h.r.mu.Lock()
	h.r.calls[key] = append(h.r.calls[key], c)
	h.r.mu.Unlock()
	return h.fn(ctx, &req)
}

// of lists the calls for a parent.
func (r *recorder) of(namespace, name string) []hookCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls[namespace+"/"+name])
}

// count is how many calls there were for a parent.
func (r *recorder) count(namespace, name string) int { return len(r.of(namespace, name)) }

// typed adapts an SDK's SyncFunc (an example's hook) to recorder.handler:
// fn gets the request as the SDK decodes it.
func typed(fn hook.SyncFunc) func(context.Context, *hooks.SyncRequest) (any, error) {
	return func(ctx context.Context, req *hooks.SyncRequest) (any, error) {
		data, err := json.Marshal(req)
		if err != nil {
			return nil, err
		}
		return hook.Sync(fn).Handle(ctx, data)
	}
}
