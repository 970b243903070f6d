package pbwire

import (
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"
)

// Walk calls fn for every field of the message data, in order: a varint
// field with its value v, a length-delimited field with its bytes raw
// (aliasing data), a field of another wire type with neither (its value
// checked and skipped), so that fn can reject a known field of the wrong
// type. An error of fn ends the walk and is returned as it is; a tag that
// does not parse gives protowire's error, a value that does not parse the
// same wrapped as "field N: …".
func Walk(data []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return protowire.ParseError(n)
		}
		data = data[n:]
		var (
			v   uint64
			raw []byte
		)
		switch typ {
		case protowire.VarintType:
			v, n = protowire.ConsumeVarint(data)
		case protowire.BytesType:
			raw, n = protowire.ConsumeBytes(data)
		default:
			n = protowire.ConsumeFieldValue(num, typ, data)
		}
		if n < 0 {
			return fmt.Errorf("field %d: %w", num, protowire.ParseError(n))
		}
		data = data[n:]
		if err := fn(num, typ, v, raw); err != nil {
			return err
		}
	}
	return nil
}

// AppendString appends field num holding s, or nothing when s is empty
// (proto3's default, which a reader takes for an absent field).
func AppendString(dst []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendString(dst, s)
}

// AppendUint appends varint field num holding v, or nothing when v is 0
// (proto3's default). An int64 field holds uint64(v).
func AppendUint(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}
