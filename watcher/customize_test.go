package watcher

import (
	"testing"

	"universalcontroller.dev/uc/core"
	"universalcontroller.dev/uc/internal/tracing"
	"universalcontroller.dev/uc/internal/verdict"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
)

// unregistered is a registry that has registered no controller, and may
// register any (it has not listed them yet) or none.
type unregistered struct {
	Registry
	listing bool
}

func (r unregistered) Get(string) (*core.Controller, bool) { return nil, false }
func (r unregistered) MayExist(string) bool                { return r.listing }

// TestCustomizeReplyWaitsForItsController: a customize reply of a
// controller the watcher's registry has not registered yet waits (it is
// taken again later), as those that waited in the stream do when a new
// watcher starts before its registry has listed the controllers; once the
// registry has listed them, a reply of a controller it does not serve is
// dropped.
func TestCustomizeReplyWaitsForItsController(t *testing.T) {
	meta := bus.Meta{Address: bus.Address{Controller: "c", Hook: hooks.Customize, Partition: 1, ParentUID: "uid-p"},
		Namespace: "ns", Name: "p", Generation: 1, Observation: 1}
	for _, tt := range []struct {
		name    string
		listing bool
		// waits: the reply is taken again later; else it is dropped.
		waits bool
	}{
		{"not listed yet", true, true},
		{"not served", false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			w := &Watcher{reg: unregistered{listing: tt.listing}, tracer: tracing.Tracer(nil)}
			err := w.onCustomizeReply(t.Context(), customizeReply(t, meta))
			if waits := err != nil && verdict.Of(err) == verdict.Wait; waits != tt.waits || !waits && err != nil {
				t.Errorf("err = %v; want the reply to wait: %v", err, tt.waits)
			}
		})
	}
}
