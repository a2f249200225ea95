package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"
)

// profileSlice is the length of one CPU profile of the apiserver: the
// profiler takes them back to back while a window is open (a profile's
// length is fixed when it starts), and `go tool pprof` merges the slices of
// a window given together.
const profileSlice = 2 // seconds

// apiserverProfiler takes CPU profiles of the apiserver while a window is
// open, into dir/<label>-<n>.pprof (-apiserver-profiles). The last slice
// runs past the window's end by less than profileSlice.
type apiserverProfiler struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	err    error
}

// profileAPIServer starts profiling the apiserver as label; it does nothing
// when dir is "".
func profileAPIServer(ctx context.Context, client rest.Interface, dir, label string) *apiserverProfiler {
	p := &apiserverProfiler{cancel: func() {}}
	if dir == "" {
		return p
	}
	if p.err = os.MkdirAll(dir, 0o755); p.err != nil {
		return p
	}
	ctx, p.cancel = context.WithCancel(ctx)
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		for n := 0; ctx.Err() == nil; n++ {
			// The slice under way when the window closes is finished, not
			// cut: a cancelled profile request returns nothing.
			data, err := client.Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(profileSlice)).
				DoRaw(context.WithoutCancel(ctx))
			if err == nil {
				err = os.WriteFile(filepath.Join(dir, fmt.Sprintf("%s-%03d.pprof", label, n)), data, 0o644)
			}
			if err != nil {
				p.err = fmt.Errorf("profile the apiserver (%s): %w", label, err)
				return
			}
		}
	}()
	return p
}

// stop ends the profiling once the slice under way is written.
func (p *apiserverProfiler) stop() error {
	p.cancel()
	p.done.Wait()
	return errors.Join(p.err)
}
