//go:build !linux

package wal

import "os"

// syncData makes f's written bytes durable: fsync(2) where fdatasync(2) is
// not available.
func syncData(f *os.File) error { return f.Sync() }
