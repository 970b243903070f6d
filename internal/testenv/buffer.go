package testenv

import (
	"bytes"
	"sync"
)

// Buffer collects what a logger or a child process writes while the test
// reads it: a bytes.Buffer whose Write and String are safe for concurrent
// use. The zero value is empty and ready.
type Buffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// String returns what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
