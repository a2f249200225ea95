package contracttest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"k8s.io/apimachinery/pkg/util/wait"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/schemas/bus"
)

// TestUnsettled: the messages an Unsettled tracks are not delivered again
// however long past the consumer's ack wait they are unsettled, each settled
// one leaves the stream or comes back as its settlement says, and what is no
// longer tracked — its Unsettled stopped — is delivered again after the ack
// wait.
func TestUnsettled(t *testing.T) {
	// Progress every ackWait/3 leaves 1s for a loaded machine to be late.
	const ackWait = 1500 * time.Millisecond
	js := bustest.JetStream(t)
	ctx := t.Context()
	cons, err := js.CreateOrUpdateConsumer(ctx, bus.ReplyStream, jetstream.ConsumerConfig{
		Durable: "unsettled", AckPolicy: jetstream.AckExplicitPolicy, AckWait: ackWait, FilterSubject: bus.ReplyPrefix + ".>",
	})
	if err != nil {
		t.Fatal(err)
	}
	settle := map[string]func(jetstream.Msg) error{
		"ack":  jetstream.Msg.Ack,
		"nak":  func(m jetstream.Msg) error { return m.NakWithDelay(time.Hour) },
		"term": jetstream.Msg.Term,
		"kept": nil, // unsettled until the Unsettled stops
	}
	for name := range settle {
		if _, err := js.Publish(ctx, bus.ReplyPrefix+".c.sync.0."+name, []byte(name)); err != nil {
			t.Fatal(err)
		}
	}
	u := bus.NewUnsettled()
	running, stop := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); u.Run(running, ackWait/3) }()
	batch, err := cons.Fetch(len(settle))
	if err != nil {
		t.Fatal(err)
	}
	tracked := map[string]jetstream.Msg{}
	for m := range batch.Messages() {
		tracked[string(m.Data())] = u.Track(m)
	}
	if len(tracked) != len(settle) {
		t.Fatalf("fetched %d messages, want %d", len(tracked), len(settle))
	}

	// Unsettled for five ack waits: nothing comes again.
	again, err := cons.Fetch(1, jetstream.FetchMaxWait(3*ackWait))
	if err != nil {
		t.Fatal(err)
	}
	for m := range again.Messages() {
		t.Fatalf("%s was delivered again while unsettled", m.Data())
	}
	for name, fn := range settle {
		if fn != nil {
			if err := fn(tracked[name]); err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		}
	}
	stop()
	<-done
	// nak (delayed) and kept are still pending; ack and term left.
	var info *jetstream.ConsumerInfo
	err = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, ackWait, true, func(ctx context.Context) (bool, error) {
		info, err = cons.Info(ctx)
		return err == nil && info.NumAckPending == 2, err
	})
	if err != nil || info.NumRedelivered != 0 {
		t.Fatalf("%d pending, %d redelivered (%v); want the nacked and the kept message pending, none redelivered", info.NumAckPending, info.NumRedelivered, err)
	}

	// The Unsettled stopped: the kept message comes back after the ack wait.
	start := time.Now()
	again, err = cons.Fetch(1, jetstream.FetchMaxWait(4*ackWait))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for m := range again.Messages() {
		md, _ := m.Metadata()
		names = append(names, fmt.Sprintf("%s (delivery %d)", m.Data(), md.NumDelivered))
	}
	if len(names) != 1 || names[0] != "kept (delivery 2)" {
		t.Fatalf("delivered again: %v, want the kept message, once", names)
	}
	t.Logf("no longer tracked, %s was delivered again after %s", names[0], time.Since(start).Round(10*time.Millisecond))
}
