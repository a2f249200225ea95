package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sync"

	"k8s.io/client-go/rest"
)

// profileSlice is the length of one CPU profile: the profiler takes them
// back to back while a window is open (a profile's length is fixed when it
// starts), and `go tool pprof` merges the slices of a window given
// together.
const profileSlice = 2 // seconds

// profiler takes CPU profiles of the apiserver (-apiserver-profiles) and
// of uc's processes (-uc-profiles) while a window is open, into
// dir/<label>-<n>.pprof and dir/<label>-<role>-<n>.pprof; for uc's, also
// what they allocated, into dir/<label>-<role>-allocs-<n>.pprof. The last
// slice runs past the window's end by less than profileSlice.
type profiler struct {
	cancel context.CancelFunc
	done   sync.WaitGroup
	mu     sync.Mutex
	err    error
}

// profileFetch takes one CPU profile of profileSlice seconds.
type profileFetch func(ctx context.Context) ([]byte, error)

// startProfiling profiles, as label, the apiserver into apiserverDir and
// uc's processes into ucDir; it profiles nothing into a directory "".
func startProfiling(ctx context.Context, client rest.Interface, apiserverDir string, uc *ucProcess, ucDir, label string) *profiler {
	ctx, cancel := context.WithCancel(ctx)
	p := &profiler{cancel: cancel}
	if apiserverDir != "" {
		p.run(ctx, filepath.Join(apiserverDir, label), func(ctx context.Context) ([]byte, error) {
			return client.Get().AbsPath("/debug/pprof/profile").Param("seconds", fmt.Sprint(profileSlice)).DoRaw(ctx)
		})
	}
	if ucDir != "" && uc != nil {
		for _, proc := range uc.procs {
			if proc.debug == "" {
				continue
			}
			// Its CPU, and what it allocated (-sample_index=alloc_space).
			for kind, path := range map[string]string{"": "profile", "-allocs": "allocs"} {
				p.run(ctx, filepath.Join(ucDir, label+"-"+proc.role+kind), func(ctx context.Context) ([]byte, error) {
					return httpProfile(ctx, fmt.Sprintf("%s/debug/pprof/%s?seconds=%d", proc.debug, path, profileSlice))
				})
			}
		}
	}
	return p
}

// run writes fetch's profiles to prefix-<n>.pprof until ctx ends.
func (p *profiler) run(ctx context.Context, prefix string, fetch profileFetch) {
	if err := os.MkdirAll(filepath.Dir(prefix), 0o755); err != nil {
		p.fail(err)
		return
	}
	p.done.Add(1)
	go func() {
		defer p.done.Done()
		for n := 0; ctx.Err() == nil; n++ {
			// The slice under way when the window closes is finished, not
			// cut: a cancelled profile request returns nothing.
			data, err := fetch(context.WithoutCancel(ctx))
			if err == nil {
				err = os.WriteFile(fmt.Sprintf("%s-%03d.pprof", prefix, n), data, 0o644)
			}
			if err != nil {
				p.fail(fmt.Errorf("profile %s: %w", filepath.Base(prefix), err))
				return
			}
		}
	}()
}

func (p *profiler) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.err = errors.Join(p.err, err)
}

// stop ends the profiling once the slices under way are written.
func (p *profiler) stop() error {
	p.cancel()
	p.done.Wait()
	return p.err
}

// httpProfile GETs a profile from a Go process's /debug/pprof/.
func httpProfile(ctx context.Context, url string) ([]byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	return io.ReadAll(resp.Body)
}
