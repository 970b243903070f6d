package partial

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
	"google.golang.org/protobuf/encoding/protowire"

	"github.com/edgecount/edgecount/store"
)

// Version is the schema version this package writes and reads.
const Version = 1

// ErrMalformed is wrapped by every Decode error.
var ErrMalformed = errors.New("malformed partial-sum message")

// Batch is one partial-sum message.
type Batch struct {
	Agent     string
	Region    string
	Epoch     uint64
	Seq       uint64
	Partition uint32
	FlushedAt time.Time // kept to the millisecond on the wire
	Sums      []Sum
}

// Sum is the delta one agent accumulated for one counter of one item,
// attributed to one region.
type Sum struct {
	ContentID string
	Counter   string
	Region    string
	Delta     int64
}

// MsgID returns the broker de-duplication id: agent/epoch/seq/partition.
func (b *Batch) MsgID() string {
	buf := make([]byte, 0, len(b.Agent)+48)
	buf = append(buf, b.Agent...)
	buf = append(buf, '/')
	buf = strconv.AppendUint(buf, b.Epoch, 10)
	buf = append(buf, '/')
	buf = strconv.AppendUint(buf, b.Seq, 10)
	buf = append(buf, '/')
	buf = strconv.AppendUint(buf, uint64(b.Partition), 10)
	return string(buf)
}

// PartitionOf returns the partition of contentID among n partitions.
func PartitionOf(contentID string, n int) uint32 {
	return uint32(xxhash.Sum64String(contentID) % uint64(n))
}

// Field numbers.
const (
	fVersion   = 1
	fAgent     = 2
	fRegion    = 3
	fEpoch     = 4
	fSeq       = 5
	fPartition = 6
	fFlushedAt = 7
	fSums      = 8

	fSumContent = 1
	fSumCounter = 2
	fSumRegion  = 3
	fSumDelta   = 4
)

// Append appends the encoding of b to dst and returns the extended slice.
// A Sum whose Region equals b.Region is written without it.
func Append(dst []byte, b *Batch) []byte {
	dst = protowire.AppendTag(dst, fVersion, protowire.VarintType)
	dst = protowire.AppendVarint(dst, Version)
	dst = appendString(dst, fAgent, b.Agent)
	dst = appendString(dst, fRegion, b.Region)
	dst = appendUint(dst, fEpoch, b.Epoch)
	dst = appendUint(dst, fSeq, b.Seq)
	dst = appendUint(dst, fPartition, uint64(b.Partition))
	if !b.FlushedAt.IsZero() {
		dst = protowire.AppendTag(dst, fFlushedAt, protowire.VarintType)
		dst = protowire.AppendVarint(dst, uint64(b.FlushedAt.UnixMilli()))
	}
	for i := range b.Sums {
		s := &b.Sums[i]
		region := s.Region
		if region == b.Region {
			region = ""
		}
		n := sumSize(s.ContentID, s.Counter, region, s.Delta)
		dst = protowire.AppendTag(dst, fSums, protowire.BytesType)
		dst = protowire.AppendVarint(dst, uint64(n))
		dst = appendString(dst, fSumContent, s.ContentID)
		dst = appendString(dst, fSumCounter, s.Counter)
		dst = appendString(dst, fSumRegion, region)
		if s.Delta != 0 {
			dst = protowire.AppendTag(dst, fSumDelta, protowire.VarintType)
			dst = protowire.AppendVarint(dst, protowire.EncodeZigZag(s.Delta))
		}
	}
	return dst
}

// SumSize returns how many bytes s adds to an encoded batch of region
// batchRegion, so that callers can cut messages to a size.
func SumSize(s *Sum, batchRegion string) int {
	region := s.Region
	if region == batchRegion {
		region = ""
	}
	n := sumSize(s.ContentID, s.Counter, region, s.Delta)
	return protowire.SizeTag(fSums) + protowire.SizeBytes(n)
}

func sumSize(content, counter, region string, delta int64) int {
	n := stringSize(fSumContent, content) + stringSize(fSumCounter, counter) + stringSize(fSumRegion, region)
	if delta != 0 {
		n += protowire.SizeTag(fSumDelta) + protowire.SizeVarint(protowire.EncodeZigZag(delta))
	}
	return n
}

func stringSize(num protowire.Number, s string) int {
	if s == "" {
		return 0
	}
	return protowire.SizeTag(num) + protowire.SizeBytes(len(s))
}

func appendString(dst []byte, num protowire.Number, s string) []byte {
	if s == "" {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.BytesType)
	return protowire.AppendString(dst, s)
}

func appendUint(dst []byte, num protowire.Number, v uint64) []byte {
	if v == 0 {
		return dst
	}
	dst = protowire.AppendTag(dst, num, protowire.VarintType)
	return protowire.AppendVarint(dst, v)
}

// Decode parses data into b, reusing b.Sums' backing array. Every Sum gets
// its Region filled in (the batch region when the wire left it empty). It
// rejects other schema versions, malformed wire data, invalid ids, counter
// and region names, and zero deltas.
func Decode(data []byte, b *Batch) error {
	*b = Batch{Sums: b.Sums[:0]}
	var version uint64
	var sawVersion bool
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return fmt.Errorf("%w: %v", ErrMalformed, protowire.ParseError(n))
		}
		data = data[n:]
		switch {
		case num == fVersion && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return fmt.Errorf("%w: version: %v", ErrMalformed, protowire.ParseError(n))
			}
			version, sawVersion, data = v, true, data[n:]
		case (num == fAgent || num == fRegion) && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
			}
			if num == fAgent {
				b.Agent = string(v)
			} else {
				b.Region = string(v)
			}
			data = data[n:]
		case (num == fEpoch || num == fSeq || num == fPartition || num == fFlushedAt) && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
			}
			switch num {
			case fEpoch:
				b.Epoch = v
			case fSeq:
				b.Seq = v
			case fPartition:
				if v > 1<<32-1 {
					return fmt.Errorf("%w: partition %d out of range", ErrMalformed, v)
				}
				b.Partition = uint32(v)
			case fFlushedAt:
				b.FlushedAt = time.UnixMilli(int64(v))
			}
			data = data[n:]
		case num == fSums && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return fmt.Errorf("%w: sum: %v", ErrMalformed, protowire.ParseError(n))
			}
			s, err := decodeSum(v)
			if err != nil {
				return fmt.Errorf("%w: sum %d: %v", ErrMalformed, len(b.Sums), err)
			}
			b.Sums = append(b.Sums, s)
			data = data[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return fmt.Errorf("%w: field %d: %v", ErrMalformed, num, protowire.ParseError(n))
			}
			data = data[n:]
		}
	}
	if !sawVersion || version != Version {
		return fmt.Errorf("%w: schema version %d, want %d", ErrMalformed, version, Version)
	}
	if !store.ValidID(b.Agent) {
		return fmt.Errorf("%w: invalid agent id %q", ErrMalformed, b.Agent)
	}
	if !store.ValidRegion(b.Region) {
		return fmt.Errorf("%w: invalid region %q", ErrMalformed, b.Region)
	}
	for i := range b.Sums {
		s := &b.Sums[i]
		if s.Region == "" {
			s.Region = b.Region
		} else if !store.ValidRegion(s.Region) {
			return fmt.Errorf("%w: sum %d: invalid region %q", ErrMalformed, i, s.Region)
		}
	}
	return nil
}

func decodeSum(data []byte) (Sum, error) {
	var s Sum
	for len(data) > 0 {
		num, typ, n := protowire.ConsumeTag(data)
		if n < 0 {
			return s, protowire.ParseError(n)
		}
		data = data[n:]
		switch {
		case num >= fSumContent && num <= fSumRegion && typ == protowire.BytesType:
			v, n := protowire.ConsumeBytes(data)
			if n < 0 {
				return s, protowire.ParseError(n)
			}
			switch num {
			case fSumContent:
				s.ContentID = string(v)
			case fSumCounter:
				s.Counter = string(v)
			case fSumRegion:
				s.Region = string(v)
			}
			data = data[n:]
		case num == fSumDelta && typ == protowire.VarintType:
			v, n := protowire.ConsumeVarint(data)
			if n < 0 {
				return s, protowire.ParseError(n)
			}
			s.Delta = protowire.DecodeZigZag(v)
			data = data[n:]
		default:
			n := protowire.ConsumeFieldValue(num, typ, data)
			if n < 0 {
				return s, protowire.ParseError(n)
			}
			data = data[n:]
		}
	}
	if !store.ValidID(s.ContentID) {
		return s, fmt.Errorf("invalid content id %q", s.ContentID)
	}
	if !store.ValidCounter(s.Counter) {
		return s, fmt.Errorf("invalid counter %q", s.Counter)
	}
	if s.Delta == 0 {
		return s, errors.New("zero delta")
	}
	return s, nil
}
