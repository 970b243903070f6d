package wal

import (
	"cmp"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// File names in the log's directory.
const (
	metaName   = "meta"
	lockName   = "LOCK"
	segSuffix  = ".seg"
	tmpSuffix  = ".tmp"
	tornSuffix = ".torn" // the bytes cut off a torn tail, kept for inspection
	segNameLen = 20 + len(segSuffix)
)

func segName(first uint64) string { return fmt.Sprintf("%020d%s", first, segSuffix) }

// parseSegName returns the first index in a segment file's name.
func parseSegName(name string) (uint64, bool) {
	if len(name) != segNameLen || !strings.HasSuffix(name, segSuffix) {
		return 0, false
	}
	n, err := strconv.ParseUint(name[:20], 10, 64)
	return n, err == nil
}

// ProblemKind names what Open found wrong with a segment.
type ProblemKind string

// The kinds of damage Open reports. None of the bytes concerned is replayed.
const (
	// TornTail: the last segment ends inside a record, or in a record whose
	// bytes are wrong and that reaches the end of the file, or in zeros:
	// what a crash during a write leaves. The record was never acknowledged
	// in Fsync mode. Open moves the bytes from the last good record on to
	// NAME.torn (removed with the segment) and cuts the file there.
	TornTail ProblemKind = "torn tail"
	// CorruptRecord: a record that fails its checksum, length or index check
	// with more bytes after it, or in a segment that is not the last. Nothing
	// after it in that segment is replayed; the file is left as it is for
	// inspection and is removed once TruncateBefore passes its good records.
	CorruptRecord ProblemKind = "corrupt record"
	// BadSegment: a segment whose header is damaged or does not match its
	// name. It is renamed to NAME.corrupt and left for inspection, as is a
	// segment whose first record is corrupt.
	BadSegment ProblemKind = "bad segment header"
	// ForeignSegment: a segment written by another log (another agent's
	// directory). It is renamed to NAME.foreign and left for inspection.
	ForeignSegment ProblemKind = "foreign segment"
)

// Problem is one piece of damage Open found.
type Problem struct {
	Kind ProblemKind
	File string // the segment's file name as it was found
	// Offset is where the untrusted bytes start; Bytes is how many bytes
	// from there to the end of the file were not replayed.
	Offset, Bytes int64
	// After is the index of the last good record before the damage (0 if
	// none in that segment).
	After uint64
	Err   error
}

func (p Problem) String() string {
	return fmt.Sprintf("%s in %s at offset %d (%d bytes dropped, after index %d): %v",
		p.Kind, p.File, p.Offset, p.Bytes, p.After, p.Err)
}

// Recovery is what Open found on disk.
type Recovery struct {
	// First is the truncation point: Replay(0, fn) starts here.
	First uint64
	// Next is the index the next Append gets.
	Next uint64
	// Records is how many intact records at or above First Replay will
	// deliver.
	Records int64
	// Problems lists the damage found, in file order. Each is also counted
	// in Stats.
	Problems []Problem
}

// Open opens the log in cfg.Dir, creating it if needed, and checks every
// segment; the first append starts a new segment. Damage on disk is not an error: it is
// reported in Recovery.Problems and never replayed. Open fails for a bad
// Config, an I/O error, a locked directory (ErrLocked), or a missing or
// damaged meta file next to segment files (ErrCorrupt), since without it the
// truncation point is unknown and replaying from the start could apply
// acknowledged records twice.
//
// In None mode Open touches no file and returns an empty log.
func Open(cfg Config) (_ *Log, _ Recovery, err error) {
	if err := cfg.Validate(); err != nil {
		return nil, Recovery{}, fmt.Errorf("cannot open log: %w", err)
	}
	l := &Log{
		cfg:   cfg,
		sem:   make(chan struct{}, 1),
		gen:   newGen(),
		next:  1,
		trunc: 1,
		stop:  make(chan struct{}),
	}
	if cfg.Durability == None {
		return l, Recovery{First: 1, Next: 1}, nil
	}
	if err := os.MkdirAll(cfg.Dir, 0o750); err != nil {
		return nil, Recovery{}, fmt.Errorf("cannot open log: %w", err)
	}
	if l.lockFile, err = lockDir(cfg.Dir); err != nil {
		return nil, Recovery{}, fmt.Errorf("cannot open log in %s: %w", cfg.Dir, err)
	}
	defer func() {
		if err != nil {
			for _, s := range l.segs {
				if s.f != nil {
					_ = s.f.Close()
				}
			}
			if l.meta != nil {
				_ = l.meta.close()
			}
			_ = unlockDir(l.lockFile)
		}
	}()
	rec, err := l.recover()
	if err != nil {
		return nil, Recovery{}, fmt.Errorf("cannot open log in %s: %w", cfg.Dir, err)
	}
	if cfg.Durability == Interval {
		l.wg.Add(1)
		go l.syncLoop()
	}
	return l, rec, nil
}

// recover reads the meta file and the segments and sets the Log's state.
func (l *Log) recover() (Recovery, error) {
	dir := l.cfg.Dir
	entries, err := os.ReadDir(dir)
	if err != nil {
		return Recovery{}, err
	}
	type found struct {
		name  string
		first uint64
	}
	var files []found
	for _, e := range entries {
		name := e.Name()
		if strings.HasSuffix(name, tmpSuffix) {
			// A segment or meta file whose creation did not finish.
			if err := os.Remove(filepath.Join(dir, name)); err != nil {
				return Recovery{}, err
			}
			continue
		}
		if first, ok := parseSegName(name); ok && e.Type().IsRegular() {
			files = append(files, found{name, first})
		}
	}
	slices.SortFunc(files, func(a, b found) int { return cmp.Compare(a.first, b.first) })

	meta, err := openMeta(dir)
	if errors.Is(err, os.ErrNotExist) && len(files) == 0 {
		var id logID
		if _, err := rand.Read(id[:]); err != nil {
			return Recovery{}, err
		}
		if err := createMeta(dir, header{id: id, n: 1}); err != nil {
			return Recovery{}, err
		}
		meta, err = openMeta(dir)
	}
	switch {
	case errors.Is(err, os.ErrNotExist):
		return Recovery{}, fmt.Errorf("%w: %d segment files and no meta file", ErrCorrupt, len(files))
	case err != nil:
		return Recovery{}, err
	}
	l.meta = meta
	l.id, l.trunc = meta.cur.id, meta.cur.n

	var r Recovery
	var lastGood uint64 // highest index replay will deliver so far
	var keep []*segment
	renamed := false
	for i, fd := range files {
		path := filepath.Join(dir, fd.name)
		s, probs, err := l.scanSegment(path, fd.first, i == len(files)-1, &lastGood, &r.Records)
		if err != nil {
			return Recovery{}, err
		}
		for _, p := range probs {
			p.File = fd.name
			r.Problems = append(r.Problems, p)
			l.st.droppedBytes += p.Bytes
			switch p.Kind {
			case TornTail:
				l.st.tornTails++
			case CorruptRecord:
				l.st.corruptRecords++
			case BadSegment:
				l.st.badSegments++
			case ForeignSegment:
				l.st.foreignSegments++
			}
		}
		if s == nil { // renamed aside
			renamed = true
			if probs[0].Kind != ForeignSegment {
				// Its records are unreadable; never hand out their indexes again.
				lastGood = max(lastGood, fd.first)
			}
			continue
		}
		keep = append(keep, s)
	}

	l.next = max(l.trunc, lastGood+1)
	// Segments with nothing unacknowledged (left by a crash inside
	// TruncateBefore) and empty ones go.
	removed := false
	for _, s := range keep {
		if s.last < l.trunc || s.last < s.first {
			if err := removeSegment(s.path); err != nil {
				return Recovery{}, err
			}
			removed = true
			continue
		}
		l.segs = append(l.segs, s)
		l.diskBytes += s.size + s.extra
	}
	if renamed || removed {
		if err := syncDir(dir); err != nil {
			return Recovery{}, err
		}
	}
	// No segment is created until the first append: Open needs no disk
	// space, so a log that filled the disk can still be opened and
	// replayed. The first record starts a segment (see layout.place).
	l.layout = layout{off: l.cfg.SegmentBytes}
	l.st.recovered = r.Records
	r.First, r.Next = l.trunc, l.next
	return r, nil
}

// scanSegment checks one segment file. It returns nil for a segment it
// renamed aside. lastGood is the highest index delivered by the segments
// before; records at or below it are not counted again (they cannot be
// replayed twice: Replay delivers strictly increasing indexes). records
// counts the records at or above the truncation point.
func (l *Log) scanSegment(path string, first uint64, isLast bool, lastGood *uint64, records *int64) (*segment, []Problem, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	fileSize := fi.Size()

	var hb [headerSize]byte
	n, err := io.ReadFull(f, hb[:])
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && err != io.EOF {
		return nil, nil, err
	}
	h, herr := decodeHeader(hb[:n], segMagic)
	if herr == nil && h.id != l.id {
		p := Problem{Kind: ForeignSegment, Bytes: fileSize,
			Err: fmt.Errorf("log id %x, this log is %x", h.id, l.id)}
		return nil, []Problem{p}, os.Rename(path, path+".foreign")
	}
	if herr == nil && h.n != first {
		herr = fmt.Errorf("%w: first index %d, name says %d", errBadHeader, h.n, first)
	}
	if herr != nil {
		p := Problem{Kind: BadSegment, Bytes: fileSize, Err: herr}
		return nil, []Problem{p}, os.Rename(path, path+".corrupt")
	}

	s := &segment{path: path, first: first, last: first - 1, size: headerSize}
	rr := newRecordReader(f, first, l.cfg.MaxRecordBytes, headerSize)
	var overlap *Problem
	for {
		rec, err := rr.read()
		if err == io.EOF {
			break
		}
		if err != nil && !errors.Is(err, errTorn) && !errors.Is(err, errCorrupt) {
			return nil, nil, err // an I/O error
		}
		if err != nil {
			p := Problem{Kind: CorruptRecord, Offset: rr.off, Bytes: fileSize - rr.off, Err: err}
			if s.last >= s.first {
				p.After = s.last
			}
			s.size = rr.off
			s.extra = fileSize - rr.off
			if isLast && (errors.Is(err, errTorn) || reachesEnd(f, rr.off, fileSize)) {
				p.Kind = TornTail
				// A damaged length field looks like a torn write too, so
				// the bytes are kept in NAME.torn before the cut. Without
				// room for them the file stays as it is.
				if saveTail(f, path+tornSuffix, rr.off, fileSize) == nil {
					if err := f.Truncate(rr.off); err != nil {
						return nil, nil, err
					}
					if err := f.Sync(); err != nil {
						return nil, nil, err
					}
					s.extra = 0
				}
			}
			if p.Kind == CorruptRecord && s.last < s.first {
				// Nothing good in it: set it aside whole, for inspection.
				return nil, []Problem{p}, os.Rename(path, path+".corrupt")
			}
			probs := []Problem{p}
			if overlap != nil {
				probs = append([]Problem{*overlap}, probs...)
			}
			return s, probs, nil
		}
		s.last, s.size = rec.index, rr.off
		if rec.index <= *lastGood {
			if overlap == nil {
				overlap = &Problem{Kind: CorruptRecord, Offset: rr.off - recordSize(len(rec.payload)), After: *lastGood,
					Err: fmt.Errorf("%w: index %d repeats an earlier segment's", errCorrupt, rec.index)}
			}
			continue
		}
		*lastGood = rec.index
		if rec.index >= l.trunc {
			*records++
			l.markAge(rec.index, rec.unixNano)
		}
	}
	if overlap != nil {
		return s, []Problem{*overlap}, nil
	}
	return s, nil, nil
}

// saveTail copies the bytes of f from off to size into a new file at path,
// durably.
func saveTail(f *os.File, path string, off, size int64) error {
	tmp := path + tmpSuffix
	t, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return err
	}
	_, err = io.Copy(t, io.NewSectionReader(f, off, size-off))
	if err == nil {
		err = t.Sync()
	}
	if cerr := t.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(filepath.Dir(path))
	}
	if err != nil {
		_ = os.Remove(tmp)
	}
	return err
}

// removeSegment removes a segment file and the torn tail saved beside it.
func removeSegment(path string) error {
	if err := os.Remove(path + tornSuffix); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return os.Remove(path)
}

// reachesEnd reports whether the bytes after off are what a crash during a
// write leaves: one record (good length, bad contents) that ends exactly at
// the end of the file, or only zeros.
func reachesEnd(f *os.File, off, fileSize int64) bool {
	var lb [8]byte
	if _, err := f.ReadAt(lb[:], off); err == nil {
		n := int64(lb[4]) | int64(lb[5])<<8 | int64(lb[6])<<16 | int64(lb[7])<<24
		if off+recordSize(int(n)) == fileSize {
			return true
		}
	}
	buf := make([]byte, 32<<10)
	for p := off; p < fileSize; {
		n, err := f.ReadAt(buf, p)
		for _, b := range buf[:n] {
			if b != 0 {
				return false
			}
		}
		if err != nil {
			return err == io.EOF
		}
		p += int64(n)
	}
	return true
}

// createSegment creates the segment whose first record will be first: the
// header goes to a temporary file, which is fsynced and renamed, and the
// directory is fsynced, so that a segment file always has a whole header.
func (l *Log) createSegment(first uint64) (*segment, error) {
	path := filepath.Join(l.cfg.Dir, segName(first))
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return nil, fmt.Errorf("cannot create segment: %w", err)
	}
	err = func() error {
		if _, err := f.Write(appendHeader(nil, segMagic, header{id: l.id, n: first})); err != nil {
			return err
		}
		if err := l.timedSync((*os.File).Sync, f); err != nil { // a new file: fsync all of it
			return err
		}
		if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("%s exists (%v)", path, err) // never replace a segment
		}
		if err := os.Rename(tmp, path); err != nil {
			return err
		}
		return syncDir(l.cfg.Dir)
	}()
	if err != nil {
		_ = f.Close()
		_ = os.Remove(tmp)
		return nil, fmt.Errorf("cannot create segment %s: %w", path, err)
	}
	return &segment{path: path, first: first, last: first - 1, size: headerSize, f: f}, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	return err
}
