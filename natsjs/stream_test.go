package natsjs

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/edgecount/edgecount/internal/testenv"
)

func TestStreamConfigValidate(t *testing.T) {
	tests := []struct {
		name    string
		edit    func(*StreamConfig)
		wantErr string
	}{
		{"default", func(*StreamConfig) {}, ""},
		{"no max age", func(c *StreamConfig) { c.MaxAge = 0 }, ""},
		{"empty name", func(c *StreamConfig) { c.Name = "" }, `stream name "" is not a valid name`},
		{"dotted name", func(c *StreamConfig) { c.Name = "A.B" }, `stream name "A.B" is not a valid name`},
		{"spaced name", func(c *StreamConfig) { c.Name = "A B" }, `stream name "A B" is not a valid name`},
		{"empty prefix", func(c *StreamConfig) { c.SubjectPrefix = "" }, `subject prefix "" is not a literal subject`},
		{"wildcard prefix", func(c *StreamConfig) { c.SubjectPrefix = "a.*" }, `subject prefix "a.*" is not a literal subject`},
		{"empty token", func(c *StreamConfig) { c.SubjectPrefix = "a..b" }, `subject prefix "a..b" is not a literal subject`},
		{"trailing dot", func(c *StreamConfig) { c.SubjectPrefix = "a." }, `subject prefix "a." is not a literal subject`},
		{"no partitions", func(c *StreamConfig) { c.Partitions = 0 }, "partitions 0 is out of range"},
		{"too many partitions", func(c *StreamConfig) { c.Partitions = MaxPartitions + 1 }, "partitions 4097 is out of range"},
		{"no replicas", func(c *StreamConfig) { c.Replicas = 0 }, "replicas 0 is out of range"},
		{"negative max age", func(c *StreamConfig) { c.MaxAge = -time.Second }, "max age -1s is negative"},
		{"no dup window", func(c *StreamConfig) { c.DuplicateWindow = 0 }, "duplicate window 0s is not positive"},
		{"dup window over max age", func(c *StreamConfig) { c.MaxAge = time.Minute; c.DuplicateWindow = time.Hour }, "duplicate window 1h0m0s is longer than max age 1m0s"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := DefaultStreamConfig()
			tt.edit(&cfg)
			checkErr(t, cfg.Validate(), tt.wantErr)
		})
	}
}

func TestStreamConfigValidateReportsEveryProblem(t *testing.T) {
	err := StreamConfig{}.Validate()
	for _, want := range []string{"stream name", "subject prefix", "partitions", "replicas", "duplicate window"} {
		checkErr(t, err, want)
	}
}

func TestSubject(t *testing.T) {
	cfg := DefaultStreamConfig()
	if got, want := cfg.Subject(7), "edgecount.sums.7"; got != want {
		t.Errorf("Subject(7) = %q, want %q", got, want)
	}
}

func streamInfo(t *testing.T, js jetstream.JetStream, name string) *jetstream.StreamInfo {
	t.Helper()
	st, err := js.Stream(context.Background(), name)
	if err != nil {
		t.Fatalf("Stream(%s): %v", name, err)
	}
	return st.CachedInfo()
}

func TestEnsureStreamCreatesAndUpdates(t *testing.T) {
	s := startServer(t, t.TempDir(), 0)
	nc, js := connect(t, s)
	ctx := context.Background()

	cfg := testStreamConfig(4)
	// The broker's advisory of every update of the stream.
	updates, err := nc.SubscribeSync("$JS.EVENT.ADVISORY.STREAM.UPDATED." + cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	updated := func() int {
		t.Helper()
		if err := nc.Flush(); err != nil {
			t.Fatal(err)
		}
		n := 0
		for {
			if _, err := updates.NextMsg(200 * time.Millisecond); err != nil {
				return n
			}
			n++
		}
	}
	for i := range 2 { // the second call changes nothing, and sends no update
		if err := EnsureStream(ctx, js, cfg); err != nil {
			t.Fatalf("EnsureStream #%d: %v", i+1, err)
		}
	}
	if n := updated(); n != 0 {
		t.Errorf("ensuring a stream that has its config sent %d updates, want none", n)
	}
	info := streamInfo(t, js, cfg.Name)
	if got, want := info.Config.Subjects, []string{"test.sums.0", "test.sums.1", "test.sums.2", "test.sums.3"}; !slices.Equal(got, want) {
		t.Errorf("subjects = %v, want %v", got, want)
	}
	if got := info.Config.Retention; got != jetstream.WorkQueuePolicy {
		t.Errorf("retention = %v, want work queue", got)
	}
	if got := info.Config.Storage; got != jetstream.FileStorage {
		t.Errorf("storage = %v, want file", got)
	}
	if got := info.Config.Duplicates; got != cfg.DuplicateWindow {
		t.Errorf("duplicate window = %v, want %v", got, cfg.DuplicateWindow)
	}

	// Grow partitions and change MaxAge: updated in place.
	cfg.Partitions = 6
	cfg.MaxAge = 2 * time.Hour
	if err := EnsureStream(ctx, js, cfg); err != nil {
		t.Fatalf("EnsureStream (update): %v", err)
	}
	info = streamInfo(t, js, cfg.Name)
	if got := len(info.Config.Subjects); got != 6 {
		t.Errorf("got %d subjects after growing, want 6", got)
	}
	if got := info.Config.MaxAge; got != 2*time.Hour {
		t.Errorf("max age = %v, want 2h", got)
	}
	if n := updated(); n != 1 {
		t.Errorf("growing the stream sent %d updates, want 1", n)
	}
	only := cfg
	only.MaxAge = 3 * time.Hour // one setting changed: updated
	if err := EnsureStream(ctx, js, only); err != nil {
		t.Fatalf("EnsureStream (max age): %v", err)
	}
	if got, n := streamInfo(t, js, cfg.Name).Config.MaxAge, updated(); got != 3*time.Hour || n != 1 {
		t.Errorf("max age = %v after %d updates, want 3h after 1", got, n)
	}
	cfg = only

	// Shrinking is refused while a dropped partition holds messages...
	pub := NewPublisher(js, cfg)
	publish(t, pub, 5, "a/1/1/5", "x")
	small := cfg
	small.Partitions = 4
	if err := EnsureStream(ctx, js, small); !errors.Is(err, ErrPartitionInUse) {
		t.Fatalf("shrinking over a non-empty partition: got %v, want ErrPartitionInUse", err)
	}
	if got := len(streamInfo(t, js, cfg.Name).Config.Subjects); got != 6 {
		t.Errorf("got %d subjects after refused shrink, want 6", got)
	}
	// ...and allowed once it is empty.
	st, err := js.Stream(ctx, cfg.Name)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Purge(ctx, jetstream.WithPurgeSubject(cfg.Subject(5))); err != nil {
		t.Fatalf("Purge: %v", err)
	}
	if err := EnsureStream(ctx, js, small); err != nil {
		t.Fatalf("shrinking over empty partitions: %v", err)
	}
	if got := len(streamInfo(t, js, cfg.Name).Config.Subjects); got != 4 {
		t.Errorf("got %d subjects after shrink, want 4", got)
	}
}

func TestEnsureStreamRejectsInvalidConfig(t *testing.T) {
	s := startServer(t, t.TempDir(), 0)
	_, js := connect(t, s)
	err := EnsureStream(context.Background(), js, StreamConfig{})
	checkErr(t, err, "cannot ensure stream")
}

func TestPublishDuplicateIsStoredOnce(t *testing.T) {
	_, js, cfg := setup(t, 2)
	pub := NewPublisher(js, cfg)
	publish(t, pub, 1, "agent-a/1/1/1", "first")
	publish(t, pub, 1, "agent-a/1/1/1", "retry") // a retried publish: same id
	publish(t, pub, 1, "agent-a/1/2/1", "second")
	if got, want := pub.Stats(), (PublisherStats{Published: 3, Duplicates: 1}); got != want {
		t.Errorf("Stats() = %+v, want %+v", got, want)
	}
	if got := streamInfo(t, js, cfg.Name).State.Msgs; got != 2 {
		t.Errorf("stream holds %d messages, want 2", got)
	}

	rec := &recorder{}
	c := NewConsumer(js, testConsumerConfig(t, cfg))
	start(t, c, []uint32{1}, rec.handle)
	testenv.Eventually(t, 30*time.Second, "both messages", testenv.Until(func() bool { return rec.len() >= 2 }))
	testenv.Eventually(t, 30*time.Second, "backlog to drain", testenv.Until(func() bool { return pending(t, c, []uint32{1}) == 0 }))
	got := rec.snapshot()
	if len(got) != 2 || got[0].data != "first" || got[1].data != "second" {
		t.Errorf("handler saw %+v, want first then second, once each", got)
	}
}

func TestPublishErrors(t *testing.T) {
	_, js, cfg := setup(t, 2)
	pub := NewPublisher(js, cfg)
	other := cfg
	other.Name = "MISSING"
	tests := []struct {
		name      string
		pub       *Publisher
		partition uint32
		id        string
		want      error // nil: any error
	}{
		{"no msg id", pub, 0, "", ErrNoMsgID},
		{"partition out of range", pub, 2, "a/1/1/2", ErrBadPartition},
		{"stream missing", NewPublisher(js, other), 0, "a/1/1/0", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.pub.Publish(context.Background(), tt.partition, tt.id, []byte("x"))
			if err == nil {
				t.Fatalf("Publish: got no error, want one")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("Publish: got %v, want %v", err, tt.want)
			}
		})
	}
	if got := streamInfo(t, js, cfg.Name).State.Msgs; got != 0 {
		t.Errorf("stream holds %d messages after failed publishes, want 0", got)
	}
}
