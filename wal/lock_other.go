//go:build !unix

package wal

import (
	"os"
	"path/filepath"
)

// lockDir only creates dir/LOCK: without flock, keeping two processes out of
// one directory is the operator's job.
func lockDir(dir string) (*os.File, error) {
	return os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o640)
}

func unlockDir(f *os.File) error { return f.Close() }
