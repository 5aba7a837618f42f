// Package syncbuf is a bytes.Buffer that one goroutine may write while
// another reads it: a child process's output, which os/exec copies on a
// goroutine of its own, read by the test while the process runs.
package syncbuf

import (
	"bytes"
	"sync"
)

// Buffer is safe for concurrent Write and String.
type Buffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *Buffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

// String is what was written so far.
func (b *Buffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
