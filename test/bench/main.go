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
//
// With -appliers N, uc runs as separate roles on a nats-server (a
// dispatcher, a watcher and N appliers) instead of `uc run`, and the report
// adds each process's CPU and how the parents spread over the appliers.
//
// It prints a table and writes bench-results/<time>.json. It exits non-zero
// when a phase does not converge before its deadline; it asserts no timings.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
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
	appliers       int
}

// scenarios are the named N×M workloads.
var scenarios = map[string][2]int{"quick": {200, 5}, "full": {1000, 5}}

func parseFlags(args []string) (config, error) {
	var cfg config
	var sharing string
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.StringVar(&cfg.scenario, "scenario", "quick", "quick (200×5) or full (1000×5)")
	fs.IntVar(&cfg.parents, "parents", 0, "parents N (overrides the scenario)")
	fs.IntVar(&cfg.children, "children", 0, "children per parent M (overrides the scenario)")
	fs.IntVar(&cfg.concurrency, "concurrency", 16, "parents written at once, by the driver, the floor and uc's applier (--applier-workers)")
	fs.DurationVar(&cfg.phaseTimeout, "phase-timeout", 10*time.Minute, "deadline of each phase")
	fs.StringVar(&sharing, "sharing", "1,5,10", "controller counts of the sharing measurement (empty: skip it)")
	fs.IntVar(&cfg.sharingParents, "sharing-parents", 100, "parents shared out among the controllers of the sharing measurement")
	fs.StringVar(&cfg.out, "out", "bench-results", "directory of the JSON results")
	fs.Var(&cfg.ucFlags, "uc-flag", "extra flag for uc (each of its processes), e.g. -uc-flag=--kube-api-qps=1000 (repeatable; the bench sets --metrics-addr and --profiling itself, and logs each process's address)")
	fs.IntVar(&cfg.appliers, "appliers", 0, "run uc as separate roles on a nats-server: a dispatcher, a watcher and this many appliers (0: uc run)")
	fs.StringVar(&cfg.ucBin, "uc-bin", "", "a uc binary to measure (default: build ./cmd/uc)")
	fs.Float64Var(&cfg.pacedRate, "paced-rate", 20, "parents changed per second in the paced phase")
	fs.BoolVar(&cfg.ignoreStatus, "ignore-status-changes", false, "set parentResource.ignoreStatusChanges on the Fanout controllers")
	if err := fs.Parse(args); err != nil {
		return cfg, err
	}
	size, ok := scenarios[cfg.scenario]
	if !ok {
		return cfg, fmt.Errorf("unknown scenario %q (quick or full)", cfg.scenario)
	}
	if cfg.parents == 0 {
		cfg.parents = size[0]
	}
	if cfg.children == 0 {
		cfg.children = size[1]
	}
	for f := range strings.SplitSeq(sharing, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 1 || n > shards {
			return cfg, fmt.Errorf("-sharing: %q is not a controller count from 1 to %d", f, shards)
		}
		cfg.sharing = append(cfg.sharing, n)
	}
	if cfg.parents < 1 || cfg.children < 1 || cfg.concurrency < 1 || cfg.pacedRate <= 0 {
		return cfg, fmt.Errorf("parents, children, concurrency and paced-rate must be positive")
	}
	if cfg.appliers < 0 {
		return cfg, fmt.Errorf("-appliers must not be negative")
	}
	return cfg, nil
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
	if res.Floor, err = runFloor(ctx, e); err != nil {
		return fmt.Errorf("floor: %w", err)
	}
	phasesErr := runPhases(ctx, e, res)
	if ctx.Err() != nil {
		return phasesErr
	}
	res.Sharing, err = runSharing(ctx, e)
	if err != nil {
		err = fmt.Errorf("sharing: %w", err)
	}
	return errors.Join(phasesErr, err)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "%s bench: %s\n", time.Now().Format("15:04:05.000"), fmt.Sprintf(format, args...))
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string     { return strings.Join(*s, " ") }
func (s *stringList) Set(v string) error { *s = append(*s, v); return nil }
