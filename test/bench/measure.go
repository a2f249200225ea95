package main

import (
	"context"
	"errors"
	"slices"
	"time"
)

// window is a measurement in progress: the counters as they were when it
// opened.
type window struct {
	e         *env
	uc        *ucProcess // nil when uc is not running
	start     time.Time
	metrics   apiMetrics
	driver    verbCounts
	calls     int64
	perParent map[string]int64
	cpu       cpuSeconds
	ucCPU     cpuSeconds // by uc's process
	allocated int64      // by uc's processes since they started
	profiler  *profiler
}

// measurement is what happened in a window.
type measurement struct {
	// Requests is every client's resource requests at the apiserver, by
	// verb: the driver's, uc's, and the control plane's own (the garbage
	// collector, leases, kwok's node heartbeats).
	Requests verbCounts `json:"requests"`
	// Driver is the driver's own requests (its writes), counted client-side.
	Driver verbCounts `json:"driverRequests"`
	// ByResource is Requests by resource.
	ByResource map[string]verbCounts `json:"requestsByResource"`
	// WatchesClosed is the watches the apiserver closed because their
	// consumer fell behind (the client resumes them: a WATCH request
	// more), by resource.
	WatchesClosed map[string]int64 `json:"watchesClosedByAPIServer,omitempty"`
	HookCalls     int64            `json:"hookCalls"`
	// HookSpread is how the hook calls spread over the parents called.
	HookSpread spread `json:"hookCallsPerParent"`
	// PeakRSSMiB and RSSMiB are uc's: its most during the window, and at
	// its end (summed over its processes: the sum of their peaks).
	PeakRSSMiB float64 `json:"peakRSSMiB,omitempty"`
	RSSMiB     float64 `json:"rssMiB,omitempty"`
	// CPUSeconds is the CPU time each process used: the test bed's
	// components, uc, and the bench itself (driver and hook).
	CPUSeconds cpuSeconds `json:"cpuSeconds"`
	// UCCPUSeconds and UCPeakRSSMiB are uc's CPU time and peak RSS by
	// process, when it runs as several (-appliers): nats, dispatcher,
	// watcher, applier-1, ….
	UCCPUSeconds cpuSeconds         `json:"ucCPUSecondsByRole,omitempty"`
	UCPeakRSSMiB map[string]float64 `json:"ucPeakRSSMiBByRole,omitempty"`
	// UCAllocatedMB is the megabytes uc's processes allocated (see
	// ucProcess.allocated).
	UCAllocatedMB float64 `json:"ucAllocatedMB,omitempty"`
}

// workloadResources are the resources of the Fanout workload. The driver
// writes nothing else with its counted client.
var workloadResources = []string{"fanouts", "fanouts/status", "configmaps"}

// workloadWrites is the writes to the workload made by others than the
// driver: uc's, and in the delete phase the garbage collector's.
func (m measurement) workloadWrites() int64 {
	var n int64
	for _, res := range workloadResources {
		n += m.ByResource[res].writes()
	}
	return n - m.Driver.writes()
}

// otherWrites is the writes to anything else: uc's own status and Events,
// the control plane's leases and kwok's node heartbeats.
func (m measurement) otherWrites() int64 {
	return m.Requests.writes() - m.Driver.writes() - m.workloadWrites()
}

// apiserverRates are the apiserver's requests per second (all but watches,
// which last) and the cores it used, over a window of that many seconds.
func (m measurement) apiserverRates(seconds float64) (requests, cores float64) {
	return float64(m.Requests.total()-m.Requests["WATCH"]) / seconds, m.CPUSeconds[apiserver] / seconds
}

// open starts a window, named label in the CPU profiles (see
// -apiserver-profiles and -uc-profiles); uc may be nil.
func (e *env) open(ctx context.Context, label string, uc *ucProcess) (*window, error) {
	w := &window{e: e, uc: uc, driver: e.driverRequests.snapshot(), calls: e.hook.calls.Load(), perParent: e.hook.perParent()}
	var err error
	if uc != nil {
		if err := uc.resetPeaks(); err != nil {
			return nil, err
		}
		if w.allocated, err = uc.allocated(ctx); err != nil {
			return nil, err
		}
	}
	if w.metrics, err = scrapeMetrics(ctx, e.api.kube.CoreV1().RESTClient()); err != nil {
		return nil, err
	}
	if w.cpu, w.ucCPU, err = readCPU(w.ucPIDs()); err != nil {
		return nil, err
	}
	w.start = time.Now()
	w.profiler = startProfiling(ctx, e.api.kube.CoreV1().RESTClient(), e.cfg.apiserverProfiles, uc, e.cfg.ucProfiles, label)
	return w, nil
}

// ucPIDs are the roles of uc's processes by pid; none when uc is not
// running.
func (w *window) ucPIDs() map[int]string {
	if w.uc == nil {
		return nil
	}
	return w.uc.pids()
}

// callsSince is the hook calls since the window opened.
func (w *window) callsSince() int64 { return w.e.hook.calls.Load() - w.calls }

// close ends the window.
func (w *window) close(ctx context.Context) (measurement, error) {
	cpu, ucCPU, err := readCPU(w.ucPIDs())
	if err := errors.Join(err, w.profiler.stop()); err != nil {
		return measurement{}, err
	}
	after, err := scrapeMetrics(ctx, w.e.api.kube.CoreV1().RESTClient())
	if err != nil {
		return measurement{}, err
	}
	m := measurement{
		ByResource:    after.since(w.metrics),
		WatchesClosed: after.closedSince(w.metrics),
		Driver:        w.e.driverRequests.snapshot().minus(w.driver),
		HookCalls:     w.callsSince(),
		HookSpread:    spreadOf(w.e.hook.perParent(), w.perParent),
		CPUSeconds:    cpu.minus(w.cpu),
	}
	m.Requests = byVerb(m.ByResource)
	if w.uc == nil {
		return m, nil
	}
	mem, byRole, err := w.uc.memory()
	if err != nil {
		return m, err
	}
	allocated, err := w.uc.allocated(ctx)
	if err != nil {
		return m, err
	}
	m.UCAllocatedMB = float64(allocated-w.allocated) / 1e6
	m.PeakRSSMiB, m.RSSMiB = mib(mem.Peak), mib(mem.RSS)
	if len(byRole) > 1 {
		m.UCCPUSeconds = ucCPU.minus(w.ucCPU)
		m.UCPeakRSSMiB = map[string]float64{}
		for role, mem := range byRole {
			m.UCPeakRSSMiB[role] = mib(mem.Peak)
		}
	}
	return m, nil
}

// spread is how many parents were called and the least, median and most
// calls one of them got.
type spread struct {
	Parents int   `json:"parents"`
	Min     int64 `json:"min"`
	Median  int64 `json:"median"`
	Max     int64 `json:"max"`
}

func spreadOf(now, before map[string]int64) spread {
	var calls []int64
	for p, n := range now {
		if d := n - before[p]; d > 0 {
			calls = append(calls, d)
		}
	}
	if len(calls) == 0 {
		return spread{}
	}
	slices.Sort(calls)
	return spread{Parents: len(calls), Min: calls[0], Median: calls[len(calls)/2], Max: calls[len(calls)-1]}
}
