package recovery

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRecover(t *testing.T) {
	work := func(log *slog.Logger, fn func() error) (err error) {
		defer Recover(&err, "test", log, "parent", "ns/p")
		return fn()
	}
	failed := errors.New("failed")
	tests := []struct {
		name     string
		fn       func() error
		err      string // "" for none
		panicked bool
		logged   []string
	}{
		{name: "no panic, no error", fn: func() error { return nil }},
		{name: "an error is left as it is", fn: func() error { return failed }, err: "failed"},
		{name: "a panic is an error", fn: func() error { panic("boom") }, err: "panic: boom", panicked: true,
			logged: []string{"recovered from a panic", "parent=ns/p", "panic=boom", "stack=", "recovery_test.go"}},
		{name: "a runtime error too", fn: func() error { var s []int; _ = s[len(s)]; return nil }, err: "panic: runtime error: index out of range [0] with length 0", panicked: true,
			logged: []string{"index out of range"}},
		{name: "panic(nil) too", fn: func() error { panic(nil) }, err: "panic called with nil argument", panicked: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var out bytes.Buffer
			before := testutil.ToFloat64(Panics.WithLabelValues("test"))
			err := work(slog.New(slog.NewTextHandler(&out, nil)), tt.fn)
			if (err == nil) != (tt.err == "") || err != nil && !strings.Contains(err.Error(), tt.err) {
				t.Fatalf("err = %v, want %q", err, tt.err)
			}
			if err != nil && strings.Contains(err.Error(), "goroutine") {
				t.Errorf("the error carries the stack: %v", err)
			}
			counted := testutil.ToFloat64(Panics.WithLabelValues("test")) - before
			if want := map[bool]float64{true: 1, false: 0}[tt.panicked]; counted != want {
				t.Errorf("counted %v panics, want %v", counted, want)
			}
			if !tt.panicked && out.Len() > 0 {
				t.Errorf("logged %q without a panic", out.String())
			}
			for _, s := range tt.logged {
				if !strings.Contains(out.String(), s) {
					t.Errorf("log %q does not say %q", out.String(), s)
				}
			}
		})
	}
}
