# UniversalController. The README's two commands are `make demo` and `make test`.

GO      ?= go
BIN     := bin
# uc's Go modules: uc's own, and the two hooks build on, the bus contract and
# the Go SDK (modules of their own so that a hook's module does not inherit
# uc's dependencies; uc's go.mod replaces them with this tree). go test, go
# vet and staticcheck do not descend into a nested module from the root:
# test, unit and lint run them in each.
MODULES := . schemas/bus sdk/go
NESTED_MODULES := $(filter-out .,$(MODULES))
# Test-bed binaries (kube-apiserver, etcd, kwok, …) are built once into this cache.
export UC_TESTBED_DIR ?= $(HOME)/.cache/uc-testbed

.PHONY: all build release release-check demo demo-check test unit test-nested js e2e fuzz fuzz-smoke bench bench-go lint generate testbed-bins testbed clean

all: build

# -buildvcs=auto (over a GOFLAGS=-buildvcs=false) stamps the commit in the
# binaries: uc version prints it. Go cannot stamp a build in a linked git
# worktree (golang/go#58218): there uc version says unknown.
build:
	$(GO) build -buildvcs=auto -o $(BIN)/ ./cmd/uc ./examples/foo/cmd/foo-hook ./test/testbed/cmd/uc-testbed

# A release into DIST (docs/releasing.md): uc for linux/amd64, linux/arm64
# and darwin/arm64 with SBOMs and SHA256SUMS, the image (linux/amd64 and
# arm64, an OCI layout tarball) and its digest, the packaged chart and the
# packed JavaScript SDK; with Go, git and npm, no container engine. Its
# version is internal/version's at that version's tag, else a snapshot's.
DIST ?= dist
release:
	rm -rf $(DIST)
	$(GO) run ./hack/release -out $(DIST)

# Checks the release in DIST as test/release checks its own one-platform
# release in make test: image config and layers, binaries, checksums,
# SBOMs, and the chart linted and dry-run on the test bed. CI runs it.
release-check: testbed-bins
	$(GO) test -count=1 -timeout 30m -run '^TestRelease$$' ./test/release -args -dist $(abspath $(DIST))

testbed-bins:
	./hack/testbed-bins.sh

# Brings up the test bed and uc run with the Foo example; Ctrl-C tears it down.
demo: build testbed-bins
	./hack/demo.sh

# The test bed and uc run, for a hook of your own: writes .testbed/env (the
# KUBECONFIG and NATS URL); Ctrl-C tears it down. README, "A controller of
# your own in five minutes". UC_BIN=path runs that uc (a released one)
# instead of building it.
testbed: testbed-bins
	$(GO) build -buildvcs=auto -o $(BIN)/ ./test/testbed/cmd/uc-testbed $(if $(UC_BIN),,./cmd/uc)
	./hack/testbed.sh

# The demo, run through once without waiting for Ctrl-C (CI runs it).
demo-check: build testbed-bins
	DEMO_ONESHOT=1 ./hack/demo.sh

# Every test: lint, a short run of each fuzz target, unit tests (Go and
# JavaScript), and the e2e tests on the real test bed.
test: lint testbed-bins fuzz-smoke js test-nested
	$(GO) test -count=1 -timeout 30m ./...

unit: js test-nested
	$(GO) test -count=1 $$($(GO) list ./... | grep -v /test/)

# The unit tests of the nested modules, which go test ./... at the root does
# not reach. (Their tests that need uc's module are in internal/contracttest.)
test-nested:
	@set -e; for m in $(NESTED_MODULES); do \
		echo "go test in $$m"; (cd $$m && $(GO) test -count=1 ./...); \
	done

# The JavaScript SDK (sdk/js) and its example: their npm dependencies, from
# the lockfiles, and their unit tests (node --test). The e2e tests install
# them too, so that go test runs them alone.
JS_PACKAGES := sdk/js examples/js-catset
js:
	@set -e; for d in $(JS_PACKAGES); do \
		echo "npm ci && npm test in $$d"; \
		(cd $$d && npm ci --no-audit --no-fund && npm test); \
	done

e2e: testbed-bins
	$(GO) test -count=1 -timeout 30m -v ./test/e2e/

# Fuzz targets (package:function) of what uc takes from hooks and builds
# for them. fuzz-smoke runs each for FUZZTIME, a number of runs: a time
# limit that ends while a slow run is in flight fails the whole fuzzing run
# with "context deadline exceeded", which a loaded machine makes likely.
# make fuzz runs each for 5 minutes (make fuzz FUZZTIME=1h for longer). The first run builds the packages
# with coverage instrumentation, once. A failing input is written to the
# package's testdata/fuzz/, where the unit tests run it from then on.
FUZZ_TARGETS := applier:FuzzDecodeReply applier:FuzzPlan watcher:FuzzSyncRequest internal/ujson:FuzzDecode core:FuzzCommonSync
FUZZTIME ?= 10000x

fuzz-smoke:
	@set -e; for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}\$$" -fuzztime $(FUZZTIME) ./$${t%%:*}/; \
	done

fuzz: FUZZTIME = 5m
fuzz: fuzz-smoke

# Benchmarks: the hot paths' micro-benchmarks, then the test bed's
# (BENCH=full for 1000x5, BENCH=xl for 10,000x5, BENCH=xxl for 50,000x5
# without delete and resync, BENCH=hooks for the hook
# scaling; BENCHFLAGS are more flags of the bench: go run ./test/bench -h).
bench: bench-go testbed-bins
	$(GO) run ./test/bench $(if $(BENCH),-scenario $(BENCH)) $(BENCHFLAGS)

# Micro-benchmarks of the hot paths (request encoding, reply planning); compare
# runs with benchstat (BENCHCOUNT=10).
BENCHCOUNT ?= 1
bench-go:
	$(GO) test -run '^$$' -bench . -benchmem -count $(BENCHCOUNT) ./watcher/ ./applier/ ./core/ ./internal/compact/ ./internal/preflight/

# gofmt over every tracked Go file; go vet, staticcheck and a tidy go.mod
# (go mod tidy -diff: what tidying would change, which fails the lint) in each
# of MODULES.
lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	@set -e; for m in $(MODULES); do \
		echo "go vet, staticcheck, go mod tidy -diff in $$m"; \
		(cd $$m && $(GO) vet ./... && \
			$(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION) ./... && \
			$(GO) mod tidy -diff); \
	done

STATICCHECK_VERSION ?= v0.8.2

generate:
	$(GO) generate ./schemas/...
	$(GO) test ./cmd/uc -run TestCLIReference -update
	$(GO) test ./internal/contracttest -run TestAPIReference -update

clean:
	rm -rf $(BIN) .demo $(DIST)
