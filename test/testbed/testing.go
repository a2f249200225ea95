package testbed

import "testing"

// logTailLines is how many lines of each component's log New reports when
// something fails.
const logTailLines = 40

// New starts a test bed in a directory of t's and stops it when t ends. If
// the bed does not start, or t has failed by the time it ends, New logs the
// tail of every component's log.
func New(t testing.TB) *Bed {
	t.Helper()
	dir := t.TempDir()
	b, err := start(t.Context(), Options{Dir: dir, Logf: t.Logf})
	if err != nil {
		b.Stop()
		t.Log(logTails(dir, logTailLines))
		t.Fatalf("start test bed: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(logTails(dir, logTailLines))
		}
		b.Stop()
	})
	return b
}
