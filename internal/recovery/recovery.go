// Package recovery keeps a uc process up when the work on one item panics.
// Every worker loop in uc — the registry registering a controller, the
// watcher syncing a parent, the applier applying one (the three loops of
// internal/workloop), the dispatcher delivering to a hook — recovers per
// item, as Kubernetes controllers do: the panic is logged with the item's
// key and the stack, counted in Panics, and becomes the item's error, so
// the item is retried with its loop's backoff and the other items go on.
// (The Go hook SDK, sdk/go/hook, recovers its calls the same way, on its own: a
// hook worker does not carry uc's metrics.)
//
// client-go's utilruntime.HandleCrash re-panics (ReallyCrash, a process-wide
// setting, also governs client-go's own goroutines), and
// utilruntime.RecoverFromPanic puts the stack in the error, which uc reports
// on the parent in Events and conditions: neither fits here.
package recovery

import (
	"fmt"
	"log/slog"
	"runtime/debug"

	"github.com/prometheus/client_golang/prometheus"
)

// The components whose panics Panics counts.
const (
	Registry = "registry" // registering a controller
	Watcher  = "watcher"  // syncing a parent, or handling a customize reply
	Applier  = "applier"  // applying a parent's replies
	Hook     = "hook"     // a hook call of the dispatcher: a webhook or destination delivery (recovered by the Go SDK, counted through its OnPanic)
)

// Panics counts the panics recovered, by component. uc serves it with its
// metrics.
var Panics = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "uc_panics_total",
	Help: "Panics recovered while working on one item (a parent's sync or apply, a hook call), by component. The item was retried; the process stayed up.",
}, []string{"component"})

// Recover, deferred by a function that works on one item and returns its
// error in *err, turns a panic of that function into *err. It logs the
// panic with args (the item's key, as slog key-value pairs) and the stack,
// and counts it for component. It must be deferred itself, not called from
// a deferred function: only then does it see the panic.
func Recover(err *error, component string, log *slog.Logger, args ...any) {
	r := recover()
	if r == nil {
		return
	}
	Panics.WithLabelValues(component).Inc()
	log.Error("recovered from a panic", append(args, "panic", r, "stack", string(debug.Stack()))...)
	*err = fmt.Errorf("panic: %v", r)
}
