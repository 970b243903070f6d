package wal

import (
	"errors"
	"fmt"
	"time"
)

// Durability says when an Append returns.
type Durability string

// The durability modes. Their loss windows are in the package documentation.
const (
	// Fsync: Append returns after an fsync that covers its record.
	// Concurrent appends share one fsync (group commit).
	Fsync Durability = "fsync"
	// Interval: Append returns after write(2); a background fsync runs every
	// Config.SyncInterval.
	Interval Durability = "interval"
	// None: no log. Append only numbers the payload; nothing survives the
	// process.
	None Durability = "none"
)

// Config configures a Log. The zero value is not valid; start from
// DefaultConfig.
type Config struct {
	// Dir is the log's directory, created if missing. One process at a time
	// may open it (a lock file enforces this). Required unless Durability is
	// None.
	Dir string

	// Durability is Fsync, Interval or None. Default Fsync.
	Durability Durability

	// SyncInterval is the time between background fsyncs in Interval mode.
	// Default 100 ms. Ignored in the other modes.
	SyncInterval time.Duration

	// SegmentBytes is the size at which a segment file is closed and a new one
	// started. A segment holds whole records; a record never crosses two.
	// At least 4 KiB. Default 64 MiB.
	SegmentBytes int64

	// MaxBytes bounds the bytes in all segment files together. An Append that
	// would pass it fails with ErrFull at once; TruncateBefore makes room.
	// At least 2 × SegmentBytes. Default 1 GiB.
	MaxBytes int64

	// MaxRecordBytes bounds one payload; a longer one fails with ErrTooLarge,
	// and on reading, a length field over it marks the record corrupt. At most
	// SegmentBytes minus the segment and record headers. Default 4 MiB.
	MaxRecordBytes int

	// ObserveFsync, if set, is called after every fsync of a segment with its
	// duration, from the goroutine that ran the fsync (with the log's write
	// lock held): it must be fast and must not call the Log. Use it to feed a
	// latency histogram.
	ObserveFsync func(time.Duration)
}

// DefaultConfig returns the defaults: fsync durability, 64 MiB segments, a
// 1 GiB budget, 4 MiB records, 100 ms sync interval (for Interval mode). Dir
// is left empty.
func DefaultConfig() Config {
	return Config{
		Durability:     Fsync,
		SyncInterval:   100 * time.Millisecond,
		SegmentBytes:   64 << 20,
		MaxBytes:       1 << 30,
		MaxRecordBytes: 4 << 20,
	}
}

// ParseDurability parses "fsync", "interval" or "none".
func ParseDurability(s string) (Durability, error) {
	switch d := Durability(s); d {
	case Fsync, Interval, None:
		return d, nil
	}
	return "", fmt.Errorf("durability %q is not fsync, interval or none", s)
}

// Validate reports every field that is out of range, joined.
func (c Config) Validate() error {
	var errs []error
	if _, err := ParseDurability(string(c.Durability)); err != nil {
		errs = append(errs, err)
	}
	if c.Durability == None {
		return errors.Join(errs...)
	}
	if c.Dir == "" {
		errs = append(errs, errors.New("dir is empty"))
	}
	if c.Durability == Interval && c.SyncInterval <= 0 {
		errs = append(errs, fmt.Errorf("sync interval %v is not positive", c.SyncInterval))
	}
	if c.SegmentBytes < 4<<10 {
		errs = append(errs, fmt.Errorf("segment bytes %d is under 4 KiB", c.SegmentBytes))
	}
	if c.MaxBytes < 2*c.SegmentBytes {
		errs = append(errs, fmt.Errorf("max bytes %d is under 2 × segment bytes (%d)", c.MaxBytes, c.SegmentBytes))
	}
	if c.MaxRecordBytes < 1 || int64(c.MaxRecordBytes) > c.SegmentBytes-headerSize-recHeaderSize {
		errs = append(errs, fmt.Errorf("max record bytes %d is not in 1…segment bytes − %d", c.MaxRecordBytes, headerSize+recHeaderSize))
	}
	return errors.Join(errs...)
}
