package netutil

import (
	"net"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/wait"
)

// TestLimitRefusesBeyondCap: with a cap of 3, five clients get three
// connections and two resets, Accept never blocks on the extra ones, and a
// place freed by a close is given to the next client.
func TestLimitRefusesBeyondCap(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	lim := NewConnLimit(3, LimitOptions{})
	l := lim.Listener(ln)
	defer l.Close()
	accepted := make(chan net.Conn, 10)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted <- c
		}
	}()
	dial := func() (net.Conn, error) {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err == nil {
			t.Cleanup(func() { c.Close() })
		}
		return c, err
	}
	var served []net.Conn
	for range 3 {
		if _, err := dial(); err != nil {
			t.Fatal(err)
		}
		served = append(served, <-accepted)
	}
	// Beyond the cap: reset, either as the handshake completes (the dial
	// fails) or just after (the first read fails).
	for range 2 {
		c, err := dial()
		if err != nil {
			continue
		}
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Read(make([]byte, 1)); err == nil || isTimeout(err) {
			t.Fatalf("connection beyond the cap: read %v, want it closed", err)
		}
	}
	wait.For(t, "2 refused", 5*time.Second, func() bool { return lim.Refused() == 2 })
	if got := lim.Open(); got != 3 {
		t.Fatalf("open = %d, want 3", got)
	}

	served[0].Close()
	served[0].Close() // a second close does not free a second place
	if got := lim.Open(); got != 2 {
		t.Fatalf("open after close = %d, want 2", got)
	}
	if _, err := dial(); err != nil {
		t.Fatal(err)
	}
	c := <-accepted
	defer c.Close()
	if got, ref := lim.Open(), lim.Refused(); got != 3 || ref != 2 {
		t.Fatalf("after a place was freed: open %d refused %d, want 3 and 2", got, ref)
	}
}

// TestLimitWriteTimeout: a write to a peer that stops reading fails at the
// deadline instead of blocking for ever.
func TestLimitWriteTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := NewConnLimit(0, LimitOptions{WriteTimeout: 100 * time.Millisecond}).Listener(ln)
	defer l.Close()
	peer, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer peer.Close()
	c, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	done := make(chan error, 1)
	go func() {
		buf := make([]byte, 1<<20)
		for {
			if _, err := c.Write(buf); err != nil {
				done <- err
				return
			}
		}
	}()
	select {
	case err := <-done:
		if !isTimeout(err) {
			t.Fatalf("write error %v, want a timeout", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("write to a peer that does not read still blocked after 10s")
	}
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}
