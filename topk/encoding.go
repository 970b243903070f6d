package topk

import (
	"errors"
	"fmt"
	"math"
	"slices"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/internal/pbwire"
)

// Version is the encoding version AppendBinary and AppendTop write and
// DecodeSummary reads.
const Version = 1

// ErrMalformed is wrapped by every DecodeSummary error.
var ErrMalformed = errors.New("malformed top-k summary")

// Field numbers.
const (
	fVersion = 1
	fItems   = 2
	fRows    = 3
	fCells   = 4

	fItemID    = 1
	fItemCount = 2
	fItemError = 3
)

// AppendBinary appends the encoding of every tracked item and every bound
// cell to b (see the package documentation for the schema). Items are
// written in Top order, so equal summaries encode to equal bytes. It
// implements encoding.BinaryAppender and never fails.
func (s *Summary) AppendBinary(b []byte) ([]byte, error) {
	order := s.order()
	b = s.appendHeader(b, order)
	b = protowire.AppendTag(b, fRows, protowire.VarintType)
	b = protowire.AppendVarint(b, uint64(s.rows))
	return appendCells(b, s.cells), nil
}

// AppendTop appends the encoding of the n tracked items with the largest
// counts (all of them if n < 0 or n ≥ Len) and of one bound cell, the
// larger of Floor and the largest count left out, which bounds every item
// the list does not name. It is how an agent ships a short list: merging
// the decoded list gives bounds as valid as merging the whole summary,
// only wider for the items left out.
func (s *Summary) AppendTop(b []byte, n int) []byte {
	order := s.order()
	floor := s.Floor()
	if n >= 0 && n < len(order) {
		floor = max(floor, s.entries[order[n]].count)
		order = order[:n]
	}
	b = s.appendHeader(b, order)
	b = protowire.AppendTag(b, fRows, protowire.VarintType)
	b = protowire.AppendVarint(b, 1)
	return appendCells(b, []int64{floor})
}

// order returns the entry indices in Top order.
func (s *Summary) order() []int32 {
	order := make([]int32, s.n)
	for i := range order {
		order[i] = int32(i)
	}
	slices.SortFunc(order, s.compare)
	return order
}

func (s *Summary) appendHeader(b []byte, order []int32) []byte {
	b = protowire.AppendTag(b, fVersion, protowire.VarintType)
	b = protowire.AppendVarint(b, Version)
	for _, i := range order {
		e := &s.entries[i]
		id := s.id(e.off)
		n := protowire.SizeTag(fItemID) + protowire.SizeBytes(len(id)) +
			protowire.SizeTag(fItemCount) + protowire.SizeVarint(uint64(e.count))
		if e.err != 0 {
			n += protowire.SizeTag(fItemError) + protowire.SizeVarint(uint64(e.err))
		}
		b = protowire.AppendTag(b, fItems, protowire.BytesType)
		b = protowire.AppendVarint(b, uint64(n))
		b = protowire.AppendTag(b, fItemID, protowire.BytesType)
		b = protowire.AppendBytes(b, id)
		b = protowire.AppendTag(b, fItemCount, protowire.VarintType)
		b = protowire.AppendVarint(b, uint64(e.count))
		if e.err != 0 {
			b = protowire.AppendTag(b, fItemError, protowire.VarintType)
			b = protowire.AppendVarint(b, uint64(e.err))
		}
	}
	return b
}

func appendCells(b []byte, cells []int64) []byte {
	n := 0
	for _, v := range cells {
		n += protowire.SizeVarint(uint64(v))
	}
	b = protowire.AppendTag(b, fCells, protowire.BytesType)
	b = protowire.AppendVarint(b, uint64(n))
	for _, v := range cells {
		b = protowire.AppendVarint(b, uint64(v))
	}
	return b
}

// DecodeSummary decodes a summary written by AppendBinary or AppendTop.
// The result is sized to its content: its Capacity is the number of items
// it names (at least 1), its arena holds their ids with a quarter to spare,
// its Rows and Cells are those of the encoding. Merge it
// into a summary of the layout you keep. Every malformed input gives an
// error that wraps ErrMalformed: a wrong version, an empty or too long
// id, an id named twice, a count below 1 or above 2^63-1, an error bound
// above its count, cells that do not fill their rows, unknown wire types.
// Unknown fields are skipped.
func DecodeSummary(b []byte) (*Summary, error) {
	// First pass: validate and size.
	var (
		version        uint64
		items, idBytes int
		rows           uint64
		cells          int
	)
	err := walk(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch num {
		case fVersion:
			if typ != protowire.VarintType {
				return errors.New("version is not a varint")
			}
			version = v
		case fItems:
			if typ != protowire.BytesType {
				return errors.New("item is not a message")
			}
			it, err := decodeItem(raw)
			if err != nil {
				return fmt.Errorf("item %d: %w", items, err)
			}
			items++
			idBytes += recordHeader + len(it.id)
		case fRows:
			if typ != protowire.VarintType {
				return errors.New("rows is not a varint")
			}
			rows = v
		case fCells:
			switch typ {
			case protowire.VarintType:
				cells++
			case protowire.BytesType:
				n, err := countVarints(raw)
				if err != nil {
					return fmt.Errorf("cells: %w", err)
				}
				cells += n
			default:
				return errors.New("cells are not varints")
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	switch {
	case version != Version:
		return nil, fmt.Errorf("%w: version %d, want %d", ErrMalformed, version, Version)
	case items > MaxCapacity:
		return nil, fmt.Errorf("%w: %d items, at most %d", ErrMalformed, items, MaxCapacity)
	case rows < 1 || rows > MaxRows:
		return nil, fmt.Errorf("%w: rows %d is not in 1..%d", ErrMalformed, rows, MaxRows)
	case cells < int(rows) || cells > MaxCells || cells%int(rows) != 0:
		return nil, fmt.Errorf("%w: %d cells do not fill %d rows", ErrMalformed, cells, rows)
	}

	// Second pass: fill.
	s, err := New(Config{
		Capacity: max(1, items),
		IDBytes:  max(minIDBytes, idBytes*5/4), // room to Add, as DefaultConfig
		Rows:     int(rows),
		Cells:    cells,
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	c := 0
	err = walk(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch num {
		case fItems:
			it, _ := decodeItem(raw) // validated above
			h := xxhash.Sum64(it.id)
			if lookup(s, it.id, h) >= 0 {
				return fmt.Errorf("item %q named twice", it.id)
			}
			i := s.n
			s.n++
			s.entries[i] = entry{count: it.count, err: it.err, off: write(s, it.id, i)}
			s.indexInsert(s.fp(h), i)
		case fCells:
			if typ == protowire.VarintType {
				raw = protowire.AppendVarint(nil, v)
			}
			for len(raw) > 0 {
				x, n := protowire.ConsumeVarint(raw)
				if x > math.MaxInt64 {
					return fmt.Errorf("cell %d is %d", c, x)
				}
				s.cells[c] = int64(x)
				c++
				raw = raw[n:]
			}
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	s.heapify()
	return s, nil
}

// walk calls fn for every field of b, with the varint value or the bytes
// of a length-delimited field (pbwire.Walk); a field of another wire type
// is skipped, unless it is a known one. Errors wrap ErrMalformed.
func walk(b []byte, fn func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error) error {
	err := pbwire.Walk(b, func(num protowire.Number, typ protowire.Type, v uint64, raw []byte) error {
		switch {
		case typ == protowire.VarintType || typ == protowire.BytesType:
			return fn(num, typ, v, raw)
		case num == fVersion || num == fItems || num == fRows || num == fCells:
			return fmt.Errorf("field %d has wire type %d", num, typ)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

type decodedItem struct {
	id         []byte
	count, err int64
}

func decodeItem(b []byte) (decodedItem, error) {
	var it decodedItem
	var count, errBound uint64
	for len(b) > 0 {
		num, typ, n := protowire.ConsumeTag(b)
		if n < 0 {
			return it, protowire.ParseError(n)
		}
		b = b[n:]
		switch {
		case num == fItemID && typ == protowire.BytesType:
			it.id, n = protowire.ConsumeBytes(b)
		case num == fItemCount && typ == protowire.VarintType:
			count, n = protowire.ConsumeVarint(b)
		case num == fItemError && typ == protowire.VarintType:
			errBound, n = protowire.ConsumeVarint(b)
		case num == fItemID || num == fItemCount || num == fItemError:
			return it, fmt.Errorf("field %d has wire type %d", num, typ)
		default:
			n = protowire.ConsumeFieldValue(num, typ, b)
		}
		if n < 0 {
			return it, protowire.ParseError(n)
		}
		b = b[n:]
	}
	switch {
	case len(it.id) == 0 || len(it.id) > MaxIDLen:
		return it, fmt.Errorf("id of %d bytes, want 1..%d", len(it.id), MaxIDLen)
	case count < 1 || count > math.MaxInt64:
		return it, fmt.Errorf("count %d is not in 1..%d", count, int64(math.MaxInt64))
	case errBound > count:
		return it, fmt.Errorf("error bound %d exceeds count %d", errBound, count)
	}
	it.count, it.err = int64(count), int64(errBound)
	return it, nil
}

// countVarints returns the number of varints packed in b.
func countVarints(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		_, m := protowire.ConsumeVarint(b)
		if m < 0 {
			return 0, protowire.ParseError(m)
		}
		n++
		b = b[m:]
	}
	return n, nil
}
