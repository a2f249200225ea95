package e2e

// uc trace, uc dlq and uc resync (issue 17, §3 and §4) on the test bed: the
// uc command line against the suite's uc run, and a Composite controller
// whose hook, served in this process, fails while it is broken.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/internal/inspect"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/sdk/go/hook"
)

// ucCLI runs the uc command line against the suite's cluster and NATS
// (through their UC_* variables) and returns its standard output.
func ucCLI(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, env.uc.bin, args...)
	cmd.Env = append(os.Environ(), "UC_KUBECONFIG="+env.bed.Kubeconfig(), "UC_NATS_URL="+env.uc.natsURL)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("uc %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

// ucJSON runs a uc command with -o json and decodes its output.
func ucJSON[T any](ctx context.Context, args ...string) (T, error) {
	var v T
	out, err := ucCLI(ctx, append(args, "-o", "json")...)
	if err != nil {
		return v, err
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		return v, fmt.Errorf("uc %s -o json: %w: %s", strings.Join(args, " "), err, out)
	}
	return v, nil
}

// mustUC runs a uc command, failing t if it fails.
func mustUC(t *testing.T, args ...string) string {
	t.Helper()
	out, err := ucCLI(t.Context(), args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// breakableHook is the echo hook, failing every call while broken. It
// records each call: the request's id and what it observed.
type breakableHook struct {
	broken atomic.Bool
	mu     sync.Mutex
	calls  []inspectedCall
}

type inspectedCall struct {
	request, parent, resourceVersion string
	generation                       int64
	children                         int
	failed                           bool
}

func (h *breakableHook) Hook() string { return hooks.Sync }

func (h *breakableHook) Handle(ctx context.Context, data []byte) (any, error) {
	var req hooks.SyncRequest
	if err := json.Unmarshal(data, &req); err != nil {
		return nil, err
	}
	e, _ := hook.Request(ctx)
	call := inspectedCall{request: e.ID(), parent: req.Parent.GetName(), resourceVersion: req.Parent.GetResourceVersion(),
		generation: req.Parent.GetGeneration(), children: len(req.Children["ConfigMap.v1"]), failed: h.broken.Load()}
	h.mu.Lock()
	h.calls = append(h.calls, call)
	h.mu.Unlock()
	if call.failed {
		return nil, errors.New("the hook is broken")
	}
	return echo(ctx, &req)
}

// callsOf lists the calls for a parent.
func (h *breakableHook) callsOf(parent string) []inspectedCall {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []inspectedCall
	for _, c := range h.calls {
		if c.parent == parent {
			out = append(out, c)
		}
	}
	return out
}

// answered is the call that answered the request of that id.
func (h *breakableHook) answered(request string) (inspectedCall, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	i := slices.IndexFunc(h.calls, func(c inspectedCall) bool { return c.request == request && !c.failed })
	if i < 0 {
		return inspectedCall{}, false
	}
	return h.calls[i], true
}

// registerBreakable registers a Composite controller whose sync hook is h:
// a request is dead-lettered at its first failed delivery, and the watcher
// retries its parent only 10 minutes later (the delay after the last
// delivery that the delivery policy sets, see docs/protocol.md, "Failures
// back off"), and a status write does not sync its parent again (so that a
// parent whose hook fails is published once, and dead-lettered once, for
// as long as the test runs).
func registerBreakable(t *testing.T, controller string, h *breakableHook) {
	t.Helper()
	registerCompositeWith(t, controller, h, func(spec map[string]any) {
		spec["hooks"] = map[string]any{"sync": map[string]any{"version": "v1",
			"delivery": map[string]any{"maxDeliveries": int64(1), "backoffDelay": "10m", "maxBackoffDelay": "10m"}}}
		parent, _ := spec["parentResource"].(map[string]any)
		parent["ignoreStatusChanges"] = true
	})
}

// createEchoComposite creates a Composite whose hook wants one ConfigMap,
// <name>-cm, holding v.
func createEchoComposite(t *testing.T, ns, name, controller, v string) *unstructured.Unstructured {
	t.Helper()
	return createComposite(t, ns, name, controller, map[string]any{"selector": selectApp(name),
		"children": []any{cm(name+"-cm", map[string]any{"app": name}, map[string]any{"v": v})}})
}

// setEchoComposite makes the Composite's hook want v.
func setEchoComposite(t *testing.T, ns, name, v string) {
	t.Helper()
	patchComposite(t, ns, name, map[string]any{"spec": map[string]any{
		"children": []any{cm(name+"-cm", map[string]any{"app": name}, map[string]any{"v": v})}}})
}

// echoCompositeHolds checks that the Composite was applied at its latest
// generation and that its ConfigMap holds v.
func echoCompositeHolds(ctx context.Context, ns, name, v string) error {
	if err := compositeSynced(ctx, ns, name); err != nil {
		return err
	}
	c, err := getConfigMap(ctx, ns, name+"-cm")
	if err != nil {
		return err
	}
	if c.Data["v"] != v {
		return fmt.Errorf("%s-cm holds %v, want v=%s", name, c.Data, v)
	}
	return nil
}

// deadLetterOf is the parent's dead letter that waits for a replay.
func deadLetterOf(ctx context.Context, controller, parent string) (*inspect.DeadLetter, error) {
	list, err := ucJSON[[]*inspect.DeadLetter](ctx, "dlq", "ls", "--controller", controller)
	if err != nil {
		return nil, err
	}
	for _, d := range list {
		if d.Request != nil && d.Request.Name == parent && !d.Superseded {
			return d, nil
		}
	}
	return nil, fmt.Errorf("uc dlq ls lists no dead letter of %s waiting for a replay among %d", parent, len(list))
}

// traceOf is uc trace's trace of a Composite, for its one controller.
func traceOf(ctx context.Context, ns, name string) (*inspect.Trace, error) {
	traces, err := ucJSON[[]*inspect.Trace](ctx, "trace", "composite/"+name, "-n", ns)
	if err != nil {
		return nil, err
	}
	if len(traces) != 1 {
		return nil, fmt.Errorf("%d traces of %s, want one", len(traces), name)
	}
	return traces[0], nil
}

// onTheBus checks whether a message of the parent is in stream, on its
// subjects under prefix.
func onTheBus(ctx context.Context, stream, prefix, controller string, uid types.UID) (bool, error) {
	s, err := env.js.Stream(ctx, stream)
	if err != nil {
		return false, err
	}
	_, err = s.GetLastMsgForSubject(ctx, bus.ParentSubjects(prefix, controller, hooks.Sync, uid))
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil
	}
	return err == nil, err
}

// TestInspectDeadLetters: a parent whose hook fails until its request is
// dead-lettered is listed by uc dlq ls and shown by uc dlq show, and uc
// trace says so and what to do. Once the hook is fixed, uc dlq replay of
// its dead letter converges it, through the replayed request, long before
// the watcher would publish it again (a minute). A dead letter of an older
// generation, replayed after the parent changed and converged, calls the
// hook with the old state, and the fence drops the reply: nothing rolls
// back.
func TestInspectDeadLetters(t *testing.T) {
	const controller = "inspect-dlq"
	ctx := t.Context()
	h := &breakableHook{}
	h.broken.Store(true)
	registerBreakable(t, controller, h)
	ns := namespace(t)
	stuck := createEchoComposite(t, ns, "stuck", controller, "1")
	moved := createEchoComposite(t, ns, "moved-on", controller, "1")

	var dead, old *inspect.DeadLetter
	if !t.Run("both requests dead-lettered", func(t *testing.T) {
		eventually(t, time.Minute, func() error {
			var err error
			if dead, err = deadLetterOf(ctx, controller, "stuck"); err != nil {
				return err
			}
			old, err = deadLetterOf(ctx, controller, "moved-on")
			return err
		})
		if dead.Reason != hook.ReasonWorkerError || !strings.Contains(dead.Message, "the hook is broken") || dead.Request.Generation != 1 || dead.Request.ParentUID != string(stuck.GetUID()) {
			t.Fatalf("the dead letter of stuck: %+v, request %+v", dead, dead.Request)
		}
	}) {
		return
	}
	if !t.Run("uc dlq ls and show list the dead letter", func(t *testing.T) {
		text := mustUC(t, "dlq", "ls", "--controller", controller)
		t.Logf("uc dlq ls --controller %s:\n%s", controller, text)
		if !slices.ContainsFunc(strings.Split(text, "\n"), func(line string) bool {
			return strings.HasPrefix(line, fmt.Sprintf("  %d ", dead.ID)) && strings.Contains(line, ns+"/stuck")
		}) {
			t.Errorf("uc dlq ls does not list dead letter %d of %s/stuck", dead.ID, ns)
		}
		shown, err := ucJSON[*inspect.DeadLetter](ctx, "dlq", "show", fmt.Sprint(dead.ID))
		if err != nil {
			t.Fatal(err)
		}
		var body hooks.SyncRequest
		if err := json.Unmarshal(shown.Data, &body); err != nil || body.Parent.GetName() != "stuck" {
			t.Fatalf("uc dlq show %d: a request body for %v (err %v), want stuck's", dead.ID, body.Parent, err)
		}
	}) {
		return
	}

	if !t.Run("uc trace says to replay it", func(t *testing.T) {
		tr, err := traceOf(ctx, ns, "stuck")
		if err != nil {
			t.Fatal(err)
		}
		text := mustUC(t, "trace", "composite/stuck", "-n", ns)
		t.Logf("uc trace composite/stuck -n %s:\n%s", ns, text)
		if tr.Verdict.State != inspect.DeadLettered || !strings.Contains(tr.Verdict.Hint, fmt.Sprintf("uc dlq replay %d", dead.ID)) ||
			!slices.ContainsFunc(tr.DeadLetters, func(d *inspect.DeadLetter) bool { return d.ID == dead.ID }) || tr.Fence != nil {
			t.Fatalf("uc trace of stuck: verdict %+v, dead letters %d, fence %+v; want it dead-lettered, naming the replay", tr.Verdict, len(tr.DeadLetters), tr.Fence)
		}
		if tr.Published == nil || tr.Published.ID != dead.Request.ID || tr.Published.Generation != 1 {
			t.Errorf("uc trace of stuck: the watcher's last request %+v (%s), want the dead-lettered %s", tr.Published, tr.WatcherProblem, dead.Request.ID)
		}
		if !strings.Contains(text, "dead-lettered") || !strings.Contains(text, fmt.Sprintf("uc dlq replay %d", dead.ID)) {
			t.Errorf("uc trace's text does not say stuck is dead-lettered")
		}
	}) {
		return
	}

	if !t.Run("uc dlq replay converges the parent once the hook is fixed", func(t *testing.T) {
		h.broken.Store(false)
		setEchoComposite(t, ns, "moved-on", "2")
		eventually(t, time.Minute, func() error { return echoCompositeHolds(ctx, ns, "moved-on", "2") })

		start := time.Now()
		replayed, err := ucJSON[[]inspect.Replayed](ctx, "dlq", "replay", fmt.Sprint(dead.ID))
		if err != nil {
			t.Fatal(err)
		}
		if len(replayed) != 1 || replayed[0].Request == "" {
			t.Fatalf("uc dlq replay %d: %+v", dead.ID, replayed)
		}
		eventually(t, 20*time.Second, func() error { return echoCompositeHolds(ctx, ns, "stuck", "1") })
		t.Logf("stuck converged %s after uc dlq replay", time.Since(start).Round(time.Millisecond))
		if c, ok := h.answered(replayed[0].Request); !ok || c.parent != "stuck" {
			t.Fatalf("the hook did not answer the replayed request %s: %+v", replayed[0].Request, h.callsOf("stuck"))
		}
		if _, err := deadLetterOf(ctx, controller, "stuck"); err == nil {
			t.Errorf("the replayed dead letter is still listed")
		}
		eventually(t, 20*time.Second, func() error {
			tr, err := traceOf(ctx, ns, "stuck")
			if err == nil && tr.Verdict.State != inspect.Synced {
				err = fmt.Errorf("uc trace of stuck says %+v", tr.Verdict)
			}
			return err
		})
	}) {
		return
	}

	t.Run("a replayed superseded dead letter rolls nothing back", func(t *testing.T) {
		// moved-on's dead letter is of generation 1; generation 2 was applied.
		tr, err := traceOf(ctx, ns, "moved-on")
		if err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(tr.DeadLetters, func(d *inspect.DeadLetter) bool { return d.ID == old.ID }); i < 0 || !tr.DeadLetters[i].Superseded {
			t.Fatalf("uc trace of moved-on does not show its dead letter %d superseded: %+v", old.ID, tr.DeadLetters)
		}
		replayed, err := ucJSON[[]inspect.Replayed](ctx, "dlq", "replay", fmt.Sprint(old.ID))
		if err != nil {
			t.Fatal(err)
		}
		if len(replayed) != 1 || replayed[0].Request == "" || !strings.Contains(replayed[0].Note, "superseded") {
			t.Fatalf("uc dlq replay %d of a superseded dead letter: %+v", old.ID, replayed)
		}
		// The hook answers the old request, its reply reaches the applier and
		// is dropped.
		eventually(t, 20*time.Second, func() error {
			c, ok := h.answered(replayed[0].Request)
			if !ok || c.generation != 1 {
				return fmt.Errorf("the hook has not answered the replayed request of generation 1 (%+v)", c)
			}
			for _, at := range []struct{ stream, prefix string }{{bus.RequestStream, bus.RequestPrefix}, {bus.ReplyStream, bus.ReplyPrefix}} {
				if waiting, err := onTheBus(ctx, at.stream, at.prefix, controller, moved.GetUID()); err != nil || waiting {
					return fmt.Errorf("moved-on still has a message in %s (err %v)", at.stream, err)
				}
			}
			return nil
		})
		if err := echoCompositeHolds(ctx, ns, "moved-on", "2"); err != nil {
			t.Fatalf("replaying an old request rolled moved-on back: %v", err)
		}
	})
}

// TestInspectResync: uc resync calls the hook again for a parent that did
// not change — one parent, then every parent of the controller.
func TestInspectResync(t *testing.T) {
	const controller = "inspect-resync"
	ctx := t.Context()
	h := &breakableHook{}
	registerCompositeWith(t, controller, h, nil)
	ns := namespace(t)
	names := []string{"quiet-a", "quiet-b"}
	for _, n := range names {
		createEchoComposite(t, ns, n, controller, "1")
	}
	// Settled: the hook's last call saw the parent as it is (its status
	// written too), with its ConfigMap, and that reply was the last
	// applied: nothing more comes unless asked for.
	settled := func(name string) error {
		calls := h.callsOf(name)
		tr, err := traceOf(ctx, ns, name)
		switch {
		case err != nil:
			return err
		case len(calls) == 0:
			return fmt.Errorf("no call for %s", name)
		case tr.Verdict.State != inspect.Synced:
			return fmt.Errorf("%s: %+v", name, tr.Verdict)
		}
		last := calls[len(calls)-1]
		if last.children != 1 || last.resourceVersion != tr.Parent.ResourceVersion || tr.Fence.Request != last.request {
			return fmt.Errorf("%s not settled: last call %+v, parent at %s, fence %+v", name, last, tr.Parent.ResourceVersion, tr.Fence)
		}
		return nil
	}
	eventually(t, time.Minute, func() error {
		for _, n := range names {
			if err := settled(n); err != nil {
				return err
			}
		}
		return nil
	})
	before := map[string]int{}
	count := func() {
		for _, n := range names {
			before[n] = len(h.callsOf(n))
		}
	}
	// resyncedAgain checks the parent's hook was called again since
	// count, for the parent as it was.
	resyncedAgain := func(name string) error {
		calls := h.callsOf(name)
		if len(calls) <= before[name] {
			return fmt.Errorf("no new call for %s", name)
		}
		for _, c := range calls[before[name]:] {
			if c.resourceVersion != calls[before[name]-1].resourceVersion {
				return fmt.Errorf("%s changed: %+v", name, c)
			}
		}
		return nil
	}

	count()
	out := mustUC(t, "resync", "composite/quiet-a", "-n", ns)
	if !strings.Contains(out, "queued by the watcher") {
		t.Fatalf("uc resync composite/quiet-a: %s", out)
	}
	eventually(t, 20*time.Second, func() error { return resyncedAgain("quiet-a") })
	eventually(t, 20*time.Second, func() error { return settled("quiet-a") })
	count()

	list, err := ucJSON[[]inspect.Resynced](ctx, "resync", "--controller", controller, "-n", ns)
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 2 || list[0].Error != "" || list[1].Error != "" {
		t.Fatalf("uc resync --controller %s: %+v", controller, list)
	}
	eventually(t, 20*time.Second, func() error {
		for _, n := range names {
			if err := resyncedAgain(n); err != nil {
				return err
			}
		}
		return nil
	})
}
