package e2e

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/v1alpha1"
	"universalcontroller.dev/uc/sdk/go/hook"
	"universalcontroller.dev/uc/test/testbed"
)

// shardPartitions is the installation's partitions in the shards' tests.
const shardPartitions = 8

// TestWatcherShards runs the watcher as shards (uc watcher
// --shard-watchers) on one bus, with two sharded appliers: two shards take
// a burst of new parents, which users create without the partition label;
// then, while every parent keeps changing, a third shard and a third
// applier are added and one of the first two shards and of the first two
// appliers are killed (SIGKILL). Every parent converges to its last
// change, no child is created twice, no two shards ever watch one
// partition at once, and each shard's and each applier's caches hold
// exactly the parents and children of the partitions it holds (an
// applier's, also those in no partition) — as its uc_cached_objects says,
// against the labels on the API server; the dispatcher, every parent and
// no child. Then labels edited by hand, a
// decorator over the shards, and the installation's partitions halved.
func TestWatcherShards(t *testing.T) {
	ctx := t.Context()
	srv, err := testbed.StartNATS(ctx, filepath.Join(t.TempDir(), "nats"), 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Stop)
	b := newRolesOnBus(t, srv.URL(), "--partitions", strconv.Itoa(shardPartitions))
	ns := b.ns
	dispatcher := b.start("dispatcher", "dispatcher")
	startApplier := func(name string) *roleProcess {
		return b.start(name, "applier", "--shard-watchers", "--replica-id", name)
	}
	appliers := []*roleProcess{startApplier("applier-1"), startApplier("applier-2")}
	startShard := func(name string, args ...string) *roleProcess {
		return b.start(name, "watcher", append([]string{"--shard-watchers", "--replica-id", name}, args...)...)
	}
	shards := []*roleProcess{startShard("watcher-1"), startShard("watcher-2")}

	const parents = 60
	names := make([]string, parents)
	for i := range names {
		names[i] = fmt.Sprintf("w-%02d", i)
	}
	children := map[string]types.UID{} // by name, as first created
	if !t.Run("a burst of new parents is labelled and converges over two shards", func(t *testing.T) {
		for _, n := range names {
			b.createWidget(n, "0")
		}
		eventually(t, 2*time.Minute, b.converged("0", names...))
		eventually(t, time.Minute, func() error { return labelledAlike(t, ns, names) })
		for _, n := range names {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			children[n] = cm.UID
		}
	}) {
		return
	}
	if !t.Run("each shard and each applier caches exactly its partitions' objects", func(t *testing.T) {
		eventually(t, time.Minute, func() error { return cachesMatchPartitions(t, shards, widgetGVR, configMapsGVR) })
		eventually(t, time.Minute, func() error { return appliersCacheTheirPartitions(t, appliers, widgetGVR, configMapsGVR) })
		eventually(t, time.Minute, func() error { return cachesParentsOnly(t, dispatcher, widgetGVR, configMapsGVR) })
	}) {
		return
	}

	// Keep every parent changing while shards come and go.
	stop := make(chan struct{})
	var round int
	var wg sync.WaitGroup
	wg.Go(func() {
		for round = 1; ; round++ {
			for _, n := range names {
				patch := fmt.Sprintf(`{"spec":{"value":"%d"}}`, round)
				_, _ = env.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, n, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			}
			select {
			case <-stop:
				return
			default:
			}
		}
	})
	// watchAll checks the live shards watch every partition between them,
	// each some; holdSome, the live appliers.
	watchAll := func(live []*roleProcess) func() error { return holdAll(live, watching(t)) }
	holdSome := func(live []*roleProcess) func() error { return holdAll(live, holding(t)) }
	if !t.Run("a third shard and a third applier added mid-wave take their share", func(t *testing.T) {
		shards = append(shards, startShard("watcher-3"))
		appliers = append(appliers, startApplier("applier-3"))
		eventually(t, time.Minute, watchAll(shards))
		eventually(t, time.Minute, holdSome(appliers))
	}) {
		return
	}
	var killedAt int64
	if !t.Run("a shard and an applier killed mid-wave: the others take their partitions", func(t *testing.T) {
		shards[0].proc.Kill()
		killedAt = time.Now().UnixNano()
		appliers[0].proc.Kill()
		eventually(t, time.Minute, watchAll(shards[1:]))
		eventually(t, time.Minute, holdSome(appliers[1:]))
	}) {
		return
	}
	close(stop)
	wg.Wait()
	if !t.Run("every parent converges to its last change, no child created twice", func(t *testing.T) {
		eventually(t, 2*time.Minute, b.converged(strconv.Itoa(round), names...))
		for _, n := range names {
			cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if cm.UID != children[n] {
				t.Errorf("ConfigMap %s was created again: UID %s, first %s", n, cm.UID, children[n])
			}
		}
		eventually(t, time.Minute, func() error { return cachesMatchPartitions(t, shards[1:], widgetGVR, configMapsGVR) })
		eventually(t, time.Minute, func() error { return appliersCacheTheirPartitions(t, appliers[1:], widgetGVR, configMapsGVR) })
	}) {
		return
	}
	t.Run("no two shards watch one partition at once", func(t *testing.T) {
		watched := map[int][]interval{}
		now := time.Now().UnixNano()
		for i, s := range shards {
			end := now
			if i == 0 {
				end = killedAt
			}
			for n, ivs := range terms(t, s, end) {
				watched[n] = append(watched[n], ivs...)
			}
		}
		for n := range shardPartitions {
			if len(watched[n]) == 0 {
				t.Errorf("partition %d: no shard's log shows it watched", n)
				continue
			}
			for _, o := range overlaps(watched[n]) {
				t.Errorf("partition %d: %s", n, o)
			}
		}
		t.Logf("%d rounds of changes of %d parents; terms by partition: %v", round, parents, watched)
	})
	if !t.Run("a partition label edited by hand", func(t *testing.T) {
		shardLabelEdits(t, b, names)
		eventually(t, time.Minute, func() error { return appliersCacheTheirPartitions(t, appliers[1:], widgetGVR, configMapsGVR) })
	}) {
		return
	}
	if !t.Run("a decorator across shards", func(t *testing.T) {
		shardDecorator(t, b, shards[1:])
		eventually(t, time.Minute, func() error {
			return appliersCacheTheirPartitions(t, appliers[1:], widgetGVR, configMapsGVR, decorateeGVR)
		})
	}) {
		return
	}
	t.Run("the installation's partitions changed while parents exist", func(t *testing.T) {
		// Half the partitions: the parents labelled with one past them are
		// labelled anew, their children follow, and every parent still
		// converges, over two new shards.
		const fewer = shardPartitions / 2
		for _, a := range appliers[1:] {
			a.proc.Stop(5 * time.Second)
		}
		for _, s := range shards[1:] {
			s.proc.Stop(5 * time.Second)
		}
		arg := strconv.Itoa(fewer)
		b.start("applier-fewer", "applier", "--shard-watchers", "--partitions", arg)
		fewerShards := []*roleProcess{startShard("watcher-4", "--partitions", arg), startShard("watcher-5", "--partitions", arg)}
		for _, n := range names {
			b.setWidget(n, "fewer")
		}
		eventually(t, 2*time.Minute, b.converged("fewer", names...))
		eventually(t, time.Minute, func() error {
			if err := labelledAlike(t, ns, names); err != nil {
				return err
			}
			for _, n := range names {
				w, err := env.dyn.Resource(widgetGVR).Namespace(ns).Get(ctx, n, metav1.GetOptions{})
				if err != nil {
					return err
				}
				if p := w.GetLabels()[v1alpha1.LabelPartition]; mustAtoi(t, p) >= fewer {
					return fmt.Errorf("widget %s is still in partition %s, past the %d partitions", n, p, fewer)
				}
			}
			return nil
		})
		eventually(t, time.Minute, func() error { return cachesMatchPartitions(t, fewerShards, widgetGVR, configMapsGVR) })
	})
}

// shardDecorator: a UniversalDecorator of Decoratees, its hook served on
// the bus, over the shards: every Decoratee, labelled by uc, gets its
// attachment, which carries the Decoratee's partition, and each shard
// caches only its partitions' Decoratees.
func shardDecorator(t *testing.T, b *rolesOnBus, shards []*roleProcess) {
	ctx := t.Context()
	installCRD(t, "test/e2e/testdata/decoratee-crd.yaml", decorateeGVR)
	const name, label = "e2e-sharded", "e2e.universalcontroller.dev/sharded"
	go func() { _ = hook.Serve(ctx, b.js, bus.DecoratorController(name), hook.DecoratorSync(echoDecoration)) }()
	registerDecorator(t, name, map[string]any{
		"resources":   decorateesOf(label),
		"attachments": configMapAttachments,
		"hooks":       map[string]any{"sync": map[string]any{}},
	})
	uids := map[string]types.UID{}
	for i := range 16 {
		n := fmt.Sprintf("d-%02d", i)
		reply := map[string]any{"attachments": []any{cm(n+"-attached", nil, map[string]any{"of": n})}}
		uids[n] = createDecoratee(t, b.ns, n, map[string]any{label: "yes"}, map[string]any{name: reply}).GetUID()
	}
	eventually(t, 2*time.Minute, func() error {
		for n, uid := range uids {
			d, err := env.dyn.Resource(decorateeGVR).Namespace(b.ns).Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return err
			}
			c, err := getConfigMap(ctx, b.ns, n+"-attached")
			if err != nil {
				return err
			}
			if err := attachedBy(c, name, uid); err != nil {
				return err
			}
			if p := d.GetLabels()[v1alpha1.LabelPartition]; p == "" || c.Labels[v1alpha1.LabelPartition] != p {
				return fmt.Errorf("decoratee %s in partition %q, its attachment in %q", n, p, c.Labels[v1alpha1.LabelPartition])
			}
		}
		return nil
	})
	eventually(t, time.Minute, func() error {
		return cachesMatchPartitions(t, shards, widgetGVR, configMapsGVR, decorateeGVR)
	})
}

// shardLabelEdits: a parent's label removed, set to no partition, or set
// to another partition, and a child's label changed, by hand. uc sets
// back the first two (a Warning Event on the parent for the second) and
// the child's; a parent moved takes its child along and its changes are
// still applied.
func shardLabelEdits(t *testing.T, b *rolesOnBus, names []string) {
	ctx := t.Context()
	ns := b.ns
	label := func(res string, name string) (string, error) {
		var u *unstructured.Unstructured
		var err error
		if res == "widget" {
			u, err = env.dyn.Resource(widgetGVR).Namespace(ns).Get(ctx, name, metav1.GetOptions{})
		} else {
			var cm *corev1.ConfigMap
			if cm, err = env.kube.CoreV1().ConfigMaps(ns).Get(ctx, name, metav1.GetOptions{}); err == nil {
				return cm.Labels[v1alpha1.LabelPartition], nil
			}
		}
		if err != nil {
			return "", err
		}
		return u.GetLabels()[v1alpha1.LabelPartition], nil
	}
	setLabel := func(gvrName, name, value string) {
		v := "null"
		if value != "" {
			v = strconv.Quote(value)
		}
		patch := []byte(fmt.Sprintf(`{"metadata":{"labels":{%q:%s}}}`, v1alpha1.LabelPartition, v))
		var err error
		if gvrName == "widget" {
			_, err = env.dyn.Resource(widgetGVR).Namespace(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		} else {
			_, err = env.kube.CoreV1().ConfigMaps(ns).Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{})
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	original := map[string]string{}
	for _, n := range names[:4] {
		l, err := label("widget", n)
		if err != nil {
			t.Fatal(err)
		}
		original[n] = l
	}
	is := func(res, name, want string) func() error {
		return func() error {
			got, err := label(res, name)
			if err == nil && got != want {
				err = fmt.Errorf("%s %s: label %q, want %q", res, name, got, want)
			}
			return err
		}
	}
	removed, invalid, moved, child := names[0], names[1], names[2], names[3]
	setLabel("widget", removed, "")
	setLabel("widget", invalid, "banana")
	other := strconv.Itoa((mustAtoi(t, original[moved]) + 1) % shardPartitions)
	setLabel("widget", moved, other)
	setLabel("configmap", child, strconv.Itoa((mustAtoi(t, original[child])+1)%shardPartitions))
	eventually(t, time.Minute, is("widget", removed, original[removed]))
	eventually(t, time.Minute, func() error { return warningEvent(ctx, ns, removed, "PartitionLabel", "was removed") })
	eventually(t, time.Minute, is("widget", invalid, original[invalid]))
	eventually(t, time.Minute, func() error { return warningEvent(ctx, ns, invalid, "PartitionLabel", `was "banana"`) })
	eventually(t, time.Minute, is("configmap", moved, other))
	eventually(t, time.Minute, is("configmap", child, original[child]))
	// Each still converges: the shard that holds it now publishes.
	for _, n := range []string{removed, invalid, moved, child} {
		b.setWidget(n, "edited")
	}
	eventually(t, 2*time.Minute, b.converged("edited", removed, invalid, moved, child))
}

func mustAtoi(t *testing.T, s string) int {
	t.Helper()
	n, err := strconv.Atoi(s)
	if err != nil {
		t.Fatalf("partition label %q: %v", s, err)
	}
	return n
}

// labelledAlike checks each named Widget carries a partition label, and its
// ConfigMap the same one.
func labelledAlike(t *testing.T, ns string, names []string) error {
	for _, n := range names {
		w, err := env.dyn.Resource(widgetGVR).Namespace(ns).Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		cm, err := env.kube.CoreV1().ConfigMaps(ns).Get(t.Context(), n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		p, ok := w.GetLabels()[v1alpha1.LabelPartition]
		if !ok {
			return fmt.Errorf("widget %s has no partition label", n)
		}
		if cm.Labels[v1alpha1.LabelPartition] != p {
			return fmt.Errorf("ConfigMap %s: partition %q, its widget's %q", n, cm.Labels[v1alpha1.LabelPartition], p)
		}
	}
	return nil
}

// cachesMatchPartitions checks that each shard caches, of each resource,
// as many objects as the API server has labelled with the partitions it
// watches, in every namespace: some, and with several shards not all.
func cachesMatchPartitions(t *testing.T, shards []*roleProcess, resources ...schema.GroupVersionResource) error {
	return cachesMatch(t, shards, watching(t), false, resources...)
}

// watching is the partitions a shard watches: its last term's.
func watching(t *testing.T) func(*roleProcess) ([]int, error) {
	return func(s *roleProcess) ([]int, error) {
		partitions, open := lastTerm(t, s)
		if !open {
			return nil, fmt.Errorf("%s watches nothing", s.name)
		}
		return partitions, nil
	}
}

// holding is the partitions an applier holds, as its log says.
func holding(t *testing.T) func(*roleProcess) ([]int, error) {
	return func(a *roleProcess) ([]int, error) {
		held := heldPartitions(t, a)
		if len(held) == 0 {
			return nil, fmt.Errorf("%s holds no partition", a.name)
		}
		return held, nil
	}
}

// appliersCacheTheirPartitions checks that each applier caches, of each
// resource, as many objects as the API server has labelled with the
// partitions it holds, or with none of the installation's partitions, in
// every namespace: some, and with several appliers not all.
func appliersCacheTheirPartitions(t *testing.T, appliers []*roleProcess, resources ...schema.GroupVersionResource) error {
	return cachesMatch(t, appliers, holding(t), true, resources...)
}

// cachesParentsOnly checks that a dispatcher-only process caches every
// parent of its resource, as many as the API server has, and nothing of
// the child resource.
func cachesParentsOnly(t *testing.T, dispatcher *roleProcess, parents, children schema.GroupVersionResource) error {
	ctx := t.Context()
	list, err := env.dyn.Resource(parents).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	families, err := scrapeMetrics(ctx, metricsURL(t, dispatcher))
	if err != nil {
		return err
	}
	cached := families["uc_cached_objects"]
	if got, _ := value(cached, map[string]string{"resource": parents.GroupResource().String()}); int(got) != len(list.Items) {
		return fmt.Errorf("the dispatcher caches %v %s, the API server has %d", got, parents.Resource, len(list.Items))
	}
	if got, ok := value(cached, map[string]string{"resource": children.GroupResource().String()}); ok && got != 0 {
		return fmt.Errorf("the dispatcher caches %v %s: it reads no child", got, children.Resource)
	}
	return nil
}

// cachesMatch checks that each process caches, of each resource, as many
// objects as the API server has labelled with the partitions it holds
// (held), and, inNone, with none of the installation's partitions.
func cachesMatch(t *testing.T, procs []*roleProcess, held func(*roleProcess) ([]int, error), inNone bool, resources ...schema.GroupVersionResource) error {
	ctx := t.Context()
	const none = "none"
	byPartition := map[schema.GroupVersionResource]map[string]int{}
	total := map[schema.GroupVersionResource]int{}
	for _, gvr := range resources {
		list, err := env.dyn.Resource(gvr).List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		byPartition[gvr], total[gvr] = map[string]int{}, len(list.Items)
		for _, o := range list.Items {
			p := o.GetLabels()[v1alpha1.LabelPartition]
			if n, err := strconv.Atoi(p); err != nil || n < 0 || n >= shardPartitions || strconv.Itoa(n) != p {
				p = none
			}
			byPartition[gvr][p]++
		}
	}
	for _, proc := range procs {
		partitions, err := held(proc)
		if err != nil {
			return err
		}
		families, err := scrapeMetrics(ctx, metricsURL(t, proc))
		if err != nil {
			return err
		}
		for gvr, counts := range byPartition {
			want := 0
			for _, n := range partitions {
				want += counts[strconv.Itoa(n)]
			}
			if inNone {
				want += counts[none]
			}
			resource := gvr.GroupResource().String()
			got, _ := value(families["uc_cached_objects"], map[string]string{"resource": resource})
			if int(got) != want {
				return fmt.Errorf("%s caches %v %s, the API server has %d labelled with its partitions %v (in none of them too: %v)", proc.name, got, resource, want, partitions, inNone)
			}
			if want == 0 || want == total[gvr] && len(procs) > 1 {
				return fmt.Errorf("%s holds %d of %d %s: not a share", proc.name, want, total[gvr], resource)
			}
		}
	}
	return nil
}

var heldLine = regexp.MustCompile(`msg="partition (acquired|released|lost)" (?:.* )?partition=(\d+)`)

// heldPartitions are the partitions an applier's log says it holds.
func heldPartitions(t *testing.T, a *roleProcess) []int {
	held := map[int]bool{}
	a.eachMatch(t, heldLine, func(m []string) {
		n, _ := strconv.Atoi(m[2])
		held[n] = m[1] == "acquired"
	})
	var out []int
	for n, h := range held {
		if h {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}

// holdAll checks each live process holds some partitions (held), and all
// of them between them.
func holdAll(live []*roleProcess, held func(*roleProcess) ([]int, error)) func() error {
	return func() error {
		all := map[int]bool{}
		for _, r := range live {
			partitions, err := held(r)
			if err != nil {
				return err
			}
			for _, n := range partitions {
				all[n] = true
			}
		}
		if len(all) != shardPartitions {
			return fmt.Errorf("%d of the %d partitions are held", len(all), shardPartitions)
		}
		return nil
	}
}

var configMapsGVR = schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}

// metricsURL is the /metrics URL a role logged it serves.
func metricsURL(t *testing.T, r *roleProcess) string {
	t.Helper()
	addr := r.served("--metrics-addr")
	if addr == "" {
		t.Fatalf("%s logged no metrics address", r.name)
	}
	return "http://" + addr + "/metrics"
}

var termLine = regexp.MustCompile(`msg="(watching|stopped watching) partitions" .*partitions="?\[([0-9 ]*)\]"? at=(\d+)`)

// terms reads the terms a shard logged, by partition; one still open ends
// at end.
func terms(t *testing.T, r *roleProcess, end int64) map[int][]interval {
	t.Helper()
	out := map[int][]interval{}
	var open []int
	var start int64
	r.eachMatch(t, termLine, func(m []string) {
		at, _ := strconv.ParseInt(m[3], 10, 64)
		if m[1] == "watching" {
			open, start = partitionList(m[2]), at
			return
		}
		for _, n := range partitionList(m[2]) {
			out[n] = append(out[n], interval{r.name, start, at})
		}
		open = nil
	})
	for _, n := range open {
		out[n] = append(out[n], interval{r.name, start, end})
	}
	return out
}

// lastTerm is the partitions of a shard's last term, and whether it still
// runs.
func lastTerm(t *testing.T, r *roleProcess) ([]int, bool) {
	m := termLine.FindStringSubmatch(r.lastLine("watching partitions"))
	if m == nil || m[1] != "watching" {
		return nil, false
	}
	return partitionList(m[2]), true
}

func partitionList(s string) []int {
	var out []int
	for f := range strings.FieldsSeq(s) {
		if n, err := strconv.Atoi(f); err == nil {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
