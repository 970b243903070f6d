package partial

import (
	"errors"
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

func TestRoundTrip(t *testing.T) {
	in := sample()
	data := Append(nil, in)
	var out Batch
	if err := Decode(data, &out); err != nil {
		t.Fatalf("Decode: %v", err)
	}
	if !out.FlushedAt.Equal(in.FlushedAt) {
		t.Fatalf("FlushedAt = %v, want %v", out.FlushedAt, in.FlushedAt)
	}
	out.FlushedAt = in.FlushedAt
	if !reflect.DeepEqual(&out, in) {
		t.Fatalf("Decode(Append(b)) = %+v, want %+v", out, *in)
	}
	size := 0
	for i := range in.Sums {
		size += SumSize(&in.Sums[i], in.Region)
	}
	header := Append(nil, &Batch{Agent: in.Agent, Region: in.Region, Epoch: in.Epoch, Seq: in.Seq, Partition: in.Partition, FlushedAt: in.FlushedAt})
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

// FuzzDecode: no input panics, and whatever decodes re-encodes to something
// that decodes to the same batch.
func FuzzDecode(f *testing.F) {
	f.Add(Append(nil, sample()))
	f.Add(Append(nil, &Batch{Agent: "a", Region: "r"}))
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
	return b
}
