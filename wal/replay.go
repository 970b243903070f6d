package wal

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// Replay calls fn for every record at or above max(from, the truncation
// point), in index order, each index once. It reads the records that were
// written when Replay was called; appends may run meanwhile. payload is valid
// only during the call: copy it to keep it. An error from fn stops Replay and
// is returned as is. Bytes that changed since Open checked them stop Replay
// with an error wrapping ErrCorrupt.
//
// The agent calls Replay(0, …) once after Open, before it takes writes.
func (l *Log) Replay(from uint64, fn func(index uint64, payload []byte) error) error {
	type span struct {
		path        string
		first, last uint64
		size        int64
	}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return ErrClosed
	}
	start := max(from, l.trunc)
	var spans []span
	for _, s := range l.segs {
		if s.last >= start && s.last >= s.first {
			spans = append(spans, span{s.path, s.first, s.last, s.size})
		}
	}
	l.mu.Unlock()

	var emitted uint64 // the last index passed to fn
	for _, s := range spans {
		f, err := os.Open(s.path)
		if errors.Is(err, os.ErrNotExist) {
			continue // removed by a TruncateBefore since: all acknowledged
		}
		if err != nil {
			return fmt.Errorf("cannot replay: %w", err)
		}
		err = l.replaySegment(f, s.first, s.size, start, &emitted, fn)
		_ = f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func (l *Log) replaySegment(f *os.File, first uint64, size int64, start uint64, emitted *uint64, fn func(uint64, []byte) error) error {
	rr := newRecordReader(io.NewSectionReader(f, headerSize, size-headerSize), first, l.cfg.MaxRecordBytes, headerSize)
	for {
		rec, err := rr.read()
		if err == io.EOF {
			if rr.off != size {
				return fmt.Errorf("%w: %s ends at %d, Open found %d bytes", ErrCorrupt, f.Name(), rr.off, size)
			}
			return nil
		}
		if errors.Is(err, errTorn) || errors.Is(err, errCorrupt) {
			return fmt.Errorf("%w: %s changed since Open: %v", ErrCorrupt, f.Name(), err)
		}
		if err != nil {
			return fmt.Errorf("cannot replay %s: %w", f.Name(), err)
		}
		if rec.index < start || rec.index <= *emitted {
			continue
		}
		if err := fn(rec.index, rec.payload); err != nil {
			return err
		}
		*emitted = rec.index
		l.replayed.Add(1)
	}
}
