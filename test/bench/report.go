package main

import (
	"bufio"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
)

// results is everything one run measured; it is written as JSON.
type results struct {
	Date        time.Time `json:"date"`
	Machine     machine   `json:"machine"`
	Scenario    string    `json:"scenario"`
	Parents     int       `json:"parents"`
	Children    int       `json:"children"`
	Concurrency int       `json:"concurrency"`
	// Appliers is the applier processes when uc ran as separate roles
	// (-appliers); 0 for uc run.
	Appliers int `json:"appliers,omitempty"`
	// WatcherShards is the watcher shards (-watcher-shards); 0: one
	// watcher.
	WatcherShards int      `json:"watcherShards,omitempty"`
	UCFlags       []string `json:"ucFlags,omitempty"`
	// IgnoreStatusChanges is set on the controllers (-ignore-status-changes).
	IgnoreStatusChanges bool          `json:"ignoreStatusChanges,omitempty"`
	Floor               []floorResult `json:"floor"`
	// UCIdle is uc's memory before the phases, with the controller
	// registered and no parent.
	UCIdle  *idleMemory     `json:"ucIdle,omitempty"`
	Phases  []phaseResult   `json:"phases"`
	Sharing []sharingResult `json:"sharing,omitempty"`
	// MemoryPer1000Parents is what the parents added to uc's memory, per
	// 1,000 of them.
	MemoryPer1000Parents *memoryPerParents `json:"memoryPer1000Parents,omitempty"`
	HookScaling          *hookScaling      `json:"hookScaling,omitempty"`
	Error                string            `json:"error,omitempty"`
}

// memoryPerParents is what the parents added to uc's memory, per 1,000
// parents: the most of any phase less uc's idle memory, over N/1000.
type memoryPerParents struct {
	PeakRSSMiB  float64 `json:"peakRSSMiB"`
	LiveHeapMiB float64 `json:"liveHeapMiB"`
}

// summarizeMemory sets the memory per 1,000 parents from the phases.
func (r *results) summarizeMemory() {
	if r.UCIdle == nil || len(r.Phases) == 0 {
		return
	}
	var peak, heap float64
	for _, p := range r.Phases {
		peak, heap = max(peak, p.PeakRSSMiB), max(heap, p.LiveHeapMiB)
	}
	thousands := float64(r.Parents) / 1000
	r.MemoryPer1000Parents = &memoryPerParents{
		PeakRSSMiB:  (peak - r.UCIdle.RSSMiB) / thousands,
		LiveHeapMiB: (heap - r.UCIdle.HeapMiB) / thousands,
	}
}

type machine struct {
	CPUs      int    `json:"cpus"`
	CPUModel  string `json:"cpuModel"`
	MemoryGiB int64  `json:"memoryGiB"`
	Kernel    string `json:"kernel"`
	Go        string `json:"go"`
}

// phaseResult is one phase run by uc.
type phaseResult struct {
	Name string `json:"name"`
	// Parents is the parents the phase changed.
	Parents int `json:"parents"`
	// Seconds is from the first change until the last parent converged.
	Seconds float64 `json:"seconds"`
	// SettledSeconds is until uc went idle: the window of the counts.
	SettledSeconds float64 `json:"settledSeconds"`
	Converged      bool    `json:"converged"`
	// Idle is whether uc went idle after the phase.
	Idle         bool    `json:"idle"`
	FloorSeconds float64 `json:"floorSeconds,omitempty"`
	FloorRatio   float64 `json:"floorRatio,omitempty"`
	// APIServerCPURatio is the apiserver's CPU seconds over the phase's
	// window to those over the floor's: the work uc's requests cost it,
	// which other load on a shared machine changes less than wall times.
	APIServerCPURatio float64 `json:"apiserverCPURatio,omitempty"`
	// Latency from the change of a parent to the observer seeing it
	// applied, over the parents.
	LatencyP50Seconds float64 `json:"latencyP50Seconds,omitempty"`
	LatencyP99Seconds float64 `json:"latencyP99Seconds,omitempty"`
	// LiveHeapMiB is uc's live Go heap once it went idle after the phase,
	// right after a collection (its NATS server's not counted with
	// -appliers).
	LiveHeapMiB float64 `json:"liveHeapMiB,omitempty"`
	// LiveHeapMiBByRole is each process's, when uc runs as several.
	LiveHeapMiBByRole map[string]float64 `json:"liveHeapMiBByRole,omitempty"`
	measurement
	// WorkloadWrites is the writes to Fanouts and ConfigMaps by everyone but
	// the driver: uc's, and in the delete phase the garbage collector's.
	WorkloadWrites int64 `json:"workloadWrites"`
	// OtherWrites is the writes to anything else by everyone but the driver.
	OtherWrites int64 `json:"otherWrites"`
	// Replicas is how the parents spread over the applier replicas at the
	// end of the phase (-appliers only).
	Replicas []replicaShare `json:"replicas,omitempty"`
}

// summarize sets the ratios to the phase's floor (the zero floorResult
// when the phase has none) and the write counts.
func (r *phaseResult) summarize(floor floorResult) {
	if floor.Seconds > 0 {
		r.FloorSeconds, r.FloorRatio = floor.Seconds, r.Seconds/floor.Seconds
	}
	if cpu := floor.CPUSeconds[apiserver]; cpu > 0 {
		r.APIServerCPURatio = r.CPUSeconds[apiserver] / cpu
	}
	r.WorkloadWrites, r.OtherWrites = r.workloadWrites(), r.otherWrites()
}

// callsPerParent is the hook calls per parent the phase changed.
func (r *phaseResult) callsPerParent() float64 {
	return float64(r.HookCalls) / float64(max(r.Parents, 1))
}

func (r *phaseResult) setLatencies(sorted []time.Duration) {
	r.LatencyP50Seconds = percentile(sorted, 0.50).Seconds()
	r.LatencyP99Seconds = percentile(sorted, 0.99).Seconds()
}

// percentile is the nearest-rank percentile of sorted durations.
func percentile(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[max(0, int(math.Ceil(p*float64(len(sorted))))-1)]
}

func newResults(cfg config) *results {
	return &results{
		Date: time.Now().UTC(), Machine: describeMachine(),
		Scenario: cfg.scenario, Parents: cfg.parents, Children: cfg.children,
		Concurrency: cfg.concurrency, Appliers: cfg.appliers, WatcherShards: cfg.shards, UCFlags: cfg.ucFlags, IgnoreStatusChanges: cfg.ignoreStatus,
	}
}

func describeMachine() machine {
	m := machine{CPUs: runtime.NumCPU(), Go: runtime.Version()}
	m.CPUModel = procField("/proc/cpuinfo", "model name")
	if kb := procField("/proc/meminfo", "MemTotal"); kb != "" {
		if n, err := kiB(kb); err == nil {
			m.MemoryGiB = (n + 1<<29) >> 30
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	return m
}

// procField is the value of the first "key: value" line with that key.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}

// writeJSON writes the results to dir/<date>.json.
func (r *results) writeJSON(dir string) (string, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	path := filepath.Join(dir, r.Date.Format("20060102T150405Z")+"-"+r.Scenario+".json")
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return "", err
	}
	return path, os.WriteFile(path, append(b, '\n'), 0o644)
}

// print writes the human-readable tables.
func (r *results) print(out io.Writer) {
	fmt.Fprintf(out, "\nuc on the test bed — %d parents × %d ConfigMaps, concurrency %d, %d CPUs, %s\n",
		r.Parents, r.Children, r.Concurrency, r.Machine.CPUs, r.Date.Format(time.RFC3339))
	if len(r.UCFlags) > 0 {
		fmt.Fprintf(out, "uc flags: %s\n", strings.Join(r.UCFlags, " "))
	}
	if r.IgnoreStatusChanges {
		fmt.Fprintln(out, "controllers set parentResource.ignoreStatusChanges")
	}
	if r.Appliers > 0 {
		fmt.Fprintf(out, "uc as separate roles on a nats-server: a dispatcher, a watcher and appliers ×%d (uc's CPU and RSS: the sums over them and the nats-server)\n", r.Appliers)
	}
	r.printPhases(out)
	r.printMemory(out)
	r.printPerParent(out)
	r.printRequests(out)
	r.printCPU(out)
	r.printRoles(out)
	r.printReplicas(out)
	r.printSharing(out)
	r.printHookScaling(out)
	if r.Error != "" {
		fmt.Fprintf(out, "\nFAILED: %s\n", r.Error)
	}
}

// busy is how busy the machine was over a window, in percent of its CPUs.
func (r *results) busy(window float64, cpu cpuSeconds) float64 {
	return 100 * cpu[machineKey] / (window * float64(r.Machine.CPUs))
}

func (r *results) printPhases(out io.Writer) {
	if len(r.Phases) == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out)
	fmt.Fprintln(tw, "phase\twall\tfloor\t× floor\tapiserver CPU × floor\thook calls\tper parent\tmin–max\tp50\tp99\tuc writes\tdry runs\tother writes\tpeak RSS\tlive heap\t")
	for _, p := range r.Phases {
		wall := seconds(p.Seconds)
		if !p.Converged {
			wall = "DNF " + wall
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%.2f\t%d–%d\t%s\t%s\t%d\t%d\t%d\t%.0f MiB\t%.1f MiB\t\n", p.Name, wall,
			orDash(p.FloorSeconds, seconds), orDash(p.FloorRatio, times), orDash(p.APIServerCPURatio, times),
			p.HookCalls, p.callsPerParent(), p.HookSpread.Min, p.HookSpread.Max,
			orDash(p.LatencyP50Seconds, seconds), orDash(p.LatencyP99Seconds, seconds),
			p.WorkloadWrites, p.Requests.dryRuns(), p.OtherWrites, p.PeakRSSMiB, p.LiveHeapMiB)
	}
	tw.Flush()
}

// printMemory shows what the parents cost uc's memory.
func (r *results) printMemory(out io.Writer) {
	if r.MemoryPer1000Parents == nil {
		return
	}
	fmt.Fprintf(out, "\nuc's memory: idle with no parent %.0f MiB RSS, %.1f MiB live heap; per 1,000 parents (the most of any phase less idle, over %d parents): %.1f MiB RSS, %.1f MiB live heap\n",
		r.UCIdle.RSSMiB, r.UCIdle.HeapMiB, r.Parents, r.MemoryPer1000Parents.PeakRSSMiB, r.MemoryPer1000Parents.LiveHeapMiB)
	if r.Parents < 1000 {
		fmt.Fprintln(out, "(below 1,000 parents, the per-1,000 figures are mostly allocation churn, not the objects held)")
	}
}

// printPerParent shows uc's own cost per parent a phase changed: its CPU
// time and the bytes it allocated over the phase's window.
func (r *results) printPerParent(out io.Writer) {
	if len(r.Phases) == 0 || r.Phases[0].UCAllocatedMB == 0 {
		return
	}
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(out, "\nuc's own cost per parent changed, over each phase's window (all its processes; with -appliers, the nats-server's CPU but not its allocations),")
	fmt.Fprintln(out, "and its CPU over the apiserver's and over the bench's (driver and hook) in the same window: the same code's CPU seconds move with the machine")
	fmt.Fprintln(out, "from run to run (up to 1.8x on a shared VM), these ratios much less; \"the four\": create, update, heal and delete together, per parent and phase")
	fmt.Fprintln(tw, "phase\tCPU\tallocated\t× apiserver\t× bench\t")
	for _, p := range r.Phases {
		if p.Parents == 0 {
			continue
		}
		n, uc := float64(p.Parents), p.CPUSeconds["uc"]
		fmt.Fprintf(tw, "%s\t%.1f ms\t%.0f KB\t%s\t%s\t\n", p.Name, 1000*uc/n, 1000*p.UCAllocatedMB/n,
			ratio(uc, p.CPUSeconds[apiserver]), ratio(uc, p.CPUSeconds["bench"]))
	}
	if all, ok := r.fourPhases(); ok {
		n, uc := float64(all.Parents), all.CPUSeconds["uc"]
		fmt.Fprintf(tw, "the four\t%.1f ms\t%.0f KB\t%s\t%s\t\n", 1000*uc/n, 1000*all.UCAllocatedMB/n,
			ratio(uc, all.CPUSeconds[apiserver]), ratio(uc, all.CPUSeconds["bench"]))
	}
	tw.Flush()
}

// fourPhases is create, update, heal and delete together — uc's CPU over
// them per parent and phase is issue 27's figure (13 ms when it was
// filed) — when the run had all four.
func (r *results) fourPhases() (phaseResult, bool) {
	var all phaseResult
	all.CPUSeconds = cpuSeconds{}
	found := 0
	for _, p := range r.Phases {
		switch p.Name {
		case "create", "update", "heal", "delete":
			found++
			all.Parents += p.Parents
			all.UCAllocatedMB += p.UCAllocatedMB
			for proc, s := range p.CPUSeconds {
				all.CPUSeconds[proc] += s
			}
		}
	}
	return all, found == 4 && all.Parents > 0
}

// ratio is a/b to two places, or "–" when b is nothing.
func ratio(a, b float64) string {
	if b <= 0 {
		return "–"
	}
	return fmt.Sprintf("%.2f", a/b)
}

// namedWindow is a measurement window of the run, named, with its length.
type namedWindow struct {
	name    string
	seconds float64
	m       measurement
}

// windows are the run's measurement windows in order: the floor's, the
// phases' and the hook scaling rounds'; each as long as it lasted until uc
// went idle.
func (r *results) windows() []namedWindow {
	var out []namedWindow
	for _, f := range r.Floor {
		out = append(out, namedWindow{"floor " + f.Name, f.Seconds, f.measurement})
	}
	for _, p := range r.Phases {
		out = append(out, namedWindow{p.Name, p.SettledSeconds, p.measurement})
	}
	if r.HookScaling != nil {
		for _, rd := range r.HookScaling.Rounds {
			out = append(out, namedWindow{"hooks: " + rd.Name, rd.SettledSeconds, rd.measurement})
		}
	}
	return out
}

func (r *results) printRequests(out io.Writer) {
	rows := r.windows()
	seen := map[string]bool{}
	for _, row := range rows {
		for v := range row.m.Requests {
			seen[v] = true
		}
	}
	verbs := slices.SortedFunc(maps.Keys(seen), func(a, b string) int {
		return cmp.Or(verbOrder(a)-verbOrder(b), strings.Compare(a, b))
	})
	fmt.Fprintln(out, "\napiserver requests during each phase, by verb (every client; the driver's own in brackets)")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\t%s\t\n", strings.Join(verbs, "\t"))
	for _, row := range rows {
		fmt.Fprint(tw, row.name)
		for _, v := range verbs {
			cell := fmt.Sprint(row.m.Requests[v])
			if d := row.m.Driver[v]; d != 0 {
				cell += fmt.Sprintf(" (%d)", d)
			}
			fmt.Fprintf(tw, "\t%s", cell)
		}
		fmt.Fprintln(tw, "\t")
	}
	tw.Flush()
	for _, row := range rows {
		if len(row.m.WatchesClosed) > 0 {
			fmt.Fprintf(out, "  %s: watches the apiserver closed, their consumer behind (apiserver_terminated_watchers_total): %s\n",
				row.name, verbCounts(row.m.WatchesClosed))
		}
	}
}

// printCPU shows where each phase's time went: the CPU seconds of each
// process over the window, the CPU others sharing the machine took, and how
// busy all of it kept the machine.
func (r *results) printCPU(out io.Writer) {
	procs := []string{apiserver, "etcd", "uc", "bench", "kube-controller"}
	if r.HookScaling != nil {
		procs = append(procs, "delayhook")
	}
	fmt.Fprintf(out, "\nCPU seconds during each phase, by process (bench = driver + hook; not ours = other processes on the machine; busy = all / (window × %d CPUs))\n", r.Machine.CPUs)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\twindow\t%s\tothers\tnot ours\tbusy\t\n", strings.Join(procs, "\t"))
	for _, row := range r.windows() {
		cpu := row.m.CPUSeconds
		fmt.Fprintf(tw, "%s\t%s", row.name, seconds(row.seconds))
		rest := cpu.ours()
		for _, p := range procs {
			fmt.Fprintf(tw, "\t%.1f", cpu[p])
			rest -= cpu[p]
		}
		fmt.Fprintf(tw, "\t%.1f\t%.1f\t%.0f%%\t\n", max(rest, 0), cpu.foreign(), r.busy(row.seconds, cpu))
	}
	tw.Flush()
}

// printRoles shows, when uc ran as separate roles, the CPU seconds and peak
// RSS of each of its processes in each phase.
func (r *results) printRoles(out io.Writer) {
	if r.Appliers == 0 {
		return
	}
	r.printByPhase(out, "uc's processes during each phase: CPU seconds / peak RSS / live heap at its end", roles(r.Appliers, r.WatcherShards),
		func(p phaseResult, role string) string {
			return fmt.Sprintf("%.1f s / %.0f MiB / %.1f MiB", p.UCCPUSeconds[role], p.UCPeakRSSMiB[role], p.LiveHeapMiBByRole[role])
		})
}

// printReplicas shows, when uc ran as separate roles, the parents and
// partitions each applier replica held at the end of each phase.
func (r *results) printReplicas(out io.Writer) {
	if r.Appliers == 0 {
		return
	}
	seen := map[string]bool{}
	for _, p := range r.Phases {
		for _, s := range p.Replicas {
			seen[s.Replica] = true
		}
	}
	r.printByPhase(out, "parents per applier replica at the end of each phase (partitions held)", slices.Sorted(maps.Keys(seen)),
		func(p phaseResult, replica string) string {
			i := slices.IndexFunc(p.Replicas, func(s replicaShare) bool { return s.Replica == replica })
			if i < 0 {
				return "–"
			}
			return fmt.Sprintf("%d (%d)", p.Replicas[i].Parents, p.Replicas[i].Partitions)
		})
}

// printByPhase writes a table with a row per phase and a column per name.
func (r *results) printByPhase(out io.Writer, title string, names []string, cell func(p phaseResult, name string) string) {
	fmt.Fprintf(out, "\n%s\n", title)
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintf(tw, "phase\t%s\t\n", strings.Join(names, "\t"))
	for _, p := range r.Phases {
		fmt.Fprint(tw, p.Name)
		for _, name := range names {
			fmt.Fprintf(tw, "\t%s", cell(p, name))
		}
		fmt.Fprintln(tw, "\t")
	}
	tw.Flush()
}

// verbOrder puts writes first, then dry runs, then reads.
func verbOrder(v string) int {
	order := []string{"POST", "PUT", "PATCH", "APPLY", "DELETE", "DELETECOLLECTION",
		"POST dry-run", "PUT dry-run", "PATCH dry-run", "APPLY dry-run", "DELETE dry-run", "GET", "LIST", "WATCH"}
	if i := slices.Index(order, v); i >= 0 {
		return i
	}
	return len(order)
}

func (r *results) printSharing(out io.Writer) {
	if len(r.Sharing) == 0 {
		return
	}
	fmt.Fprintln(out, "\ncontrollers sharing one child kind (ConfigMaps): uc idle after syncing every parent once")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "controllers\tRSS\tpeak RSS\tlive heap\tuc's watches\ton configmaps\thook calls\twrites\t")
	for _, s := range r.Sharing {
		fmt.Fprintf(tw, "%d\t%.1f MiB\t%.1f MiB\t%.2f MiB\t%d\t%d\t%d\t%d\t\n", s.Controllers, s.RSSMiB, s.PeakRSSMiB, s.HeapMiB,
			sum(s.Watches), s.Watches["configmaps"], s.HookCalls, s.Writes)
	}
	tw.Flush()
}

func seconds(s float64) string { return fmt.Sprintf("%.2fs", s) }

func times(x float64) string { return fmt.Sprintf("%.2f×", x) }

func orDash(v float64, format func(float64) string) string {
	if v == 0 {
		return "–"
	}
	return format(v)
}

// printHookScaling shows the hook scaling rounds and Metacontroller's
// --workers model next to them.
func (r *results) printHookScaling(out io.Writer) {
	h := r.HookScaling
	if h == nil {
		return
	}
	fmt.Fprintf(out, "\nhook scaling: every parent changed at once (in-process: create, then two updates), %d parents × %d ConfigMaps\n", r.Parents, r.Children)
	fmt.Fprintln(out, "(capacity = processes × calls at once / delay; hook busy = calls made / capacity; apiserver requests/s: all but watches; busy = the machine's CPUs)")
	tw := tabwriter.NewWriter(out, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "round\thook\tdelay\tprocesses × at once\tcapacity\twall\tparents/s\tcalls/parent\tcalls/s\thook busy\tapiserver req/s\tapiserver cores\tuc CPU\thook CPU\tbusy\tp50\tp99\t")
	for _, rd := range h.Rounds {
		wall := seconds(rd.Seconds)
		if !rd.Converged {
			wall = "DNF " + wall
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%d × %d\t%s\t%s\t%.1f\t%.2f\t%.1f\t%s\t%.0f\t%.2f\t%.1f s\t%.1f s\t%.0f%%\t%s\t%s\t\n",
			rd.Name, rd.Hook, orDash(rd.DelaySeconds, seconds), max(rd.Workers, 1), rd.Concurrency,
			orDash(rd.CapacityPerSecond, perSecond), wall, rd.ParentsPerSecond,
			rd.callsPerParent(), rd.CallsPerSecond,
			orDash(100*rd.HookBusy, percent), rd.APIServerRequestsPerSecond, rd.APIServerCores,
			rd.CPUSeconds["uc"], rd.CPUSeconds["delayhook"], r.busy(rd.SettledSeconds, rd.CPUSeconds),
			orDash(rd.LatencyP50Seconds, seconds), orDash(rd.LatencyP99Seconds, seconds))
	}
	if i := slices.IndexFunc(r.Floor, func(f floorResult) bool { return f.Name == "update" }); i >= 0 {
		f := r.Floor[i]
		reqs, cores := f.apiserverRates(f.Seconds)
		fmt.Fprintf(tw, "floor update (client-go, no hook)\t–\t–\t–\t–\t%s\t%.1f\t–\t–\t–\t%.0f\t%.2f\t–\t–\t%.0f%%\t–\t–\t\n",
			seconds(f.Seconds), float64(r.Parents)/f.Seconds, reqs, cores, r.busy(f.Seconds, f.CPUSeconds))
	}
	m := h.Metacontroller
	fmt.Fprintf(tw, "Metacontroller --workers=%d (computed)\t–\t–\t%d × 1\t%s\t–\t%.1f\t%.2f\t–\t–\t–\t–\t–\t–\t–\t–\t–\t\n",
		m.Workers, m.Workers, orDash(m.CallsPerSecond, perSecond), m.ParentsPerSecond, m.CallsPerParent)
	tw.Flush()
	fmt.Fprintln(out, "Metacontroller's model: each worker calls the hook and applies the reply before it takes the next parent, so it makes at most 1/delay calls per second;")
	fmt.Fprintln(out, "its parents/s is that over uc's calls per parent in the delayed rounds, with applies taking no time: an upper bound.")
}

func perSecond(x float64) string { return fmt.Sprintf("%.0f/s", x) }

func percent(x float64) string { return fmt.Sprintf("%.0f%%", x) }
