package testbed_test

import (
	"context"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/test/testbed"
)

// TestNATSCluster: a three-node cluster takes an R3 stream, survives the
// loss of one node, and keeps its messages across a restart of all nodes.
func TestNATSCluster(t *testing.T) {
	ctx := t.Context()
	c, err := testbed.StartNATSCluster(ctx, t.TempDir(), 3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Stop)
	nc, err := nats.Connect(c.URL(), nats.MaxReconnects(-1))
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	// publish publishes one message and returns how many the stream holds;
	// while the cluster elects a leader, calls time out: it retries them.
	publish := func() uint64 {
		t.Helper()
		var msgs uint64
		err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
			attempt, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			s, err := js.CreateOrUpdateStream(attempt, jetstream.StreamConfig{Name: "R3", Subjects: []string{"r3.>"}, Replicas: 3, Storage: jetstream.FileStorage})
			if err == nil {
				_, err = js.Publish(attempt, "r3.x", []byte("m"))
			}
			if err == nil {
				var info *jetstream.StreamInfo
				info, err = s.Info(attempt)
				if err == nil {
					msgs = info.State.Msgs
				}
			}
			return err == nil, nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return msgs
	}
	for want, step := range []func(){
		func() {},
		func() { c.Servers[1].Kill() },
		func() {
			if err := c.Restart(ctx); err != nil {
				t.Fatal(err)
			}
		},
	} {
		step()
		start := time.Now()
		if got := publish(); got != uint64(want+1) {
			t.Fatalf("after step %d the stream holds %d messages, want %d", want, got, want+1)
		}
		t.Logf("step %d: published after %s", want, time.Since(start).Round(time.Millisecond))
	}
}
