package wal

import (
	"errors"
	"os"
	"syscall"
)

// syncData makes f's written bytes durable with fdatasync(2): the data and
// the metadata needed to read it back (the file size, the blocks), not the
// times. A record append needs nothing more; on ext4 it skips an inode
// update that fsync(2) would write.
func syncData(f *os.File) error {
	rc, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		for {
			serr = syscall.Fdatasync(int(fd))
			if !errors.Is(serr, syscall.EINTR) {
				return
			}
		}
	}); err != nil {
		return err
	}
	if serr != nil {
		return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: serr}
	}
	return nil
}
