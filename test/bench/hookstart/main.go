// Command hookstart measures how long a bus-native hook worker takes from
// the start of its process to its first reply: the start-up time of
// examples/foo's hook in BENCHMARKS.md ("The Go SDK's weight"). It starts
// the test bed's nats-server with uc's streams and the Foo controller's sync consumer; then, -runs
// times and for each binary in turn (pairs stay comparable when the
// machine's speed drifts), it publishes a sync request for a new Foo,
// starts the binary with NATS_URL, times until the reply is on the bus and
// stops the binary; the next run starts once the server has forgotten the
// binary's pulls.
//
//	go build -o /tmp/foo-hook ./examples/foo/cmd/foo-hook
//	go run ./test/bench/hookstart -runs 20 /tmp/foo-hook /tmp/foo-hook-other
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"syscall"
	"time"

	"github.com/cloudevents/sdk-go/v2/event"
	"github.com/google/uuid"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/types"

	"universalcontroller.dev/uc/examples/foo"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
	"universalcontroller.dev/uc/schemas/hooks"
	"universalcontroller.dev/uc/test/testbed"
)

func main() {
	runs := flag.Int("runs", 10, "starts of each binary")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: hookstart [-runs N] HOOK-BINARY...")
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, *runs, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "hookstart:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, runs int, bins []string) error {
	dir, err := os.MkdirTemp("", "hookstart")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	srv, err := testbed.StartNATS(ctx, dir, 0)
	if err != nil {
		return err
	}
	defer srv.Stop()
	nc, err := nats.Connect(srv.URL())
	if err != nil {
		return err
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		return err
	}
	if err := topology.EnsureStreams(ctx, js, topology.Streams, topology.Options{}); err != nil {
		return err
	}
	cons, err := topology.EnsureConsumer(ctx, js, topology.HookConsumer(foo.Controller, hooks.Sync))
	if err != nil {
		return err
	}
	times := make([][]time.Duration, len(bins))
	for range runs {
		for i, bin := range bins {
			if err := noPullWaiting(ctx, cons); err != nil {
				return err
			}
			d, err := firstReply(ctx, nc, js, bin, srv.URL())
			if err != nil {
				return fmt.Errorf("%s: %w", bin, err)
			}
			times[i] = append(times[i], d)
		}
	}
	for i, bin := range bins {
		slices.Sort(times[i])
		fmt.Printf("%s: start to first reply, %d runs: min %s, median %s, max %s\n", bin, runs,
			times[i][0].Round(time.Millisecond), times[i][len(times[i])/2].Round(time.Millisecond), times[i][len(times[i])-1].Round(time.Millisecond))
	}
	return nil
}

// noPullWaiting waits until the server has forgotten the pulls of the
// binary stopped last: a request published meanwhile would go to a pull
// nobody reads, and come to the next binary only after the ack wait.
func noPullWaiting(ctx context.Context, cons jetstream.Consumer) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		info, err := cons.Info(ctx)
		if err == nil && info.NumWaiting == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("pulls of a stopped hook still waiting: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// firstReply publishes a request for a new Foo, starts bin, and returns how
// long after its start its reply came.
func firstReply(ctx context.Context, nc *nats.Conn, js jetstream.JetStream, bin, url string) (time.Duration, error) {
	meta, msg, err := fooRequest(ctx)
	if err != nil {
		return 0, err
	}
	replies, err := nc.SubscribeSync(meta.ReplySubject())
	if err != nil {
		return 0, err
	}
	defer replies.Unsubscribe()
	if _, err := js.PublishMsg(ctx, msg); err != nil {
		return 0, err
	}
	cmd := exec.CommandContext(ctx, bin)
	cmd.Env = append(os.Environ(), "NATS_URL="+url)
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return 0, err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		_ = cmd.Wait()
	}()
	reply, err := replies.NextMsgWithContext(ctx)
	if err != nil {
		return 0, err
	}
	took := time.Since(start)
	if typ := reply.Header.Get("ce-type"); typ != bus.ResponseType(hooks.Sync) {
		return 0, fmt.Errorf("the hook answered with a %s: %s", typ, reply.Data)
	}
	return took, nil
}

// fooRequest is a sync request for a new Foo, as the watcher publishes it.
func fooRequest(ctx context.Context) (bus.Meta, *nats.Msg, error) {
	uid := types.UID(uuid.NewString())
	meta := bus.Meta{Address: bus.Address{Controller: foo.Controller, Hook: hooks.Sync, Partition: bus.Partition(uid, bus.DefaultPartitions), ParentUID: uid},
		Namespace: "default", Name: "foo-" + string(uid), Generation: 1, ResourceVersion: "1", Observation: 1, Observed: time.Now()}
	data, err := json.Marshal(map[string]any{
		"controller": map[string]any{"apiVersion": "universalcontroller.dev/v1alpha1", "kind": "UniversalController",
			"metadata": map[string]any{"name": foo.Controller}},
		"parent": map[string]any{"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
			"metadata": map[string]any{"name": meta.Name, "namespace": meta.Namespace, "uid": uid},
			"spec":     map[string]any{"deploymentName": meta.Name, "replicas": 1}},
		"children": map[string]any{"Deployment.apps/v1": map[string]any{}},
		"related":  map[string]any{},
	})
	if err != nil {
		return meta, nil, err
	}
	e := event.New()
	e.SetID(uuid.NewString())
	e.SetType(bus.RequestType(hooks.Sync))
	e.SetSource("/hookstart")
	meta.SetOn(&e)
	if err := e.SetData(event.ApplicationJSON, json.RawMessage(data)); err != nil {
		return meta, nil, err
	}
	msg, err := bus.ToMsg(ctx, meta.RequestSubject(), &e)
	return meta, msg, err
}
