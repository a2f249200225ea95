package v1alpha1

import "testing"

// TestStrictReplies: a webhook's responseUnMarshallMode decides; without
// it, v2 hooks are strict and v1 hooks loose, as in Metacontroller.
func TestStrictReplies(t *testing.T) {
	mode := func(m ResponseUnmarshallMode) *Webhook { return &Webhook{ResponseUnmarshallMode: &m} }
	for _, tc := range []struct {
		name string
		hook *Hook
		want bool
	}{
		{"not declared", nil, false},
		{"v1 default", &Hook{}, false},
		{"v1", &Hook{Version: HookV1}, false},
		{"v2", &Hook{Version: HookV2}, true},
		{"v2 webhook", &Hook{Version: HookV2, Webhook: &Webhook{}}, true},
		{"v1 strict", &Hook{Version: HookV1, Webhook: mode(ResponseUnmarshallStrict)}, true},
		{"v2 loose", &Hook{Version: HookV2, Webhook: mode(ResponseUnmarshallLoose)}, false},
	} {
		if got := tc.hook.StrictReplies(); got != tc.want {
			t.Errorf("%s: StrictReplies() = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestNamed(t *testing.T) {
	finalize := &Hook{Version: HookV2}
	h := &Hooks{Finalize: finalize}
	if h.Named("sync") != &h.Sync.Hook || h.Named("finalize") != finalize || h.Named("customize") != nil || h.Named("preUpdateChild") != nil {
		t.Error("Named does not find the declared hooks by name")
	}
}
