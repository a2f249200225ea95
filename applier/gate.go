package applier

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/shares"
)

// Every write of an apply is fenced twice, so that a replica that was
// paused (a long GC, a frozen VM, SIGSTOP) or cut off past its partition's
// lease writes nothing stale when it goes on:
//
//   - the gate: right before each write, the apply checks, with the
//     process's monotonic clock and no goroutine in between, that this
//     replica still holds the parent's partition (shares.Hold.Check: its
//     key was renewed less than staleAfter ago). Another replica takes a
//     partition only once its key expired, after leaseTTL > staleAfter:
//     while the gate is open, no other replica applies the parent. A timer
//     that ends the hold would not do: after a pause, the apply may run
//     before the timer fires.
//   - the precondition: each write names the resourceVersion of the object
//     it was planned on (basisVersion), the apiserver's optimistic
//     concurrency. A replica paused between the gate and its write meets
//     a conflict if anyone wrote the object meanwhile; a create meets
//     AlreadyExists; a delete carries the UID and resourceVersion.
//
// A conflict is not a failure: the object moved on since the apply read
// it. The apply is retried against the newer object, or superseded by the
// request the change causes.

// gateKey is the context key of an apply's gate.
type gateKey struct{}

// withGate is ctx whose writes pass gate first: nil while they may be
// made.
func withGate(ctx context.Context, gate func() error) context.Context {
	return context.WithValue(ctx, gateKey{}, gate)
}

// mayWrite tells whether the apply of ctx may write now: nil, or why not.
// An apply without a gate (uc's tools, tests) may.
func mayWrite(ctx context.Context) error {
	if gate, _ := ctx.Value(gateKey{}).(func() error); gate != nil {
		if err := gate(); err != nil {
			return fmt.Errorf("not writing: %w", err)
		}
	}
	return ctx.Err()
}

// writableUntil is when the gate of the apply of ctx closed, if it is
// closed now: its writes were all sent before then.
func writableUntil(ctx context.Context) (time.Time, bool) {
	var l *shares.Lapsed
	if errors.As(mayWrite(ctx), &l) {
		return l.Until, true
	}
	return time.Time{}, false
}

// basisVersion is the resourceVersion a write of obj is conditioned on: the
// one the apply's own last write of it left, or else obj's as the apply
// read it.
func basisVersion(ctx context.Context, gvr schema.GroupVersionResource, obj *unstructured.Unstructured) string {
	if w, _ := ctx.Value(wroteKey{}).(*wrote); w != nil {
		if rv, ok := w.resourceVersion(gvr, obj.GetNamespace(), obj.GetName()); ok {
			return rv
		}
	}
	return obj.GetResourceVersion()
}

// preconditions of a delete: the object's UID, and its resourceVersion as
// it was read, when known.
func preconditions(uid types.UID, rv string) *metav1.Preconditions {
	p := &metav1.Preconditions{UID: &uid}
	if rv != "" {
		p.ResourceVersion = &rv
	}
	return p
}
