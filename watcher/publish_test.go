package watcher

import "testing"

func TestEventID(t *testing.T) {
	same := eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), false)
	tests := []struct {
		name   string
		id     string
		isSame bool
	}{
		{"the same observation", eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), false), true},
		{"a newer resourceVersion", eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"8"}}}`), false), false},
		{"another subject", eventID("uc.req.c.sync.1.v", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), false), false},
		{"a forced resync", eventID("uc.req.c.sync.1.u", "t", []byte(`{"parent":{"metadata":{"resourceVersion":"7"}}}`), true), false},
	}
	for _, tt := range tests {
		if (tt.id == same) != tt.isSame {
			t.Errorf("%s: id %s, same as %s: %v, want %v", tt.name, tt.id, same, tt.id == same, tt.isSame)
		}
	}
}
