package natsjs

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/partial"
)

// flushMessage returns a real partial-sum message of sums sums, as an agent
// publishes after a flush.
func flushMessage(sums int) []byte {
	b := partial.Batch{Agent: "agent-bench", Region: "local", Epoch: 1, Seq: 1, FlushedAt: time.Now()}
	for i := range sums {
		b.Sums = append(b.Sums, partial.Sum{
			ContentID: fmt.Sprintf("video-%012d", i*7919),
			Counter:   "view",
			Delta:     int64(1 + i%50),
		})
	}
	return partial.Append(nil, &b)
}

// benchConn returns a JetStream context on a fresh server: over TCP (as
// `nats bench` measures) or in-process (as in standalone mode).
func benchConn(b *testing.B, syncAlways, tcp bool) jetstream.JetStream {
	b.Helper()
	cfg := DefaultServerConfig(b.TempDir())
	cfg.SyncAlways = syncAlways
	if tcp {
		cfg.Port = -1
	}
	s, err := StartServer(cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(s.Shutdown)
	var nc *nats.Conn
	if tcp {
		nc, err = Connect(ConnConfig{URL: s.ClientURL(), Name: "bench"}, nil)
	} else {
		nc, err = s.Connect("bench")
	}
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		b.Fatal(err)
	}
	return js
}

// BenchmarkPublish measures confirmed publishes of ~16 KiB flush messages
// (500 partial sums), with the file store syncing every write or on its
// default interval, from 1 publisher or 16 concurrent ones (one per
// partition, as an agent flushes its partitions). impl=natsjs is
// Publisher.Publish; impl=raw is the peer: a bare jetstream PublishMsg of
// the same bytes without message id or expected stream, as `nats bench js
// pub` sends.
func BenchmarkPublish(b *testing.B) {
	data := flushMessage(500)
	for _, sync := range []bool{true, false} {
		for _, tcp := range []bool{true, false} {
			for _, publishers := range []int{1, 16} {
				for _, raw := range []bool{false, true} {
					impl := "natsjs"
					if raw {
						impl = "raw"
					}
					name := fmt.Sprintf("sync=%s/conn=%s/publishers=%d/impl=%s", syncName(sync), connName(tcp), publishers, impl)
					b.Run(name, func(b *testing.B) {
						js := benchConn(b, sync, tcp)
						cfg := testStreamConfig(16)
						if err := EnsureStream(context.Background(), js, cfg); err != nil {
							b.Fatal(err)
						}
						pub := NewPublisher(js, cfg).Publish
						if raw {
							pub = func(ctx context.Context, p uint32, _ string, data []byte) error {
								_, err := js.PublishMsg(ctx, &nats.Msg{Subject: cfg.Subject(p), Data: data})
								return err
							}
						}
						benchPublish(b, pub, publishers, data)
					})
				}
			}
		}
	}
}

type publishFunc func(ctx context.Context, partition uint32, msgID string, data []byte) error

func benchPublish(b *testing.B, publish publishFunc, publishers int, data []byte) {
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, publishers)
	b.ResetTimer()
	for w := range publishers {
		n := b.N / publishers
		if w < b.N%publishers {
			n++
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range n {
				id := fmt.Sprintf("agent-bench/1/%d/%d", i, w)
				if err := publish(ctx, uint32(w), id, data); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	b.StopTimer()
	close(errs)
	for err := range errs {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

// BenchmarkConsume measures the ordered consumer (MaxAckPending 1, confirmed
// ack) with a handler that does nothing, on 1 or 16 partitions, in-process
// connection, with the file store syncing every write (each ack removes a
// message from the work queue, which is a synced write) or on its default
// interval. The backlog is published before the timer starts.
func BenchmarkConsume(b *testing.B) {
	data := flushMessage(500)
	for _, sync := range []bool{true, false} {
		for _, partitions := range []int{1, 16} {
			b.Run(fmt.Sprintf("sync=%s/partitions=%d", syncName(sync), partitions), func(b *testing.B) {
				benchConsume(b, benchConn(b, sync, false), partitions, data)
			})
		}
	}
}

func benchConsume(b *testing.B, js jetstream.JetStream, partitions int, data []byte) {
	ctx := context.Background()
	cfg := testStreamConfig(partitions)
	if err := EnsureStream(ctx, js, cfg); err != nil {
		b.Fatal(err)
	}
	pub := NewPublisher(js, cfg)
	for i := range b.N {
		p := uint32(i % partitions)
		if err := pub.Publish(ctx, p, fmt.Sprintf("a/1/%d/%d", i, p), data); err != nil {
			b.Fatal(err)
		}
	}
	all := make([]uint32, partitions)
	for p := range all {
		all[p] = uint32(p)
	}
	c := NewConsumer(js, ConsumerConfig{Stream: cfg, Durable: "bench"})
	for _, p := range all { // consumer creation is not what is measured
		if _, err := c.ensure(ctx, p); err != nil {
			b.Fatal(err)
		}
	}
	done := make(chan struct{})
	var applied atomic.Int64
	h := func(context.Context, uint64, []byte) error {
		if applied.Add(1) == int64(b.N) {
			close(done)
		}
		return nil
	}
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	runDone := make(chan error, 1)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	go func() { runDone <- c.Run(runCtx, all, h) }()
	select {
	case <-done:
	case err := <-runDone:
		b.Fatalf("Run returned after %d of %d messages: %v", applied.Load(), b.N, err)
	}
	b.StopTimer()
	cancel()
	if err := <-runDone; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func syncName(always bool) string {
	if always {
		return "always"
	}
	return "default"
}

func connName(tcp bool) string {
	if tcp {
		return "tcp"
	}
	return "inproc"
}
