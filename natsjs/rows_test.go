package natsjs

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/testenv"
)

func sampleRows() []engagement.Stats {
	at := time.UnixMicro(1_700_000_000_123_456)
	return []engagement.Stats{
		{ContentID: "v1", Scope: engagement.GlobalScope, Likes: 3, Dislikes: -1, Counters: map[string]int64{"view": 10, "share": 2}, LastSeq: 42, UpdatedAt: at},
		{ContentID: "v1", Scope: "eu", Likes: 3, LastSeq: 42, UpdatedAt: at},
		{ContentID: "v2", Scope: engagement.GlobalScope, Counters: map[string]int64{"view": 1}, LastSeq: 7, UpdatedAt: at},
	}
}

func TestRowsRoundTrip(t *testing.T) {
	written := time.UnixMicro(1_700_000_001_000_000)
	rows := sampleRows()
	gotAt, got, err := DecodeRows(AppendRows(nil, written, rows))
	if err != nil {
		t.Fatal(err)
	}
	if !gotAt.Equal(written) || !reflect.DeepEqual(got, rows) {
		t.Fatalf("DecodeRows = %v %+v, want %v %+v", gotAt, got, written, rows)
	}
}

// TestPushRoundTrip: a sequenced push keeps its partition, sender and
// number.
func TestPushRoundTrip(t *testing.T) {
	want := RowsPush{Partition: 7, Sender: 0xfeed, Seq: 12, Written: time.UnixMicro(1_700_000_001_000_000), Rows: sampleRows()}
	got, err := DecodePush(AppendPush(nil, want))
	if err != nil {
		t.Fatal(err)
	}
	if !got.Written.Equal(want.Written) || got.Partition != 7 || got.Sender != 0xfeed || got.Seq != 12 || !reflect.DeepEqual(got.Rows, want.Rows) {
		t.Fatalf("DecodePush = %+v, want %+v", got, want)
	}
}

func TestDecodeRowsRejects(t *testing.T) {
	good := AppendRows(nil, time.Now(), sampleRows())
	noScope := AppendRows(nil, time.Now(), []engagement.Stats{{ContentID: "v"}})
	noSeq := AppendRows(nil, time.Now(), nil)
	noSeq = append(noSeq, 0x28, 0x05) // sender 5, no partition or number
	for _, tt := range []struct {
		name, data, wantErr string
	}{
		{"empty", "", "version 0, want 1"},
		{"truncated", string(good[:len(good)-3]), "malformed row push"},
		{"row without scope", string(noScope), "row 0: row without a content id or a scope"},
		{"wrong wire type", "\x0a\x01x", "field 1 has wire type 2"},
		{"sender without a number", string(noSeq), "a sender without a partition or a sequence above 0"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := DecodeRows([]byte(tt.data))
			if err == nil || !errors.Is(err, ErrMalformedRows) || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("DecodeRows = %v, want an ErrMalformedRows saying %q", err, tt.wantErr)
			}
		})
	}
}

// FuzzDecodeRows: no input crashes the decoder, and what decodes encodes
// to something that decodes to the same.
func FuzzDecodeRows(f *testing.F) {
	f.Add(AppendRows(nil, time.UnixMicro(1), sampleRows()))
	f.Add(AppendRows(nil, time.UnixMicro(1), nil))
	f.Add([]byte("\x08\x01\x1a\x00"))
	f.Add(AppendPush(nil, RowsPush{Partition: 3, Sender: 9, Seq: 1, Written: time.UnixMicro(1), Rows: sampleRows()}))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := DecodePush(data)
		if err != nil {
			return
		}
		p2, err := DecodePush(AppendPush(nil, p))
		if err != nil {
			t.Fatalf("re-encoded push does not decode: %v", err)
		}
		if !p2.Written.Equal(p.Written) || p2.Partition != p.Partition && p.Sender != 0 || p2.Sender != p.Sender || p2.Seq != p.Seq && p.Sender != 0 ||
			fmt.Sprint(p2.Rows) != fmt.Sprint(p.Rows) {
			t.Fatalf("round trip: %+v, want %+v", p2, p)
		}
	})
}

// TestPushReachesSubscriber: rows pushed by one connection reach a
// subscriber on another, split into messages under the payload limit, with
// whole items per message; a malformed push is counted and dropped.
func TestPushReachesSubscriber(t *testing.T) {
	s := startServer(t, t.TempDir(), 0)
	pubConn, _ := connect(t, s)
	subConn, _ := connect(t, s)
	var mu sync.Mutex
	var got []engagement.Stats
	pushes := 0
	var seqs []uint64
	var sender uint64
	sub, err := SubscribeRows(subConn, "", func(push RowsPush) {
		rows := push.Rows
		mu.Lock()
		defer mu.Unlock()
		if push.Partition != 3 || push.Sender == 0 || (sender != 0 && push.Sender != sender) {
			t.Errorf("push of partition %d from sender %x, want partition 3 from one sender", push.Partition, push.Sender)
		}
		sender = push.Sender
		seqs = append(seqs, push.Seq)
		if len(rows) == 0 {
			return // the heartbeat
		}
		pushes++
		if len(got) > 0 && len(rows) > 0 && got[len(got)-1].ContentID == rows[0].ContentID {
			t.Errorf("item %s split over two pushes", rows[0].ContentID)
		}
		got = append(got, rows...)
	}, testLogger(t))
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	if err := subConn.Flush(); err != nil {
		t.Fatal(err)
	}
	// Enough rows for several messages of the default 1 MiB limit.
	var rows []engagement.Stats
	long := strings.Repeat("x", 200)
	for i := range 12_000 {
		id := fmt.Sprintf("item-%s-%d", long, i)
		rows = append(rows, engagement.Stats{ContentID: id, Scope: engagement.GlobalScope, Likes: int64(i), LastSeq: 9},
			engagement.Stats{ContentID: id, Scope: "eu", Likes: int64(i), LastSeq: 9})
	}
	p := NewRowPusher(pubConn, "", testLogger(t))
	p.Push(3, rows)
	p.Heartbeat(3)
	if err := pubConn.Publish(RowsSubject(DefaultRowsPrefix, 3), []byte{0xff}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 10*time.Second, "every row, the heartbeat and the malformed push", testenv.Until(func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(got) == len(rows) && len(seqs) == pushes+1 && sub.Malformed() == 1
	}))
	mu.Lock()
	defer mu.Unlock()
	for i, seq := range seqs {
		if seq != uint64(i+1) {
			t.Fatalf("push numbers %v, want 1, 2, … in order (the heartbeat last)", seqs)
		}
	}
	if st := p.Stats(); st.Heartbeats != 1 {
		t.Errorf("pusher Stats() = %+v, want 1 heartbeat", st)
	}
	if pushes < 2 {
		t.Errorf("%d pushes, want several (payload limit)", pushes)
	}
	if st := p.Stats(); st.Rows != uint64(len(rows)) || st.Pushes != uint64(pushes) || st.Errors != 0 {
		t.Errorf("pusher Stats() = %+v, want %d rows in %d pushes", st, len(rows), pushes)
	}
	if !reflect.DeepEqual(got, rows) {
		t.Errorf("rows received differ from those pushed")
	}
}
