package topology_test

import (
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"universalcontroller.dev/uc/internal/bustest"
	"universalcontroller.dev/uc/internal/topology"
	"universalcontroller.dev/uc/schemas/bus"
)

// BenchmarkConsumerState measures what keeping the consumers' state in
// files costs, against memory: replies published at the pace of the bench's
// create phase (300 a second, 2 KiB) to the reply stream, on files, spread
// over 32 partitions, each consumed by its own consumer and acknowledged
// 5 ms after delivery, as the appliers do. It reports the process's CPU
// (client and embedded server) per reply and per second of the run (a
// consumer with its state in files writes it up to 10 times a second).
//
//	go test -run - -bench ConsumerState -benchtime 3000x ./internal/topology
func BenchmarkConsumerState(b *testing.B) {
	const partitions, perSecond = 32, 300
	for _, inMemory := range []bool{true, false} {
		b.Run(fmt.Sprintf("memory=%v", inMemory), func(b *testing.B) {
			_, js := bustest.RestartableJetStream(b)
			ctx := b.Context()
			var acked atomic.Int64
			all := make(chan struct{})
			for n := range partitions {
				c := topology.ApplierConsumer(n)
				c.Config.MemoryStorage = inMemory
				cons, err := js.CreateOrUpdateConsumer(ctx, c.Stream, c.Config)
				if err != nil {
					b.Fatal(err)
				}
				cc, err := cons.Consume(func(msg jetstream.Msg) {
					time.AfterFunc(5*time.Millisecond, func() {
						_ = msg.Ack()
						if acked.Add(1) == int64(b.N) {
							close(all)
						}
					})
				})
				if err != nil {
					b.Fatal(err)
				}
				defer cc.Stop()
			}
			data := make([]byte, 2048)
			tick := time.NewTicker(time.Second / perSecond)
			defer tick.Stop()
			start, cpu := time.Now(), cpuTime()
			b.ResetTimer()
			for i := range b.N {
				<-tick.C
				if _, err := js.PublishAsync(fmt.Sprintf("%s.c.sync.%d.u%d", bus.ReplyPrefix, i%partitions, i), data); err != nil {
					b.Fatal(err)
				}
			}
			<-all
			b.StopTimer()
			used := cpuTime() - cpu
			b.ReportMetric(float64(used)/float64(b.N), "cpu-ns/op")
			b.ReportMetric(float64(used)/float64(time.Since(start)), "cpu-s/s")
		})
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
