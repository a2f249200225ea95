package contracttest_test

import (
	"encoding/json"
	"maps"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// TestMessagesMatchTheContract: the SDK's messages have the JSON fields of
// schemas/hooks' — the types uc itself reads and writes — field for field,
// and nested types too (objects aside: plain JSON here, unstructured
// there). A field added to the contract fails here until the SDK has it.
func TestMessagesMatchTheContract(t *testing.T) {
	for _, tc := range []struct{ sdk, contract any }{
		{hook.SyncRequest{}, hooks.SyncRequest{}},
		{hook.SyncResponse{}, hooks.SyncResponse{}},
		{hook.CustomizeRequest{}, hooks.CustomizeRequest{}},
		{hook.CustomizeResponse{}, hooks.CustomizeResponse{}},
		{hook.DecoratorRequest{}, hooks.DecoratorRequest{}},
		{hook.DecoratorResponse{}, hooks.DecoratorResponse{}},
	} {
		sdk, contract := reflect.TypeOf(tc.sdk), reflect.TypeOf(tc.contract)
		t.Run(sdk.Name(), func(t *testing.T) { sameFields(t, sdk.Name(), sdk, contract) })
	}
	for _, tc := range []struct {
		sdk      hook.Handler
		contract string
	}{
		{hook.Sync(nil), hooks.Sync}, {hook.Shadow(nil), hooks.SyncShadow}, {hook.Finalize(nil), hooks.Finalize},
		{hook.Customize(nil), hooks.Customize}, {hook.DecoratorSync(nil), hooks.Sync}, {hook.DecoratorFinalize(nil), hooks.Finalize},
	} {
		if tc.sdk.Hook() != tc.contract {
			t.Errorf("hook name %q, the contract's %q", tc.sdk.Hook(), tc.contract)
		}
	}
}

// sameFields fails unless the structs sdk and contract have the same JSON
// fields, and the fields that are structs on both sides the same in turn.
func sameFields(t *testing.T, path string, sdk, contract reflect.Type) {
	t.Helper()
	s, c := jsonFields(sdk), jsonFields(contract)
	for _, name := range slices.Sorted(maps.Keys(c)) {
		if _, ok := s[name]; !ok {
			t.Errorf("%s.%s is in the contract (%s), not in the SDK", path, name, contract)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(s)) {
		ct, ok := c[name]
		if !ok {
			t.Errorf("%s.%s is in the SDK, not in the contract (%s)", path, name, contract)
			continue
		}
		if st, ct := element(s[name]), element(ct); st.Kind() == reflect.Struct && ct.Kind() == reflect.Struct {
			sameFields(t, path+"."+name, st, ct)
		}
	}
}

// jsonFields are a struct's fields by JSON name, embedded structs' inlined.
func jsonFields(typ reflect.Type) map[string]reflect.Type {
	fields := map[string]reflect.Type{}
	for f := range typ.Fields() {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		switch {
		case name == "-" || !f.IsExported():
		case f.Anonymous && name == "":
			for n, ft := range jsonFields(element(f.Type)) {
				fields[n] = ft
			}
		case name == "":
			fields[f.Name] = f.Type
		default:
			fields[name] = f.Type
		}
	}
	return fields
}

// element is what a field holds: the element of pointers, slices and maps.
func element(typ reflect.Type) reflect.Type {
	for typ.Kind() == reflect.Pointer || typ.Kind() == reflect.Slice || typ.Kind() == reflect.Map {
		typ = typ.Elem()
	}
	return typ
}

// TestPolicyReadsTheControllerSpec: the worker reads the delivery of a
// controller as uc's API types write it, so a field renamed there is seen
// here.
func TestPolicyReadsTheControllerSpec(t *testing.T) {
	duration := func(d time.Duration) *metav1.Duration { return &metav1.Duration{Duration: d} }
	maxDeliveries := int32(4)
	uc := v1alpha1.UniversalController{Spec: v1alpha1.UniversalControllerSpec{Hooks: v1alpha1.ControllerHooks{Hooks: v1alpha1.Hooks{
		Finalize: &v1alpha1.Hook{Delivery: &v1alpha1.Delivery{Timeout: duration(2 * time.Second), MaxDeliveries: &maxDeliveries,
			BackoffDelay: duration(time.Millisecond), MaxBackoffDelay: duration(time.Hour)}},
		Sync: v1alpha1.SyncHook{Hook: v1alpha1.Hook{Webhook: &v1alpha1.Webhook{Timeout: duration(3 * time.Second)}, Delivery: &v1alpha1.Delivery{Timeout: duration(2 * time.Second)}},
			Shadow: &v1alpha1.Hook{Delivery: &v1alpha1.Delivery{Timeout: duration(5 * time.Second), MaxDeliveries: &maxDeliveries}}},
	}}}}
	data, err := json.Marshal(map[string]any{"controller": uc})
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]hook.Policy{
		"finalize":    {Timeout: 2 * time.Second, MaxDeliveries: 4, BackoffDelay: time.Millisecond, MaxBackoffDelay: time.Hour},
		"sync":        {Timeout: 3 * time.Second, MaxDeliveries: 10, BackoffDelay: time.Second, MaxBackoffDelay: time.Minute},
		"sync-shadow": {Timeout: 5 * time.Second, MaxDeliveries: 4, BackoffDelay: time.Second, MaxBackoffDelay: time.Minute},
	} {
		if got := hook.DefaultPolicy.ForRequest(data, name); got != want {
			t.Errorf("%s: got %+v, want %+v", name, got, want)
		}
	}
}
