package partial

import (
	"encoding/hex"
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

func sample() *Batch {
	return &Batch{
		Agent: "us-east-a1", Region: "us-east", Epoch: 1732950000000000000, Seq: 42, Partition: 7,
		FlushedAt: time.UnixMilli(1764490000123),
		Sums: []Sum{
			{ContentID: "video:1", Counter: "like", Region: "us-east", Delta: 3},
			{ContentID: "video:1", Counter: "like", Region: "eu-west", Delta: -1},
			{ContentID: "video:2", Counter: "view", Region: "us-east", Delta: 1_000_000},
		},
	}
}

// withTops returns sample() with trending lists.
func withTops() *Batch {
	b := sample()
	b.Tops = []TopList{
		{Counter: "like", Window: "5m", Floor: 4, Items: []TopItem{
			{ContentID: "video:1", Count: 90, Error: 3},
			{ContentID: "video:9", Count: 12},
		}},
		{Counter: "like", Window: "24h", Floor: math.MaxInt64, Items: []TopItem{
			{ContentID: "video:1", Count: math.MaxInt64, Error: math.MaxInt64},
		}},
		{Counter: "view", Window: "1h"}, // nothing tracked, floor 0
	}
	return b
}

func TestRoundTrip(t *testing.T) {
	more := withTops()
	more.Tops, more.More = nil, true // a chunk of a flush that continues
	for _, in := range []*Batch{sample(), withTops(), more} {
		roundTrip(t, in)
	}
}

func roundTrip(t *testing.T, in *Batch) {
	t.Helper()
	data := Append(nil, in)
	var out Batch
	if err := Decode(data, &out); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !out.FlushedAt.Equal(in.FlushedAt) {
		t.Fatalf("FlushedAt = %v, want %v", out.FlushedAt, in.FlushedAt)
	}
	out.FlushedAt = in.FlushedAt
	if len(in.Tops) == 0 && len(out.Tops) == 0 {
		out.Tops = in.Tops
	}
	if !reflect.DeepEqual(&out, in) {
		t.Fatalf("Decode(Append(b)) = %+v, want %+v", out, *in)
	}
	size := 0
	for i := range in.Sums {
		size += SumSize(&in.Sums[i], in.Region)
	}
	for i := range in.Tops {
		size += TopListSize(&in.Tops[i])
	}
	header := Append(nil, &Batch{Agent: in.Agent, Region: in.Region, Epoch: in.Epoch, Seq: in.Seq, Partition: in.Partition, FlushedAt: in.FlushedAt, More: in.More})
	if got, want := len(data), len(header)+size; got != want {
		t.Fatalf("encoded size = %d, want header %d + sums %d", got, len(header), size)
	}
}

func TestDecodeReusesSums(t *testing.T) {
	data := Append(nil, sample())
	b := Batch{Sums: make([]Sum, 0, 8)}
	p := &b.Sums[:1][0]
	if err := Decode(data, &b); err != nil {
		t.Fatal(err)
	}
	if &b.Sums[0] != p {
		t.Fatal("Decode did not reuse the Sums backing array")
	}
}

// TestDecodeFirstRelease decodes a message as the first release wrote it
// (no trending lists): the bytes are fixed here, so that a change to the
// encoding cannot silently make old messages unreadable.
func TestDecodeFirstRelease(t *testing.T) {
	const v1 = "0801120a75732d656173742d61311a0775732d656173742080c08ddcfe9aab8618282a300738fbedb29ead3342110a07766964656f3a3112046c696b652006421a0a07766964656f3a3112046c696b651a0765752d77657374200142130a07766964656f3a321204766965772080897a"
	data, err := hex.DecodeString(v1)
	if err != nil {
		t.Fatal(err)
	}
	var got Batch
	if err := Decode(data, &got); err != nil {
		t.Fatalf("Decode of a first-release message: %v", err)
	}
	want := sample()
	if got.FlushedAt.Equal(want.FlushedAt) {
		got.FlushedAt = want.FlushedAt
	}
	if len(got.Tops) != 0 || !reflect.DeepEqual(got.Sums, want.Sums) || got.MsgID() != want.MsgID() || got.FlushedAt != want.FlushedAt {
		t.Fatalf("Decode = %+v; want %+v", got, *want)
	}
	if enc := hex.EncodeToString(Append(nil, want)); enc != v1 {
		t.Fatalf("Append of a batch without lists = %s; want the first release's %s", enc, v1)
	}
}

// TestFirstReleaseSkipsTops decodes a message with lists the way the first
// release's reader sees it: field 9 is unknown to it and skipped, and what
// it knows is unchanged.
func TestFirstReleaseSkipsTops(t *testing.T) {
	data := Append(nil, withTops())
	var stripped []byte
	for rest := data; len(rest) > 0; {
		num, typ, n := protowire.ConsumeTag(rest)
		m := protowire.ConsumeFieldValue(num, typ, rest[n:])
		if n < 0 || m < 0 {
			t.Fatalf("cannot walk the encoding: %d %d", n, m)
		}
		if num != fTops {
			stripped = append(stripped, rest[:n+m]...)
		}
		rest = rest[n+m:]
	}
	if got, want := hex.EncodeToString(stripped), hex.EncodeToString(Append(nil, sample())); got != want {
		t.Fatalf("message without its lists = %s; want the plain message %s", got, want)
	}
}

func TestDecodeReusesTops(t *testing.T) {
	data := Append(nil, withTops())
	b := Batch{Tops: make([]TopList, 0, 8)}
	p := &b.Tops[:1][0]
	if err := Decode(data, &b); err != nil {
		t.Fatal(err)
	}
	if &b.Tops[0] != p || len(b.Tops) != 3 {
		t.Fatal("Decode did not reuse the Tops backing array")
	}
}

func TestMsgID(t *testing.T) {
	if got, want := sample().MsgID(), "us-east-a1/1732950000000000000/42/7"; got != want {
		t.Fatalf("MsgID = %q, want %q", got, want)
	}
}

func TestPartitionOfIsStableAndInRange(t *testing.T) {
	seen := map[uint32]bool{}
	for i := 0; i < 1000; i++ {
		id := "item-" + strings.Repeat("x", i%7) + string(rune('a'+i%26))
		p := PartitionOf(id, 16)
		if p >= 16 {
			t.Fatalf("PartitionOf(%q, 16) = %d", id, p)
		}
		if PartitionOf(id, 16) != p {
			t.Fatalf("PartitionOf(%q) not stable", id)
		}
		seen[p] = true
	}
	if len(seen) != 16 {
		t.Fatalf("1000 ids hit %d of 16 partitions", len(seen))
	}
}

func TestDecodeSkipsUnknownFields(t *testing.T) {
	data := Append(nil, sample())
	data = protowire.AppendTag(data, 99, protowire.BytesType)
	data = protowire.AppendString(data, "from a newer agent")
	var b Batch
	if err := Decode(data, &b); err != nil {
		t.Fatalf("Decode with unknown field: %v", err)
	}
	if len(b.Sums) != 3 {
		t.Fatalf("sums = %d, want 3", len(b.Sums))
	}
}

func TestDecodeRejects(t *testing.T) {
	valid := sample()
	with := func(f func(b *Batch)) []byte {
		b := *valid
		b.Sums = append([]Sum(nil), valid.Sums...)
		f(&b)
		return Append(nil, &b)
	}
	tests := []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "schema version"},
		{"truncated", Append(nil, valid)[:20], "malformed"},
		{"future version", protowire.AppendVarint(protowire.AppendTag(Append(nil, valid), fVersion, protowire.VarintType), 2), "schema version 2"},
		{"bad agent", with(func(b *Batch) { b.Agent = "a b" }), "agent"},
		{"global region", with(func(b *Batch) { b.Region = "global" }), "region"},
		{"bad content", with(func(b *Batch) { b.Sums[0].ContentID = "a/b" }), "content id"},
		{"long content", with(func(b *Batch) { b.Sums[0].ContentID = strings.Repeat("x", 129) }), "content id"},
		{"bad counter", with(func(b *Batch) { b.Sums[0].Counter = "View" }), "counter"},
		{"zero delta", with(func(b *Batch) { b.Sums[0].Delta = 0 }), "zero delta"},
		{"bad sum region", with(func(b *Batch) { b.Sums[1].Region = "EU" }), "region"},
		{"top counter", withTop(func(l *TopList) { l.Counter = "Like" }), "counter"},
		{"top no counter", withTop(func(l *TopList) { l.Counter = "" }), "counter"},
		{"top window", withTop(func(l *TopList) { l.Window = "5M" }), "window"},
		{"top no window", withTop(func(l *TopList) { l.Window = "" }), "window"},
		{"top long window", withTop(func(l *TopList) { l.Window = "123456789" }), "window"},
		{"top floor", withTop(func(l *TopList) { l.Floor = -1 }), "floor"},
		{"top item id", withTop(func(l *TopList) { l.Items[0].ContentID = "a b" }), "content id"},
		{"top item zero count", withTop(func(l *TopList) { l.Items[0].Count, l.Items[0].Error = 0, 0 }), "count 0"},
		{"top item negative count", withTop(func(l *TopList) { l.Items[0].Count = -5 }), "count"},
		{"top item error", withTop(func(l *TopList) { l.Items[0].Error = l.Items[0].Count + 1 }), "error bound"},
		{"top item twice", withTop(func(l *TopList) { l.Items[1].ContentID = l.Items[0].ContentID }), "listed twice"},
		{"top list twice", func() []byte {
			b := withTops()
			b.Tops = append(b.Tops, b.Tops[0])
			return Append(nil, b)
		}(), "listed twice"},
		{"top item error of another wire type", errorBoundAsFixed64(), "field 3 has wire type 1, want 0"},
		{"agent of another wire type", func() []byte {
			d := Append(nil, sample())
			d = protowire.AppendTag(d, fAgent, protowire.VarintType)
			return protowire.AppendVarint(d, 7)
		}(), "field 2 has wire type 0, want 2"},
		{"top malformed", func() []byte {
			d := Append(nil, sample())
			d = protowire.AppendTag(d, fTops, protowire.BytesType)
			return protowire.AppendBytes(d, []byte{0x22, 0x05, 0x0a})
		}(), "top list 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b Batch
			err := Decode(tt.data, &b)
			if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Decode error = %v, want ErrMalformed mentioning %q", err, tt.want)
			}
		})
	}
}

// errorBoundAsFixed64 returns sample() with a trending list whose one item
// carries its error bound as a fixed64 instead of a varint. Skipped, the
// bound would read as 0 and claim an exact count of 90.
func errorBoundAsFixed64() []byte {
	var item []byte
	item = appendString(item, fItemContent, "video:1")
	item = appendUint(item, fItemCount, 90)
	item = protowire.AppendTag(item, fItemError, protowire.Fixed64Type)
	item = protowire.AppendFixed64(item, 3)
	var top []byte
	top = appendString(top, fTopCounter, "like")
	top = appendString(top, fTopWindow, "5m")
	top = protowire.AppendTag(top, fTopItems, protowire.BytesType)
	top = protowire.AppendBytes(top, item)
	d := Append(nil, sample())
	d = protowire.AppendTag(d, fTops, protowire.BytesType)
	return protowire.AppendBytes(d, top)
}

// withTop returns withTops() encoded after f changed its first list.
func withTop(f func(l *TopList)) []byte {
	b := withTops()
	l := &b.Tops[0]
	l.Items = append([]TopItem(nil), l.Items...)
	f(l)
	return Append(nil, b)
}

// FuzzDecode: no input panics, and whatever decodes re-encodes to something
// that decodes to the same batch.
func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, sample()))
	f.Add(Append(nil, withTops()))
	f.Add(Append(nil, &Batch{Agent: "a", Region: "r", Tops: []TopList{{Counter: "c", Window: "5m", Floor: 1}}}))
	f.Add(Append(nil, &Batch{Agent: "a", Region: "r"}))
	f.Add(Append(nil, &Batch{Agent: "a", Region: "r", More: true}))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, data []byte) {
		var b Batch
		if err := Decode(data, &b); err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		again := Append(nil, &b)
		var b2 Batch
		if err := Decode(again, &b2); err != nil {
			t.Fatalf("re-encoded batch does not decode: %v", err)
		}
		if !reflect.DeepEqual(normal(b), normal(b2)) {
			t.Fatalf("round trip changed the batch: %+v vs %+v", b, b2)
		}
	})
}

func normal(b Batch) Batch {
	b.FlushedAt = time.UnixMilli(b.FlushedAt.UnixMilli())
	if len(b.Sums) == 0 {
		b.Sums = nil
	}
	if len(b.Tops) == 0 {
		b.Tops = nil
	}
	for i := range b.Tops {
		if len(b.Tops[i].Items) == 0 {
			b.Tops[i].Items = nil
		}
	}
	return b
}
