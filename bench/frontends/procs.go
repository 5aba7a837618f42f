package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a server process of the run: a peer (nginx, gdnsd) or this
// program re-executed as a child. Each runs in its own process group, so a
// Ctrl-C at the terminal reaches only the harness, which stops them in
// order; and each gets SIGTERM should the harness die without stopping it.
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser // Go children stop when it closes; nil: stopped by SIGTERM
	log    *tailBuffer    // what it printed on stderr (and stdout, for peers)
	exited chan struct{}
	err    error // its exit status, once exited is closed
}

// procSpec says how to start a proc.
type procSpec struct {
	name   string
	cpus   string // taskset CPU list; "" runs it unpinned
	path   string
	args   []string
	stdin  bool      // stop it by closing its stdin (Go children) instead of SIGTERM
	stdout io.Writer // nil: into log, with stderr
}

func startProc(pin pinning, s procSpec) (*proc, error) {
	path, args := pin.wrap(s.cpus, s.path, s.args)
	cmd := exec.Command(path, args...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	p := &proc{name: s.name, cmd: cmd, log: &tailBuffer{max: 8 << 10}, exited: make(chan struct{})}
	cmd.Stderr = p.log
	cmd.Stdout = s.stdout
	if s.stdout == nil {
		cmd.Stdout = p.log
	}
	if s.stdin {
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		p.stdin = in
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", s.name, err)
	}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// failed describes how the process ended, with the tail of its output.
func (p *proc) failed() error {
	out := strings.TrimSpace(p.log.String())
	if out == "" {
		return fmt.Errorf("%s exited (%v), printing nothing", p.name, p.err)
	}
	return fmt.Errorf("%s exited (%v): %s", p.name, p.err, out)
}

// stop asks the process to exit (stdin closed, or SIGTERM) and waits for
// it; after a few seconds its whole process group is killed.
func (p *proc) stop() {
	if p.stdin != nil {
		_ = p.stdin.Close()
	} else {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
	select {
	case <-p.exited:
	case <-time.After(5 * time.Second):
		_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
		<-p.exited
	}
	// Workers a master left behind (nginx's, were the master killed).
	_ = syscall.Kill(-p.pid(), syscall.SIGKILL)
}

// waitReady polls ready until it succeeds, the process exits, ctx ends or
// the deadline passes.
func (p *proc) waitReady(ctx context.Context, within time.Duration, ready func() error) error {
	deadline := time.Now().Add(within)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return p.failed()
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s not ready within %s: %w; it printed: %s", p.name, within, err, strings.TrimSpace(p.log.String()))
		}
	}
}

// tailBuffer keeps the last max bytes written to it (the process writes
// while the harness may read).
type tailBuffer struct {
	max int
	mu  sync.Mutex
	buf bytes.Buffer
}

func (t *tailBuffer) Write(b []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf.Write(b)
	if over := t.buf.Len() - t.max; over > 0 {
		t.buf.Next(over)
	}
	return len(b), nil
}

func (t *tailBuffer) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.buf.String()
}

// freePort returns a port of f's loopback address free for TCP (and for UDP too when
// udp is set) at the time of the call, for a peer that wants a port number
// in its configuration.
func freePort(f family, udp bool) (int, error) {
	for range 20 {
		ln, err := net.Listen("tcp", f.listen())
		if err != nil {
			return 0, err
		}
		port := ln.Addr().(*net.TCPAddr).Port
		if !udp {
			ln.Close()
			return port, nil
		}
		pc, err := net.ListenPacket("udp", f.hostPort(port))
		ln.Close()
		if err == nil {
			pc.Close()
			return port, nil
		}
	}
	return 0, fmt.Errorf("no port free for both TCP and UDP on %s", f.loopback())
}
