// Package sdwatch is the service manager's watchdog for daemons a test
// starts itself: the daemon is handed NOTIFY_SOCKET and WATCHDOG_USEC as
// systemd hands them (WatchdogSec, NotifyAccess=main), and once the daemon
// has said READY=1, a WatchdogSec without WATCHDOG=1 fires, as systemd
// would kill the service. STOPPING=1 ends the watch (a graceful stop is no
// hang). What firing does (kill, clean up) is the caller's.
package sdwatch

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"strconv"
	"sync"
	"time"
)

// Watch listens on one daemon's notification socket.
type Watch struct {
	path    string
	conn    *net.UnixConn
	timeout time.Duration

	mu    sync.Mutex
	fired time.Time
}

// Listen binds the notification socket at path (a file: unlike an
// abstract socket, it reaches a daemon in another network namespace).
func Listen(path string, timeout time.Duration) (*Watch, error) {
	if timeout <= 0 {
		return nil, errors.New("sdwatch: the timeout must be positive")
	}
	_ = os.Remove(path) // the socket of a run before
	c, err := net.ListenUnixgram("unixgram", &net.UnixAddr{Name: path, Net: "unixgram"})
	if err != nil {
		return nil, fmt.Errorf("sdwatch: %w", err)
	}
	return &Watch{path: path, conn: c, timeout: timeout}, nil
}

// Env is what the daemon's environment needs.
func (w *Watch) Env() []string {
	return []string{"NOTIFY_SOCKET=" + w.path, "WATCHDOG_USEC=" + strconv.FormatInt(w.timeout.Microseconds(), 10)}
}

// Run reads notifications until ctx ends, the daemon says STOPPING=1, or
// the watchdog fires; then it calls fire (if it fired) and closes the
// socket. It arms at READY=1, as systemd does for Type=notify.
func (w *Watch) Run(ctx context.Context, fire func()) {
	defer os.Remove(w.path)
	defer w.conn.Close()
	stop := context.AfterFunc(ctx, func() { _ = w.conn.SetReadDeadline(time.Now()) })
	defer stop()
	buf := make([]byte, 4096)
	var deadline time.Time // zero until READY
	for {
		if !deadline.IsZero() {
			_ = w.conn.SetReadDeadline(deadline)
		}
		n, err := w.conn.Read(buf)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() && !deadline.IsZero() && !time.Now().Before(deadline) {
				w.mu.Lock()
				w.fired = time.Now()
				w.mu.Unlock()
				fire()
				return
			}
			if !errors.As(err, &ne) || !ne.Timeout() {
				return // the socket is gone
			}
			continue
		}
		for _, line := range bytes.Split(buf[:n], []byte("\n")) {
			switch string(line) {
			case "READY=1", "WATCHDOG=1":
				deadline = time.Now().Add(w.timeout)
			case "STOPPING=1":
				return
			}
		}
	}
}

// Fired is when the watchdog fired (zero: it has not).
func (w *Watch) Fired() time.Time {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.fired
}
