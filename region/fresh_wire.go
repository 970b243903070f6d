package region

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/engagement"
	"github.com/edgecount/edgecount/internal/pbwire"
)

// The held-deltas exchange between the agents of a region (a fresh read
// asks its peers, over gossip queries), in protobuf wire encoding:
//
//	query:  1 version (=1), 2 content_id (repeated)
//	answer: 1 version (=1), 2 item (repeated: 1 content_id,
//	        2 held (repeated: 1 counter, 2 region, 3 delta (zigzag),
//	        4 flushed (bool), 5 seq, 6 floor)))
//
// Decoders validate every field and never panic (FuzzDecodeHeld).

const heldVersion = 1

// Limits of the exchange: the ids of one query, and the held deltas of
// one item in an answer.
const (
	maxHeldQueryIDs = 1000
	maxHeldPerItem  = 4096
)

// ErrMalformedHeld marks a query or an answer that does not decode.
var ErrMalformedHeld = errors.New("malformed held-deltas message")

// AppendHeldQuery appends the query for ids.
func AppendHeldQuery(buf []byte, ids []string) []byte {
	buf = protowire.AppendTag(buf, 1, protowire.VarintType)
	buf = protowire.AppendVarint(buf, heldVersion)
	for _, id := range ids {
		buf = protowire.AppendTag(buf, 2, protowire.BytesType)
		buf = protowire.AppendString(buf, id)
	}
	return buf
}

// DecodeHeldQuery decodes a query; every error wraps ErrMalformedHeld.
func DecodeHeldQuery(data []byte) ([]string, error) {
	var ids []string
	version := uint64(0)
	err := pbwire.Walk(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			version = v
		case num == 2 && typ == protowire.BytesType:
			if len(ids) == maxHeldQueryIDs {
				return fmt.Errorf("more than %d ids", maxHeldQueryIDs)
			}
			id := string(raw)
			if !engagement.ValidID(id) {
				return fmt.Errorf("content id %d is not valid", len(ids))
			}
			ids = append(ids, id)
		case num <= 2:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err = heldMessageError(err, version); err != nil {
		return nil, err
	}
	return ids, nil
}

// AppendHeldAnswer appends the answer holding held.
func AppendHeldAnswer(buf []byte, held map[string][]Held) []byte {
	buf = protowire.AppendTag(buf, 1, protowire.VarintType)
	buf = protowire.AppendVarint(buf, heldVersion)
	var item, h []byte
	for id, list := range held {
		if len(list) == 0 {
			continue
		}
		item = protowire.AppendTag(item[:0], 1, protowire.BytesType)
		item = protowire.AppendString(item, id)
		for i := range list {
			x := &list[i]
			h = protowire.AppendTag(h[:0], 1, protowire.BytesType)
			h = protowire.AppendString(h, x.Counter)
			h = protowire.AppendTag(h, 2, protowire.BytesType)
			h = protowire.AppendString(h, x.Region)
			h = protowire.AppendTag(h, 3, protowire.VarintType)
			h = protowire.AppendVarint(h, protowire.EncodeZigZag(x.Delta))
			if x.Flushed {
				h = protowire.AppendTag(h, 4, protowire.VarintType)
				h = protowire.AppendVarint(h, 1)
			}
			h = protowire.AppendTag(h, 5, protowire.VarintType)
			h = protowire.AppendVarint(h, x.Seq)
			h = protowire.AppendTag(h, 6, protowire.VarintType)
			h = protowire.AppendVarint(h, x.Floor)
			item = protowire.AppendTag(item, 2, protowire.BytesType)
			item = protowire.AppendBytes(item, h)
		}
		buf = protowire.AppendTag(buf, 2, protowire.BytesType)
		buf = protowire.AppendBytes(buf, item)
	}
	return buf
}

// DecodeHeldAnswer decodes an answer; every error wraps ErrMalformedHeld.
func DecodeHeldAnswer(data []byte) (map[string][]Held, error) {
	out := make(map[string][]Held)
	version := uint64(0)
	err := pbwire.Walk(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1 && typ == protowire.VarintType:
			version = v
		case num == 2 && typ == protowire.BytesType:
			id, list, err := decodeHeldItem(raw)
			if err != nil {
				return err
			}
			if len(out) == maxHeldQueryIDs {
				return fmt.Errorf("more than %d items", maxHeldQueryIDs)
			}
			if len(out[id])+len(list) > maxHeldPerItem {
				return fmt.Errorf("item %q: more than %d held deltas", id, maxHeldPerItem)
			}
			out[id] = append(out[id], list...)
		case num <= 2:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err = heldMessageError(err, version); err != nil {
		return nil, err
	}
	return out, nil
}

// heldMessageError is the error of decoding a query or an answer: err,
// the walk's, or else a version other than heldVersion; wrapped with
// ErrMalformedHeld.
func heldMessageError(err error, version uint64) error {
	if err == nil && version != heldVersion {
		err = fmt.Errorf("version %d, want %d", version, heldVersion)
	}
	if err != nil {
		return fmt.Errorf("%w: %v", ErrMalformedHeld, err)
	}
	return nil
}

func decodeHeldItem(data []byte) (string, []Held, error) {
	var id string
	var list []Held
	err := pbwire.Walk(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			id = string(raw)
		case num == 2 && typ == protowire.BytesType:
			if len(list) == maxHeldPerItem {
				return fmt.Errorf("more than %d held deltas", maxHeldPerItem)
			}
			h, err := decodeHeld(raw)
			if err != nil {
				return fmt.Errorf("held %d: %w", len(list), err)
			}
			list = append(list, h)
		case num <= 2:
			return fmt.Errorf("item field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err == nil && !engagement.ValidID(id) {
		err = errors.New("item without a valid content id")
	}
	return id, list, err
}

func decodeHeld(data []byte) (Held, error) {
	var h Held
	err := pbwire.Walk(data, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case num == 1 && typ == protowire.BytesType:
			h.Counter = string(raw)
		case num == 2 && typ == protowire.BytesType:
			h.Region = string(raw)
		case num == 3 && typ == protowire.VarintType:
			h.Delta = protowire.DecodeZigZag(v)
		case num == 4 && typ == protowire.VarintType:
			h.Flushed = v != 0
		case num == 5 && typ == protowire.VarintType:
			h.Seq = v
		case num == 6 && typ == protowire.VarintType:
			h.Floor = v
		case num <= 6:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	switch {
	case err != nil:
	case !engagement.ValidCounter(h.Counter):
		err = fmt.Errorf("counter %q is not valid", h.Counter)
	case !engagement.ValidRegion(h.Region):
		err = fmt.Errorf("region %q is not valid", h.Region)
	case h.Delta > 1<<62 || h.Delta < -(1<<62):
		err = fmt.Errorf("delta %d out of range", h.Delta)
	}
	return h, err
}

// AnswerHeld answers a peer's held-deltas query (the gossip query handler
// of a fresh read).
func (a *Agent) AnswerHeld(query []byte) ([]byte, error) {
	ids, err := DecodeHeldQuery(query)
	if err != nil {
		return nil, err
	}
	return AppendHeldAnswer(nil, a.HeldDeltas(ids)), nil
}
