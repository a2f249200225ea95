package e2e

import (
	"bufio"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"

	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/schemas/v1alpha1"
)

// backoffWindow is how long TestFailingHookBacksOff watches hooks that
// always fail: the 150 s over which a failing parent's hook was called
// some 310 times before failures backed off.
const backoffWindow = 150 * time.Second

// maxCallsInWindow bounds the calls of a failing parent within
// backoffWindow: the first request's 3 deliveries (fastDelivery), then one
// call per retry, 1 s after the first dead letter, 2 s after the next, 4 s…
// (docs/protocol.md, "Failures back off"): about 10. client-go's per-item
// exponential backoff (5 ms doubling, as Metacontroller uses it) would call
// a dozen times or so.
const maxCallsInWindow = 20

// TestFailingHookBacksOff: hooks that always fail for some parents — a
// webhook answering 500, dropping the connection, answering what is not
// JSON, or not answering within the timeout, an exec hook exiting 1, and
// a customize webhook answering 500 — beside parents whose hook answers. Each failing parent's hook is called
// at most maxCallsInWindow times in backoffWindow, with gaps that grow
// (uc's own report of the failure on the parent does not call the hook
// again, and each retry waits twice as long as the one before); each
// failing parent says why in its Synced condition and in one Warning Event
// (the same error, counted on one Event); the healthy parents converge and
// take an edit meanwhile as fast as ever; and a hook that recovers is
// called again within the backoff's current step.
func TestFailingHookBacksOff(t *testing.T) {
	ctx := t.Context()
	const controller, execController, customizeController = "backoff", "backoff-exec", "backoff-customize"
	h := newBackoffHook()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	webhook := v1alpha1.Hook{Webhook: &v1alpha1.Webhook{URL: &srv.URL}, Delivery: fastDelivery(time.Second)}
	registerEchoController(t, controller, webhook)
	// The customize hook fails: the sync hook is never asked.
	registerEchoControllerHooks(t, customizeController, v1alpha1.Hooks{Sync: v1alpha1.SyncHook{Hook: webhook}, Customize: &webhook})
	// Ten seconds: Python's start on a loaded machine has taken more than
	// two, which timed the call out instead of letting it exit 1.
	registerEchoController(t, execController, v1alpha1.Hook{Delivery: fastDelivery(10 * time.Second)})
	// The exec hook writes the time of each of its calls to a file.
	execCalls := filepath.Join(t.TempDir(), "calls")
	script := filepath.Join(env.root, "test/e2e/testdata/bad-exec-hook.py")
	command := []string{"sh", "-c", `date +%s.%N >> "$0"; exec python3 "$1" "$2"`, execCalls, script, t.TempDir()}
	startExecWorker(t, execController, command...)
	ns := namespace(t)
	log := tailUCLog(t)

	broken := `HTTPError: POST ` + srv.URL + `: 500 Internal Server Error: "the hook is broken"`
	failing := []struct{ name, controller, mode, want string }{
		{"fail", controller, "fail", "sync hook failed, will retry: " + broken},
		{"drop", controller, "drop", "EOF"},
		{"notjson", controller, "notjson", "InvalidReply: reply is not JSON"},
		{"hang", controller, "hang", "Timeout: no reply within 1s"},
		{"exit1", execController, "exit1", `WorkerError: ` + strings.Join(command, " ") + `: exit status 1: stderr: "the hook broke"`},
		{"customize", customizeController, "fail", "customize hook failed, will retry: " + broken},
	}
	start := time.Now()
	for _, name := range []string{"healthy-1", "healthy-2"} {
		createEcho(t, ns, name, controller, "v1", "")
	}
	for _, f := range failing {
		createEcho(t, ns, f.name, f.controller, "v1", f.mode)
	}
	createEcho(t, ns, "recover", controller, "v1", "recover")
	for _, name := range []string{"healthy-1", "healthy-2"} {
		eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, name, controller, "v1") })
	}
	for _, f := range failing {
		eventually(t, time.Minute, func() error { return hookFailed(ctx, ns, f.name, f.want) })
	}

	// The hook recovers for one parent once it has been failing for a
	// while: it is called again within the backoff's current step.
	eventually(t, time.Minute, func() error {
		if n := len(h.callTimes("recover")); n < 7 {
			return fmt.Errorf("the recovering parent's hook was called %d times, want 7 before it recovers", n)
		}
		return nil
	})
	failed := h.recover("recover")
	last, gap := failed[len(failed)-1], failed[len(failed)-1].Sub(failed[len(failed)-2])
	t.Logf("the hook recovers %s after the recovering parent's last call, the last gap being %s",
		time.Since(last).Round(time.Millisecond), gap.Round(time.Millisecond))
	eventually(t, time.Minute, func() error { return echoSynced(ctx, ns, "recover", controller, "v1") })
	// The next step is twice the last one, which jitter (up to a tenth)
	// made at most a tenth shorter than the gap seen; and 2s for the
	// pipeline.
	if next, step := h.callTimes("recover")[len(failed)], 2*gap*10/9+2*time.Second; next.Sub(last) > step {
		t.Errorf("the recovered hook was called %s after its last failed call, want within the next step (%s)",
			next.Sub(last).Round(time.Millisecond), step.Round(time.Millisecond))
	}

	// A healthy parent takes an edit as fast as ever.
	edited := time.Now()
	setEcho(t, ns, "healthy-2", "v2", "")
	eventually(t, 10*time.Second, func() error { return echoSynced(ctx, ns, "healthy-2", controller, "v2") })
	t.Logf("a healthy parent took an edit in %s", time.Since(edited).Round(time.Millisecond))

	// The window: nothing to wait for but time, while uc stays up.
	consistently(t, time.Until(start.Add(backoffWindow)), func() error { return env.uc.proc.Exited() })

	for _, f := range failing {
		t.Run(f.name, func(t *testing.T) {
			times := h.callTimes(f.name)
			if f.controller == execController {
				times = execCallTimes(t, execCalls)
			}
			checkBackoff(t, times, start)
			if err := hookFailed(ctx, ns, f.name, f.want); err != nil {
				t.Error(err)
			}
			checkOneWarning(t, ns, f.name, f.want)
			lines := errorLines(log.read(t), ns+"/"+f.name)
			t.Logf("uc logged %d ERROR lines about it in %s: %.1f a minute", lines, backoffWindow, float64(lines)/backoffWindow.Minutes())
		})
	}
	for _, name := range []string{"healthy-1", "healthy-2"} {
		n := len(h.callTimes(name))
		t.Logf("the healthy parent %s's hook was called %d times", name, n)
		if n > 8 {
			t.Errorf("the healthy parent %s's hook was called %d times, want a few", name, n)
		}
	}
}

// checkBackoff checks the calls of a failing parent's hook: at most
// maxCallsInWindow within backoffWindow of start, and, once the first
// request's deliveries are over, each gap between two calls longer than
// the one before.
func checkBackoff(t *testing.T, times []time.Time, start time.Time) {
	t.Helper()
	var in []time.Time
	for _, at := range times {
		if at.Before(start.Add(backoffWindow)) {
			in = append(in, at)
		}
	}
	var gaps []string
	for i := 1; i < len(in); i++ {
		gaps = append(gaps, in[i].Sub(in[i-1]).Round(10*time.Millisecond).String())
	}
	t.Logf("%d calls in %s; the gaps between them: %s", len(in), backoffWindow, strings.Join(gaps, " "))
	if len(in) > maxCallsInWindow {
		t.Errorf("%d calls in %s, want at most %d", len(in), backoffWindow, maxCallsInWindow)
	}
	if len(in) < 4 {
		t.Fatalf("%d calls in %s, want the first request's 3 deliveries and retries", len(in), backoffWindow)
	}
	// The gaps from the first retry on (after the 3rd call) grow.
	var shrank []string
	for i := 3; i+1 < len(in); i++ {
		if before, gap := in[i].Sub(in[i-1]), in[i+1].Sub(in[i]); gap <= before {
			shrank = append(shrank, fmt.Sprintf("before call %d, %s after %s", i+2, gap.Round(time.Millisecond), before.Round(time.Millisecond)))
		}
	}
	if len(shrank) > 0 {
		t.Errorf("%d gaps are not longer than the one before them, the first %s", len(shrank), shrank[0])
	}
	if last := in[len(in)-1].Sub(in[len(in)-2]); last < 15*time.Second {
		t.Errorf("the last gap within %s is %s: the retries did not slow down", backoffWindow, last.Round(time.Millisecond))
	}
}

// checkOneWarning checks that the parent has one Warning Event, naming
// want: a failure that repeats is counted on it.
func checkOneWarning(t *testing.T, ns, name, want string) {
	t.Helper()
	events, err := env.kube.CoreV1().Events(ns).List(t.Context(), metav1.ListOptions{FieldSelector: fields.SelectorFromSet(fields.Set{
		"involvedObject.name": name, "type": corev1.EventTypeWarning}).String()})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range events.Items {
		t.Logf("Warning Event %s (count %d): %s", e.Reason, e.Count, e.Message)
	}
	if len(events.Items) != 1 || !strings.Contains(events.Items[0].Message, want) {
		t.Errorf("%d Warning Events, want one naming %q", len(events.Items), want)
	}
}

// errorLines counts the ERROR lines of a uc log about the parent
// (namespace/name).
func errorLines(log, parent string) int {
	n := 0
	for line := range strings.Lines(log) {
		if strings.Contains(line, "level=ERROR") && strings.Contains(line, " parent="+parent+" ") {
			n++
		}
	}
	return n
}

// execCallTimes reads the call times the exec hook wrote, one a line in
// seconds since the epoch.
func execCallTimes(t *testing.T, path string) []time.Time {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var times []time.Time
	lines := bufio.NewScanner(f)
	for lines.Scan() {
		secs, err := strconv.ParseFloat(strings.TrimSpace(lines.Text()), 64)
		if err != nil {
			t.Fatalf("the exec hook's call time %q: %v", lines.Text(), err)
		}
		times = append(times, time.Unix(0, int64(secs*1e9)))
	}
	return times
}

// backoffHook is an Echo webhook that fails as each parent's spec.mode
// says: "fail" answers 500, "drop" closes the connection without an
// answer, "notjson" answers what is not JSON, "hang" never answers,
// "recover" answers 500 until recover is called for the parent. Any other
// mode answers. It records the time of every call, by parent name.
type backoffHook struct {
	mu        sync.Mutex
	calls     map[string][]time.Time
	recovered map[string]bool
}

func newBackoffHook() *backoffHook {
	return &backoffHook{calls: map[string][]time.Time{}, recovered: map[string]bool{}}
}

func (h *backoffHook) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var req hooks.SyncRequest
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	mode, _, _ := unstructured.NestedString(req.Parent.Object, "spec", "mode")
	h.mu.Lock()
	name := req.Parent.GetName()
	h.calls[name] = append(h.calls[name], time.Now())
	recovered := h.recovered[name]
	h.mu.Unlock()
	switch {
	case mode == "fail", mode == "recover" && !recovered:
		http.Error(w, "the hook is broken", http.StatusInternalServerError)
		return
	case mode == "drop":
		conn, _, err := http.NewResponseController(w).Hijack()
		if err == nil {
			_ = conn.Close()
		}
		return
	case mode == "notjson":
		w.Header().Set("Content-Type", "text/html")
		_, _ = w.Write([]byte("<html>an error page, not JSON</html>"))
		return
	case mode == "hang":
		<-r.Context().Done()
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(echoSync(req.Parent, "backoff"))
}

// recover makes the hook answer for the parent from now on, and returns
// the times of its calls so far.
func (h *backoffHook) recover(name string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.recovered[name] = true
	return slices.Clone(h.calls[name])
}

// callTimes lists when the parent's calls came.
func (h *backoffHook) callTimes(name string) []time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.calls[name])
}
