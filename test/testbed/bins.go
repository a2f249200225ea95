package testbed

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
)

const modulePath = "universalcontroller.dev/uc"

// binaries and stages are what hack/testbed-bins.sh puts into the cache.
var (
	binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok", "nats-server"}
	stages   = []string{"node-initialize", "node-heartbeat", "pod-ready", "pod-complete", "pod-delete"}
)

// cache is the directory holding the test bed's binaries (bin/) and kwok
// stage configs (stages/).
type cache string

func (c cache) bin(name string) string { return filepath.Join(string(c), "bin", name) }

func (c cache) stage(name string) string {
	return filepath.Join(string(c), "stages", name+".yaml")
}

// missing returns the first file of the cache that does not exist, or "".
func (c cache) missing() string {
	var files []string
	for _, b := range binaries {
		files = append(files, c.bin(b))
	}
	for _, s := range stages {
		files = append(files, c.stage(s))
	}
	for _, f := range files {
		if _, err := os.Stat(f); err != nil {
			return f
		}
	}
	return ""
}

// CachedBin is the path of a binary hack/testbed-bins.sh builds (kubectl,
// nats-server, kube-controller-manager…) in the test bed's cache, whether or
// not it is there yet.
func CachedBin(name string) string { return defaultCache().bin(name) }

// defaultCache returns $UC_TESTBED_DIR, or ~/.cache/uc-testbed.
func defaultCache() cache {
	if d := os.Getenv("UC_TESTBED_DIR"); d != "" {
		return cache(d)
	}
	home, err := os.UserHomeDir()
	if err != nil {
		home = os.TempDir()
	}
	return cache(filepath.Join(home, ".cache", "uc-testbed"))
}

// ensureBinaries returns the binary cache, building it with
// hack/testbed-bins.sh first if anything is missing. A file lock in the
// cache keeps concurrent test binaries from building at the same time.
func ensureBinaries(ctx context.Context, logf func(string, ...any)) (cache, error) {
	c := defaultCache()
	if c.missing() == "" {
		return c, nil
	}
	unlock, err := lockDir(string(c))
	if err != nil {
		return "", err
	}
	defer unlock()
	if c.missing() == "" { // built by whoever held the lock
		return c, nil
	}
	return buildBinaries(ctx, logf)
}

// lockDir takes an exclusive flock on dir/.lock, waiting for it.
func lockDir(dir string) (unlock func(), err error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("create binary cache: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, ".lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open binary cache lock: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock binary cache: %w", err)
	}
	return func() { f.Close() }, nil
}

// buildBinaries runs hack/testbed-bins.sh and returns the cache it reports.
func buildBinaries(ctx context.Context, logf func(string, ...any)) (cache, error) {
	root, err := repoRoot()
	if err != nil {
		return "", err
	}
	script := filepath.Join(root, "hack", "testbed-bins.sh")
	logf("building test bed binaries with %s (first time only; takes minutes)", script)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "bash", script)
	cmd.Dir = root
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("%s: %w\n%s", script, err, stderr.String())
	}
	lines := strings.Split(strings.TrimSpace(stdout.String()), "\n")
	c := cache(lines[len(lines)-1])
	if m := c.missing(); m != "" {
		return "", fmt.Errorf("%s did not produce %s", script, m)
	}
	return c, nil
}

// repoRoot finds the directory holding this module's go.mod, walking up
// from this source file's directory and, failing that, from the working
// directory.
func repoRoot() (string, error) {
	var starts []string
	if _, file, _, ok := runtime.Caller(0); ok {
		starts = append(starts, filepath.Dir(file))
	}
	if wd, err := os.Getwd(); err == nil {
		starts = append(starts, wd)
	}
	for _, dir := range starts {
		for ; ; dir = filepath.Dir(dir) {
			if isModuleRoot(dir) {
				return dir, nil
			}
			if dir == filepath.Dir(dir) {
				break
			}
		}
	}
	return "", errors.New("cannot find the repository root (go.mod of module " + modulePath + ")")
}

// isModuleRoot reports whether dir/go.mod declares module modulePath.
func isModuleRoot(dir string) bool {
	f, err := os.Open(filepath.Join(dir, "go.mod"))
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fields := strings.Fields(sc.Text()); len(fields) == 2 && fields[0] == "module" {
			return strings.Trim(fields[1], `"`) == modulePath
		}
	}
	return false
}
