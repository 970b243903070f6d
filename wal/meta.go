package wal

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// The meta file holds the log id and the truncation point in two slots of
// headerSize bytes. An update overwrites the slot not holding the current
// value, in place, and fsyncs: it allocates no disk space, so TruncateBefore
// works on a full disk, and a torn update spoils only the slot it was
// writing. The valid slot with the higher truncation point is the current
// one; a torn update thus leaves the previous point, as if TruncateBefore had
// not been called.
type metaFile struct {
	f    *os.File
	slot int // the slot holding the current value
	cur  header
}

// createMeta writes a new meta file with h in both slots, atomically (a
// temporary file, fsynced and renamed; the directory fsynced).
func createMeta(dir string, h header) error {
	path := filepath.Join(dir, metaName)
	tmp := path + tmpSuffix
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o640)
	if err != nil {
		return fmt.Errorf("cannot create the meta file: %w", err)
	}
	b := appendHeader(nil, metaMagic, h)
	_, err = f.Write(appendHeader(b, metaMagic, h))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err == nil {
		err = syncDir(dir)
	}
	if err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("cannot create the meta file: %w", err)
	}
	return nil
}

// openMeta opens the meta file of dir. It returns an error wrapping
// os.ErrNotExist if there is none and ErrCorrupt if neither slot is valid.
func openMeta(dir string) (*metaFile, error) {
	f, err := os.OpenFile(filepath.Join(dir, metaName), os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	var b [2 * headerSize]byte
	n, _ := f.ReadAt(b[:], 0) // a short file is judged by its slots
	m := &metaFile{f: f, slot: -1}
	var errs []error
	for slot := range 2 {
		lo, hi := min(n, slot*headerSize), min(n, (slot+1)*headerSize)
		h, err := decodeHeader(b[lo:hi], metaMagic)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("slot %d: %w", slot, err))
		case m.slot >= 0 && h.id != m.cur.id:
			errs = append(errs, fmt.Errorf("slot %d: log id %x, slot %d says %x", slot, h.id, m.slot, m.cur.id))
			m.slot = -1
		case m.slot < 0 || h.n > m.cur.n:
			m.slot, m.cur = slot, h
		}
	}
	if m.slot < 0 {
		_ = f.Close()
		return nil, fmt.Errorf("%w: meta file: %v", ErrCorrupt, errors.Join(errs...))
	}
	return m, nil
}

// write makes h the current value, durably.
func (m *metaFile) write(h header) error {
	other := 1 - m.slot
	if _, err := m.f.WriteAt(appendHeader(nil, metaMagic, h), int64(other*headerSize)); err != nil {
		return fmt.Errorf("cannot write the meta file: %w", err)
	}
	if err := m.f.Sync(); err != nil {
		return fmt.Errorf("cannot fsync the meta file: %w", err)
	}
	m.slot, m.cur = other, h
	return nil
}

func (m *metaFile) close() error { return m.f.Close() }
