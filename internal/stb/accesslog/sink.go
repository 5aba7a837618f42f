package accesslog

import (
	"io"
	"os"
	"sync"
)

// sink is where the writer's batches go: a writer given to New, or a file
// that Reopen can switch. mu makes a batch go whole to one file, so a
// reopen between batches neither loses nor repeats a line.
type sink struct {
	mu     sync.Mutex
	w      io.Writer
	path   string   // "" unless a file sink
	f      *os.File // the open file of a file sink
	closed bool
}

// openFile opens path for appending, creating it readable by the group
// (log shippers) but not by others.
func openFile(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
}

func openSink(path string) (*sink, error) {
	f, err := openFile(path)
	if err != nil {
		return nil, err
	}
	return &sink{w: f, path: path, f: f}, nil
}

func (s *sink) write(p []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return os.ErrClosed
	}
	_, err := s.w.Write(p)
	return err
}

// reopen opens the path anew and switches to it once the batch being
// written (if any) is done, then closes the old file.
func (s *sink) reopen() error {
	if s.path == "" {
		return nil
	}
	f, err := openFile(s.path)
	if err != nil {
		return err
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = f.Close()
		return os.ErrClosed
	}
	old := s.f
	s.w, s.f = f, f
	s.mu.Unlock()
	return old.Close()
}

// close closes a file sink (later writes fail); other writers are the
// caller's to close.
func (s *sink) close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.f == nil || s.closed {
		return nil
	}
	s.closed = true
	return s.f.Close()
}
