// Command bench measures uc on the real test bed (make bench).
//
// It drives the Fanout example — N parents with M ConfigMap children each —
// through six phases (create, update, heal, paced, resync, delete), times each
// until every object has converged, and reports per phase the hook calls,
// the apiserver's requests by verb, the change-to-applied latency and uc's
// peak RSS, next to the floor: the same writes made directly with client-go
// at the same concurrency, in the same run. Then it measures uc's memory and
// apiserver watches with 1, 5 and 10 controllers sharing one child kind.
//
//	go run ./test/bench                  200×5
//	go run ./test/bench -scenario full   1000×5
//	go run ./test/bench -scenario xl     10,000×5
//	go run ./test/bench -scenario xxl    50,000×5, without delete and resync
//
// -skip leaves out phases of uc (not create, which the others need, nor
// update without heal, paced and resync, which start from it): at 50,000 parents uc's delete is the garbage collector's pace (~30
// parents per second, half an hour) and a resync every 10 s cannot go round
// 50,000 parents, so xxl skips both, and the sharing rounds. The floor
// still runs its four steps: its delete leaves the apiserver empty for uc.
//
// Every scenario reports uc's live heap after each phase and its memory
// per 1,000 parents: the most any phase reached, of the resident set and of
// the live heap, less uc's idle with no parent, over N/1000. The paced
// phase changes at most -paced-parents parents, so that it lasts at most
// -paced-parents / -paced-rate seconds whatever N; the phase deadline grows
// with N.
//
// With -scenario hooks (1000×5), it measures instead how hooks scale apart
// from the watch core. The bench's in-process hook creates the parents and
// updates them twice (the second update is the most this machine converges
// when the hook costs nothing); then every parent's payload is changed at
// once while a hook that waits -hook-delay per call (standing for the
// hook's I/O) is served by 1, 2, 4 and 8 worker processes (-hook-workers,
// each serving -hook-concurrency calls at once), then by one webhook
// process reached through uc's dispatcher. Each round reports parents per
// second, hook calls per second, how busy the hook's capacity was, and the
// apiserver's requests per second and CPU, next to the floor's update and
// Metacontroller's --workers model computed for the same delay.
// -hook-workers with another scenario adds these rounds after the phases
// and the sharing rounds.
//
// With -appliers N, uc runs as separate roles on a nats-server (a
// dispatcher, a watcher and N appliers) instead of `uc run`, and the report
// adds each process's CPU and how the parents spread over the appliers.
//
// It prints a table and writes bench-results/<time>.json. It exits non-zero
// when a phase does not converge before its deadline; it asserts no timings.
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// config is the bench's flags.
type config struct {
	scenario       string
	parents        int
	children       int
	concurrency    int
	phaseTimeout   time.Duration
	sharing        []int
	sharingParents int
	out            string
	ucFlags        stringList
	ucBin          string
	ignoreStatus   bool
	pacedRate      float64
	pacedParents   int
	appliers       int
	// shards is the watcher shards (-watcher-shards); 0: one watcher.
	shards int
	// phases is whether the phases and the sharing rounds run: all
	// scenarios but hooks.
	phases bool
	// skip are the names of uc's phases left out (-skip).
	skip []string
	// hookWorkers are the worker process counts of the hook scaling rounds
	// (none: no hook scaling).
	hookWorkers     []int
	hookDelay       time.Duration
	hookConcurrency int
	// apiserverProfiles is the directory of the apiserver's CPU profiles
	// of each window ("": none).
	apiserverProfiles string
	// ucProfiles is the directory of uc's processes' CPU profiles of
	// each window ("": none).
	ucProfiles string
	// floorFrom is a results file whose floor this run reuses instead
	// of writing its own (-floor-from; "": write it).
	floorFrom string
	// ucHeapProfiles is the directory of uc's processes' heap profiles
	// after each phase ("": none).
	ucHeapProfiles string
}

// scenario is a named workload.
type scenario struct {
	parents, children int
	// hooks is whether it is the hook scaling instead of the phases.
	hooks bool
	// skip is the default of -skip; sharing the default of -sharing.
	skip, sharing string
}

// scenarios are the named workloads.
var scenarios = map[string]scenario{
	"quick": {parents: 200, children: 5, sharing: defaultSharing},
	"full":  {parents: 1000, children: 5, sharing: defaultSharing},
	"xl":    {parents: 10000, children: 5, sharing: defaultSharing},
	"xxl":   {parents: 50000, children: 5, skip: "delete,resync"},
	"hooks": {parents: 1000, children: 5, hooks: true, sharing: defaultSharing},
}

// defaultSharing are the controller counts of the sharing rounds.
const defaultSharing = "1,5,10"

// defaultHookWorkers are the worker process counts of -scenario hooks.
const defaultHookWorkers = "1,2,4,8"

// phaseTimeout is the default deadline of a phase: 10 minutes, or 3 minutes
// per 1,000 parents when that is more (30 minutes at 10,000). The slowest
// phase is delete, the garbage collector's pace: ~30 parents per second on
// a quiet 2-core machine.
func phaseTimeout(parents int) time.Duration {
	return max(10*time.Minute, time.Duration(parents)*180*time.Millisecond)
}

func parseFlags(args []string) (config, error) {
	var cfg config
	var sharing, hookWorkers, skip string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.scenario, "scenario", "quick", "quick (200×5), full (1000×5), xl (10,000×5), xxl (50,000×5), or hooks (the hook scaling, 1000×5)")
	fs.IntVar(&cfg.parents, "parents", 0, "parents N (overrides the scenario)")
	fs.IntVar(&cfg.children, "children", 0, "children per parent M (overrides the scenario)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "parents written at once, by the driver, the floor and uc's applier (--applier-workers)")
	fs.DurationVar(&cfg.phaseTimeout, "phase-timeout", 0, "deadline of each phase (default 10m, or 180ms per parent when that is more)")
	fs.StringVar(&sharing, "sharing", "", "controller counts of the sharing measurement (default "+defaultSharing+", none with -scenario xxl; \"\": skip it)")
	fs.StringVar(&skip, "skip", "", "uc's phases to leave out, of update (with heal, paced and resync), heal, paced, resync, delete (default delete,resync with -scenario xxl, else none)")
	fs.IntVar(&cfg.sharingParents, "sharing-parents", 100, "parents shared out among the controllers of the sharing measurement")
	fs.StringVar(&cfg.out, "out", "bench-results", "directory of the JSON results")
	fs.Var(&cfg.ucFlags, "uc-flag", "extra flag for uc (each of its processes), e.g. -uc-flag=--kube-api-qps=1000 (repeatable; the bench sets --metrics-addr and --profiling itself, and logs each process's address)")
	fs.IntVar(&cfg.appliers, "appliers", 0, "run uc as separate roles on a nats-server: a dispatcher, a watcher and this many appliers (0: uc run)")
	fs.IntVar(&cfg.shards, "watcher-shards", 0, "with -appliers, run the watcher as this many shards (uc watcher --shard-watchers, the appliers with --shard-watchers too); 0: one watcher")
	fs.StringVar(&cfg.ucBin, "uc-bin", "", "a uc binary to measure (default: build ./cmd/uc)")
	fs.Float64Var(&cfg.pacedRate, "paced-rate", 20, "parents changed per second in the paced phase")
	fs.IntVar(&cfg.pacedParents, "paced-parents", 1000, "parents the paced phase changes, at most")
	fs.StringVar(&hookWorkers, "hook-workers", "", "worker process counts of the hook scaling rounds (default "+defaultHookWorkers+" with -scenario hooks; empty: no hook scaling)")
	fs.DurationVar(&cfg.hookDelay, "hook-delay", 100*time.Millisecond, "how long the hook of the hook scaling waits per call")
	fs.IntVar(&cfg.hookConcurrency, "hook-concurrency", 4, "calls each worker process of the hook scaling serves at once")
	fs.StringVar(&cfg.apiserverProfiles, "apiserver-profiles", "", "directory of CPU profiles of the apiserver, "+fmt.Sprint(profileSlice)+" s slices of each phase named <phase>-<n>.pprof (merge a phase's: go tool pprof -top DIR/floor-create-*.pprof)")
	fs.StringVar(&cfg.ucProfiles, "uc-profiles", "", "directory of CPU profiles of uc's processes, "+fmt.Sprint(profileSlice)+" s slices of each phase named <phase>-<role>-<n>.pprof (go tool pprof -top DIR/create-run-0*.pprof), and of their allocations, <phase>-<role>-allocs-<n>.pprof")
	fs.StringVar(&cfg.floorFrom, "floor-from", "", "a results file of the same parents and children whose floor this run reuses instead of writing its own (at 50,000×5 the floor takes half an hour)")
	fs.StringVar(&cfg.ucHeapProfiles, "uc-heap-profiles", "", "directory of heap profiles of uc's processes once each phase is over, <phase>-<role>-heap.pprof (go tool pprof -sample_index=inuse_space -top DIR/update-run-heap.pprof)")
	fs.BoolVar(&cfg.ignoreStatus, "ignore-status-changes", false, "set parentResource.ignoreStatusChanges on the Fanout controllers")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	sc, ok := scenarios[cfg.scenario]
	if !ok {
		return cfg, fmt.Errorf("unknown scenario %q (quick, full, xl, xxl or hooks)", cfg.scenario)
	}
	cfg.parents = cmp.Or(cfg.parents, sc.parents)
	cfg.children = cmp.Or(cfg.children, sc.children)
	cfg.phaseTimeout = cmp.Or(cfg.phaseTimeout, phaseTimeout(cfg.parents))
	cfg.phases = !sc.hooks
	if sc.hooks && !isSet(fs, "hook-workers") {
		hookWorkers = defaultHookWorkers
	}
	if !isSet(fs, "sharing") {
		sharing = sc.sharing
	}
	if !isSet(fs, "skip") {
		skip = sc.skip
	}
	for f := range strings.SplitSeq(skip, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		if !slices.Contains(skippable, f) {
			return cfg, fmt.Errorf("-skip: %q is not one of %s", f, strings.Join(skippable, ", "))
		}
		cfg.skip = append(cfg.skip, f)
	}
	if slices.Contains(cfg.skip, "update") {
		var kept []string
		for _, p := range afterUpdate {
			if !slices.Contains(cfg.skip, p) {
				kept = append(kept, p)
			}
		}
		if len(kept) > 0 {
			return cfg, fmt.Errorf("-skip: %s start from update's state: leave them out with it (-skip %s)",
				strings.Join(kept, ", "), strings.Join(append(slices.Clone(cfg.skip), kept...), ","))
		}
	}
	var err error
	if cfg.sharing, err = counts("-sharing", sharing, shards); err != nil {
		return cfg, err
	}
	if cfg.hookWorkers, err = counts("-hook-workers", hookWorkers, math.MaxInt); err != nil {
		return cfg, err
	}
	if cfg.parents < 1 || cfg.children < 1 || cfg.concurrency < 1 || cfg.pacedRate <= 0 || cfg.pacedParents < 1 || cfg.hookConcurrency < 1 {
		return cfg, fmt.Errorf("parents, children, concurrency, paced-rate, paced-parents and hook-concurrency must be positive")
	}
	if cfg.appliers < 0 || cfg.shards < 0 {
		return cfg, fmt.Errorf("-appliers and -watcher-shards must not be negative")
	}
	if cfg.shards > 0 && cfg.appliers == 0 {
		return cfg, fmt.Errorf("-watcher-shards needs -appliers: shards run as separate roles")
	}
	return cfg, nil
}

// counts parses a comma-separated list of counts from 1 to most.
func counts(flagName, list string, most int) ([]int, error) {
	var out []int
	for f := range strings.SplitSeq(list, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > most {
			return nil, fmt.Errorf("%s: %q is not a count from 1 to %d", flagName, f, most)
		}
		out = append(out, n)
	}
	return out, nil
}

// isSet reports whether a flag was given.
func isSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		logf("FAILED: %v", err)
		os.Exit(1)
	}
}

// run measures everything, then reports what it measured, also when a phase
// failed.
func run(ctx context.Context, cfg config) error {
	res := newResults(cfg)
	err := measureAll(ctx, cfg, res)
	if err != nil {
		res.Error = err.Error()
	}
	res.print(os.Stdout)
	path, werr := res.writeJSON(cfg.out)
	if werr != nil {
		return fmt.Errorf("%w; write results: %v", err, werr)
	}
	logf("results written to %s", path)
	return err
}

func measureAll(ctx context.Context, cfg config, res *results) error {
	e, err := startEnv(ctx, cfg)
	if err != nil {
		return err
	}
	defer e.stop()
	if cfg.floorFrom != "" {
		res.Floor, err = floorFrom(cfg)
	} else {
		res.Floor, err = runFloor(ctx, e)
	}
	if err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	var errs []error
	if cfg.phases {
		errs = append(errs, runPhases(ctx, e, res))
		res.summarizeMemory()
		if ctx.Err() != nil {
			return errors.Join(errs...)
		}
		var err error
		if res.Sharing, err = runSharing(ctx, e); err != nil {
			errs = append(errs, fmt.Errorf("sharing: %w", err))
		}
	}
	if len(cfg.hookWorkers) > 0 && ctx.Err() == nil {
		var err error
		if res.HookScaling, err = runHookScaling(ctx, e); err != nil {
			errs = append(errs, fmt.Errorf("hook scaling: %w", err))
		}
	}
	return errors.Join(errs...)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
