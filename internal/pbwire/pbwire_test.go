package pbwire

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/protobuf/encoding/protowire"
)

type field struct {
	num protowire.Number
	typ protowire.Type
	v   uint64
	raw string
}

func walkAll(data []byte) ([]field, error) {
	var got []field
	err := Walk(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		got = append(got, field{num, typ, v, string(raw)})
		return nil
	})
	return got, err
}

func TestWalk(t *testing.T) {
	msg := protowire.AppendTag(nil, 1, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 300)
	msg = protowire.AppendTag(msg, 2, protowire.BytesType)
	msg = protowire.AppendString(msg, "abc")
	msg = protowire.AppendTag(msg, 3, protowire.Fixed64Type)
	msg = protowire.AppendFixed64(msg, 7)
	msg = protowire.AppendTag(msg, 4, protowire.Fixed32Type)
	msg = protowire.AppendFixed32(msg, 7)
	msg = protowire.AppendTag(msg, 5, protowire.BytesType)
	msg = protowire.AppendString(msg, "")

	got, err := walkAll(msg)
	if err != nil {
		t.Fatalf("Walk = %v; want nil", err)
	}
	want := []field{
		{num: 1, typ: protowire.VarintType, v: 300},
		{num: 2, typ: protowire.BytesType, raw: "abc"},
		{num: 3, typ: protowire.Fixed64Type},
		{num: 4, typ: protowire.Fixed32Type},
		{num: 5, typ: protowire.BytesType},
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("Walk saw %v; want %v", got, want)
	}
	if got, err := walkAll(nil); err != nil || len(got) != 0 {
		t.Fatalf("Walk(nil) saw %v, %v; want nothing, nil", got, err)
	}
}

func TestWalkErrors(t *testing.T) {
	truncVarint := append(protowire.AppendTag(nil, 3, protowire.VarintType), 0x80)
	truncBytes := append(protowire.AppendTag(nil, 4, protowire.BytesType), 5, 'a')
	truncFixed := append(protowire.AppendTag(nil, 6, protowire.Fixed64Type), 1, 2)
	tests := []struct {
		name string
		data []byte
		want string // the error's text
	}{
		{"tag", []byte{0x80}, protowire.ParseError(-1).Error()},
		{"field 0", []byte{0x00}, protowire.ParseError(-2).Error()},
		{"varint", truncVarint, "field 3: " + protowire.ParseError(-1).Error()},
		{"bytes", truncBytes, "field 4: " + protowire.ParseError(-1).Error()},
		{"fixed64", truncFixed, "field 6: " + protowire.ParseError(-1).Error()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := walkAll(tt.data)
			if err == nil || err.Error() != tt.want {
				t.Fatalf("Walk = %v; want %q", err, tt.want)
			}
		})
	}
}

func TestWalkStopsAtFnError(t *testing.T) {
	msg := protowire.AppendTag(nil, 1, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 1)
	msg = protowire.AppendTag(msg, 2, protowire.VarintType)
	msg = protowire.AppendVarint(msg, 2)
	stop := errors.New("stop")
	calls := 0
	err := Walk(msg, func(protowire.Number, protowire.Type, uint64, []byte) error {
		calls++
		return stop
	})
	if err != stop || calls != 1 {
		t.Fatalf("Walk = %v after %d calls; want the fn's error after 1", err, calls)
	}
}

func TestAppend(t *testing.T) {
	tests := []struct {
		name string
		got  []byte
		want []byte
	}{
		{"empty string", AppendString([]byte("x"), 1, ""), []byte("x")},
		{"string", AppendString(nil, 2, "ab"), protowire.AppendString(protowire.AppendTag(nil, 2, protowire.BytesType), "ab")},
		{"zero", AppendUint([]byte("x"), 1, 0), []byte("x")},
		{"uint", AppendUint(nil, 3, 300), protowire.AppendVarint(protowire.AppendTag(nil, 3, protowire.VarintType), 300)},
	}
	for _, tt := range tests {
		if !bytes.Equal(tt.got, tt.want) {
			t.Errorf("%s: got %x; want %x", tt.name, tt.got, tt.want)
		}
	}
}

// FuzzWalk: Walk never panics, and the fields it reads from what it
// accepts, written again (varints in their shortest form, other wire
// types left out), take no more bytes than were given.
func FuzzWalk(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendString(AppendUint(nil, 1, 300), 2, "abc"))
	f.Add([]byte{0x80})
	f.Add(append(protowire.AppendTag(nil, 3, protowire.StartGroupType), protowire.AppendTag(nil, 3, protowire.EndGroupType)...))
	f.Fuzz(func(t *testing.T, data []byte) {
		got, err := walkAll(data)
		if err != nil {
			return
		}
		var again []byte
		for _, fl := range got {
			switch fl.typ {
			case protowire.VarintType:
				again = protowire.AppendVarint(protowire.AppendTag(again, fl.num, fl.typ), fl.v)
			case protowire.BytesType:
				again = protowire.AppendString(protowire.AppendTag(again, fl.num, fl.typ), fl.raw)
			}
		}
		if len(again) > len(data) {
			t.Fatalf("%d fields read back as %d bytes, more than the %d given", len(got), len(again), len(data))
		}
	})
}
