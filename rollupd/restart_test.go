package rollupd

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/edgecount/edgecount/internal/testenv"
	"github.com/edgecount/edgecount/natsjs"
	"github.com/edgecount/edgecount/partial"
	"github.com/edgecount/edgecount/store/embedded"
)

// TestProcessSurvivesBrokerRestart: a rollup process, fixed or shared,
// keeps applying across a broker restart over TCP, also when the broker
// comes back without its store (then the stream, the consumers and the
// membership are created again, and the new stream's sequences lie above
// those the rows remember). Every like acknowledged by the broker is
// counted exactly once.
func TestProcessSurvivesBrokerRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("restarts a broker; -short")
	}
	tests := []struct {
		name       string
		partitions []uint32
		wipe       bool
	}{
		{"fixed", []uint32{0, 1}, false},
		{"shared", nil, false},
		{"shared, store lost", nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			port := l.Addr().(*net.TCPAddr).Port
			l.Close()
			scfg := natsjs.DefaultServerConfig(dir)
			scfg.Port, scfg.SyncAlways = port, false
			srv, err := natsjs.StartServer(scfg)
			if err != nil {
				t.Fatal(err)
			}
			defer func() { srv.Shutdown() }()
			bus, err := natsjs.Dial(natsjs.ConnConfig{URL: srv.ClientURL(), Name: "rollup", ReconnectMin: 5 * time.Millisecond, ReconnectMax: 50 * time.Millisecond}, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer bus.Close()
			stream := natsjs.DefaultStreamConfig()
			stream.Partitions = testPartitions
			if err := bus.EnsureStream(t.Context(), stream); err != nil {
				t.Fatal(err)
			}
			st, err := embedded.Open(embedded.Config{Path: filepath.Join(t.TempDir(), "db"), NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer st.Close()
			r := &rig{bus: bus, stream: stream, st: st}
			p, err := New(bus, st, r.config(tt.partitions))
			if err != nil {
				t.Fatal(err)
			}
			stop := run(t, p)

			acked := map[string]int64{}
			pub := bus.Publisher(stream)
			publish := func(seq uint64) {
				t.Helper()
				id := fmt.Sprintf("v%d", seq%3)
				b := &partial.Batch{Agent: "us-a1", Region: "us", Epoch: 1, Seq: seq, Partition: partial.PartitionOf(id, testPartitions), FlushedAt: time.Now(),
					Sums: []partial.Sum{{ContentID: id, Counter: "like", Region: "us", Delta: 1}}}
				testenv.Eventually(t, 30*time.Second, "the broker to store like "+b.MsgID(), func() (string, bool) {
					err := pub.Publish(t.Context(), b.Partition, b.MsgID(), partial.Append(nil, b))
					return fmt.Sprint(err), err == nil
				})
				acked[id]++
			}
			counted := func() (string, bool) {
				got := map[string]int64{}
				for id := range acked {
					got[id] = likes(t, st, id)
				}
				return fmt.Sprint(got), fmt.Sprint(got) == fmt.Sprint(acked)
			}
			for seq := uint64(1); seq <= 9; seq++ {
				publish(seq)
			}
			testenv.Eventually(t, 30*time.Second, fmt.Sprint("counted ", acked), counted)

			srv.Shutdown()
			if tt.wipe {
				if err := os.RemoveAll(dir); err != nil {
					t.Fatal(err)
				}
			}
			if srv, err = natsjs.StartServer(scfg); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			for seq := uint64(10); seq <= 18; seq++ {
				publish(seq)
			}
			testenv.Eventually(t, 30*time.Second, fmt.Sprint("counted after the restart ", acked), counted)
			t.Logf("every like counted %v after the broker was back", time.Since(back).Round(time.Millisecond))
			if err := stop(); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got, done := counted(); !done {
				t.Errorf("after stop: counted %s, want %v", got, acked)
			}
		})
	}
}
