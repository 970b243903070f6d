package topk

import (
	"bytes"
	"errors"
	"slices"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

func TestEncodingRoundTrip(t *testing.T) {
	for _, c := range configs {
		t.Run(c.name, func(t *testing.T) {
			st := zipfStream(21, 20000, 2000, 0.9)
			s := feed(mustNew(t, c.cfg), st)
			data := encode(t, s)
			d, err := DecodeSummary(data)
			if err != nil {
				t.Fatalf("DecodeSummary: %v", err)
			}
			checkInvariants(t, d)
			if got, want := d.Top(-1), s.Top(-1); !slices.Equal(got, want) {
				t.Fatalf("decoded items = %v, want %v", got, want)
			}
			if !slices.Equal(d.cells, s.cells) || d.rows != s.rows {
				t.Fatalf("decoded cells differ (rows %d, want %d)", d.rows, s.rows)
			}
			checkBounds(t, d, exactCounts(st))
			if again := encode(t, d); !bytes.Equal(again, data) {
				t.Fatal("re-encoding the decoded summary gives other bytes")
			}
		})
	}
}

// TestAppendTop ships short lists from several summaries, as agents do,
// and checks that the merged lists keep every bound.
func TestAppendTop(t *testing.T) {
	st := zipfStream(22, 60000, 5000, 1.0)
	parts := split(st, 4)
	m := SummaryForBytes(16 << 10)
	for _, p := range parts {
		s := feed(SummaryForBytes(16<<10), p)
		data := s.AppendTop(nil, 20)
		d, err := DecodeSummary(data)
		if err != nil {
			t.Fatalf("DecodeSummary(AppendTop): %v", err)
		}
		if got, want := d.Top(-1), s.Top(20); !slices.Equal(got, want) {
			t.Fatalf("decoded list = %v, want %v", got, want)
		}
		if want := max(s.Floor(), s.Top(21)[20].Count); d.Floor() != want {
			t.Fatalf("decoded floor = %d, want %d", d.Floor(), want)
		}
		checkBounds(t, d, exactCounts(p))
		m.Merge(d)
	}
	checkInvariants(t, m)
	checkBounds(t, m, exactCounts(st))
	whole := feed(SummaryForBytes(16<<10), st)
	for i, it := range m.Top(5) {
		if it.ID != whole.Top(5)[i].ID {
			t.Fatalf("top 5 of merged lists = %v, of one summary = %v", m.Top(5), whole.Top(5))
		}
	}
}

func TestDecodeRejects(t *testing.T) {
	item := func(id string, count, errBound uint64) []byte {
		var b []byte
		b = protowire.AppendTag(b, fItemID, protowire.BytesType)
		b = protowire.AppendString(b, id)
		b = protowire.AppendTag(b, fItemCount, protowire.VarintType)
		b = protowire.AppendVarint(b, count)
		b = protowire.AppendTag(b, fItemError, protowire.VarintType)
		b = protowire.AppendVarint(b, errBound)
		return b
	}
	msg := func(version uint64, rows uint64, cells []uint64, items ...[]byte) []byte {
		var b []byte
		b = protowire.AppendTag(b, fVersion, protowire.VarintType)
		b = protowire.AppendVarint(b, version)
		for _, it := range items {
			b = protowire.AppendTag(b, fItems, protowire.BytesType)
			b = protowire.AppendBytes(b, it)
		}
		b = protowire.AppendTag(b, fRows, protowire.VarintType)
		b = protowire.AppendVarint(b, rows)
		if cells != nil {
			var p []byte
			for _, c := range cells {
				p = protowire.AppendVarint(p, c)
			}
			b = protowire.AppendTag(b, fCells, protowire.BytesType)
			b = protowire.AppendBytes(b, p)
		}
		return b
	}
	good := msg(1, 2, []uint64{0, 3, 1, 2}, item("a", 5, 1), item("b", 2, 0))
	if _, err := DecodeSummary(good); err != nil {
		t.Fatalf("DecodeSummary(good) = %v", err)
	}
	tests := []struct {
		name string
		data []byte
	}{
		{"empty", nil},
		{"wrong version", msg(2, 1, []uint64{0}, item("a", 1, 0))},
		{"no version", good[2:]},
		{"empty id", msg(1, 1, []uint64{0}, item("", 1, 0))},
		{"long id", msg(1, 1, []uint64{0}, item(strings.Repeat("x", MaxIDLen+1), 1, 0))},
		{"zero count", msg(1, 1, []uint64{0}, item("a", 0, 0))},
		{"huge count", msg(1, 1, []uint64{0}, item("a", 1<<63, 0))},
		{"error above count", msg(1, 1, []uint64{0}, item("a", 3, 4))},
		{"duplicate id", msg(1, 1, []uint64{0}, item("a", 3, 0), item("a", 2, 0))},
		{"no rows", msg(1, 0, []uint64{0}, item("a", 1, 0))},
		{"too many rows", msg(1, MaxRows+1, make([]uint64, MaxRows+1))},
		{"no cells", msg(1, 1, nil, item("a", 1, 0))},
		{"cells not filling rows", msg(1, 2, []uint64{1, 2, 3})},
		{"huge cell", msg(1, 1, []uint64{1 << 63})},
		{"truncated", good[:len(good)-1]},
		{"bad item", append(msg(1, 1, []uint64{0}), protowire.AppendVarint(protowire.AppendTag(nil, fItems, protowire.BytesType), 5)...)},
		{"item as varint", protowire.AppendVarint(protowire.AppendTag(good, fItems, protowire.VarintType), 1)},
		{"id as varint", msg(1, 1, []uint64{0}, protowire.AppendVarint(protowire.AppendTag(nil, fItemID, protowire.VarintType), 7))},
		{"group wire type", protowire.AppendTag(good, fRows, protowire.StartGroupType)},
	}
	for _, tt := range tests {
		if s, err := DecodeSummary(tt.data); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: DecodeSummary = %v, %v; want ErrMalformed", tt.name, s, err)
		}
	}
}

func TestDecodeSkipsUnknownFields(t *testing.T) {
	s := feed(NewSummary(8), zipfStream(23, 500, 20, 1))
	data := encode(t, s)
	data = protowire.AppendTag(data, 99, protowire.BytesType)
	data = protowire.AppendString(data, "future")
	data = protowire.AppendTag(data, 98, protowire.Fixed64Type)
	data = protowire.AppendFixed64(data, 7)
	d, err := DecodeSummary(data)
	if err != nil {
		t.Fatalf("DecodeSummary with unknown fields: %v", err)
	}
	if got, want := d.Top(-1), s.Top(-1); !slices.Equal(got, want) {
		t.Fatalf("decoded items = %v, want %v", got, want)
	}
}

// FuzzDecode: no input panics; what decodes is a consistent summary that
// re-encodes canonically and merges.
func FuzzDecode(f *testing.F) {
	f.Add([]byte{})
	s := feed(mustNew(f, Config{Capacity: 6, Rows: 2, Cells: 6}), zipfStream(24, 300, 30, 1))
	full, _ := s.AppendBinary(nil)
	f.Add(full)
	f.Add(s.AppendTop(nil, 3))
	f.Add(feed(NewSummary(2), []event{{"a", 1}}).AppendTop(nil, -1))
	f.Fuzz(func(t *testing.T, data []byte) {
		d, err := DecodeSummary(data)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("DecodeSummary error %v does not wrap ErrMalformed", err)
			}
			return
		}
		checkInvariants(t, d)
		b1 := encode(t, d)
		d2, err := DecodeSummary(b1)
		if err != nil {
			t.Fatalf("decoding a re-encoded summary: %v", err)
		}
		if b2 := encode(t, d2); !bytes.Equal(b1, b2) {
			t.Fatal("re-encoding is not stable")
		}
		m := NewSummary(4)
		m.Merge(d)
		m.Add("x", 3)
		checkInvariants(t, m)
	})
}
