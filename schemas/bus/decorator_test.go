package bus

import "testing"

func TestDecoratorNames(t *testing.T) {
	c := DecoratorController("service.per.pod")
	if name, ok := DecoratorOf(c); !ok || name != "service.per.pod" {
		t.Errorf("DecoratorOf(%q) = %q, %t", c, name, ok)
	}
	if _, ok := DecoratorOf("service-per-pod"); ok {
		t.Error("a UniversalController's name was taken for a decorator's")
	}
	a := Address{Controller: c, Hook: "sync", Partition: 2, ParentUID: "u-1"}
	if s := a.RequestSubject(); s != "uc.req.ucd=service_per_pod.sync.2.u-1" {
		t.Errorf("request subject %q", s)
	}
	if got, ok := ControllerOf(a.ReplySubject()); !ok || got != c {
		t.Errorf("ControllerOf(%q) = %q", a.ReplySubject(), got)
	}
	if got := HookConsumer(c, "sync"); got != "hook_ucd=service_per_pod_sync" {
		t.Errorf("hook consumer %q", got)
	}
	// One object: its controller's parent, and decorated by two
	// decorators, has three keys at the appliers.
	keys := map[string]bool{}
	for _, controller := range []string{"service-per-pod", c, DecoratorController("other")} {
		keys[string(Address{Controller: controller, ParentUID: "u-1"}.ApplyKey())] = true
	}
	if len(keys) != 3 || !keys["u-1"] {
		t.Errorf("apply keys %v: want the UID for the controller and one per decorator", keys)
	}
}

func TestDecoratedEventRoundTrip(t *testing.T) {
	roundTrip(t, Meta{
		Address:   Address{Controller: DecoratorController("d"), Hook: "finalize", Partition: 3, ParentUID: "u-1"},
		Namespace: "ns", Name: "web", Generation: 4, ResourceVersion: "99", Observation: 1234567890123,
		RequestID: "req-1", Resource: "apps/v1/statefulsets",
	})
}

func TestMetacontrollerNames(t *testing.T) {
	tests := []struct {
		controller string
		decorator  string // "": not a decorator
		request    string
	}{
		{CompositeController("web.app"), "", "uc.req.cc=web_app.sync.1.u-1"},
		{MetacontrollerDecorator("web.app"), "web.app", "uc.req.dc=web_app.sync.1.u-1"},
	}
	keys := map[string]bool{}
	for _, tt := range tests {
		name, ok := DecoratorOf(tt.controller)
		if ok != (tt.decorator != "") || name != tt.decorator {
			t.Errorf("DecoratorOf(%q) = %q, %t", tt.controller, name, ok)
		}
		a := Address{Controller: tt.controller, Hook: "sync", Partition: 1, ParentUID: "u-1"}
		if s := a.RequestSubject(); s != tt.request {
			t.Errorf("request subject %q, want %q", s, tt.request)
		}
		keys[string(a.ApplyKey())] = true
	}
	// Metacontroller's DecoratorController and a UniversalDecorator of the
	// same name never share a fence key.
	keys[string(Address{Controller: DecoratorController("web.app"), ParentUID: "u-1"}.ApplyKey())] = true
	if len(keys) != 3 {
		t.Errorf("apply keys %v: want three", keys)
	}
}
