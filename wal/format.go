package wal

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
)

// On-disk format, little-endian throughout.
//
// A segment file is a header followed by records:
//
//	header (40 bytes): magic "ecwalseg" | version u32 | log id [16] | first index u64 | crc u32
//	record (24 bytes + payload): crc u32 | payload length u32 | index u64 | append time u64 (Unix ns) | payload
//
// The record's CRC-32C covers everything after the CRC field: length, index,
// time and payload. The header's CRC-32C covers the 36 bytes before it. The
// meta file has the header's layout with magic "ecwalmet" and the truncation
// point in place of the first index.
const (
	headerSize    = 40
	recHeaderSize = 24
	formatVersion = 1
)

var (
	segMagic   = [8]byte{'e', 'c', 'w', 'a', 'l', 's', 'e', 'g'}
	metaMagic  = [8]byte{'e', 'c', 'w', 'a', 'l', 'm', 'e', 't'}
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
)

// logID tells one log's files from another's.
type logID [16]byte

// header is a decoded segment or meta header.
type header struct {
	id logID
	n  uint64 // first index of a segment; truncation point of the meta file
}

func appendHeader(dst []byte, magic [8]byte, h header) []byte {
	var b [headerSize]byte
	copy(b[0:8], magic[:])
	binary.LittleEndian.PutUint32(b[8:12], formatVersion)
	copy(b[12:28], h.id[:])
	binary.LittleEndian.PutUint64(b[28:36], h.n)
	binary.LittleEndian.PutUint32(b[36:40], crc32.Checksum(b[:36], castagnoli))
	return append(dst, b[:]...)
}

// errBadHeader is wrapped by decodeHeader's errors.
var errBadHeader = errors.New("bad header")

func decodeHeader(b []byte, magic [8]byte) (header, error) {
	if len(b) < headerSize {
		return header{}, fmt.Errorf("%w: %d bytes, want %d", errBadHeader, len(b), headerSize)
	}
	if [8]byte(b[0:8]) != magic {
		return header{}, fmt.Errorf("%w: magic %q", errBadHeader, b[0:8])
	}
	if got, want := binary.LittleEndian.Uint32(b[36:40]), crc32.Checksum(b[:36], castagnoli); got != want {
		return header{}, fmt.Errorf("%w: checksum %08x, computed %08x", errBadHeader, got, want)
	}
	if v := binary.LittleEndian.Uint32(b[8:12]); v != formatVersion {
		return header{}, fmt.Errorf("%w: version %d, want %d", errBadHeader, v, formatVersion)
	}
	return header{id: logID(b[12:28]), n: binary.LittleEndian.Uint64(b[28:36])}, nil
}

// recordSize is the number of bytes a record with an n-byte payload takes.
func recordSize(n int) int64 { return recHeaderSize + int64(n) }

// appendRecord appends the encoded record to dst.
// It allocates only to grow dst.
func appendRecord(dst []byte, index uint64, unixNano int64, payload []byte) []byte {
	start := len(dst)
	dst = binary.LittleEndian.AppendUint32(dst, 0) // the CRC, below
	dst = binary.LittleEndian.AppendUint32(dst, uint32(len(payload)))
	dst = binary.LittleEndian.AppendUint64(dst, index)
	dst = binary.LittleEndian.AppendUint64(dst, uint64(unixNano))
	dst = append(dst, payload...)
	binary.LittleEndian.PutUint32(dst[start:], crc32.Checksum(dst[start+4:], castagnoli))
	return dst
}

// Why a record could not be read. errTorn: the file ends inside the record.
// errCorrupt: the bytes are there but are not the record expected.
var (
	errTorn    = errors.New("torn record")
	errCorrupt = errors.New("corrupt record")
)

// record is one decoded record. payload aliases the reader's buffer and is
// valid until the next call of next.
type record struct {
	index    uint64
	unixNano int64
	payload  []byte
}

// recordReader decodes the records of one segment after its header. It
// trusts nothing: a record must have a length of at most maxPayload, the
// index that follows the previous one, and a matching checksum. The first
// failure ends the segment: nothing after an untrusted point is returned.
type recordReader struct {
	r          *bufio.Reader
	maxPayload int
	next       uint64 // index the next record must have
	off        int64  // offset just after the last good record
	hdr        [recHeaderSize]byte
	buf        []byte
	err        error
}

func newRecordReader(r io.Reader, first uint64, maxPayload int, off int64) *recordReader {
	return &recordReader{r: bufio.NewReaderSize(r, 64<<10), maxPayload: maxPayload, next: first, off: off}
}

// read returns the next record, or io.EOF at a clean end, or an error wrapping
// errTorn or errCorrupt; after an error it returns the same error again.
func (rr *recordReader) read() (record, error) {
	if rr.err != nil {
		return record{}, rr.err
	}
	rec, n, err := rr.decode()
	if err != nil {
		rr.err = err
		return record{}, err
	}
	rr.off += n
	rr.next++
	return rec, nil
}

func (rr *recordReader) decode() (record, int64, error) {
	h := rr.hdr[:]
	switch n, err := io.ReadFull(rr.r, h); {
	case err == io.EOF:
		return record{}, 0, io.EOF
	case errors.Is(err, io.ErrUnexpectedEOF):
		return record{}, 0, fmt.Errorf("%w: %d of %d header bytes at offset %d", errTorn, n, recHeaderSize, rr.off)
	case err != nil:
		return record{}, 0, err
	}
	size := binary.LittleEndian.Uint32(h[4:8])
	if int64(size) > int64(rr.maxPayload) {
		return record{}, 0, fmt.Errorf("%w: length %d over the limit %d at offset %d", errCorrupt, size, rr.maxPayload, rr.off)
	}
	if cap(rr.buf) < int(size) {
		rr.buf = make([]byte, size)
	}
	payload := rr.buf[:size]
	if n, err := io.ReadFull(rr.r, payload); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) || err == io.EOF {
			return record{}, 0, fmt.Errorf("%w: %d of %d payload bytes at offset %d", errTorn, n, size, rr.off)
		}
		return record{}, 0, err
	}
	crc := crc32.Update(0, castagnoli, h[4:])
	crc = crc32.Update(crc, castagnoli, payload)
	if got := binary.LittleEndian.Uint32(h[0:4]); got != crc {
		return record{}, 0, fmt.Errorf("%w: checksum %08x, computed %08x at offset %d", errCorrupt, got, crc, rr.off)
	}
	index := binary.LittleEndian.Uint64(h[8:16])
	if index != rr.next {
		return record{}, 0, fmt.Errorf("%w: index %d, want %d at offset %d", errCorrupt, index, rr.next, rr.off)
	}
	return record{
		index:    index,
		unixNano: int64(binary.LittleEndian.Uint64(h[16:24])),
		payload:  payload,
	}, recordSize(int(size)), nil
}
