package port_test

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"

	"github.com/anysched/anysched/internal/testbed/port"
)

func TestHeldPortRefusesUntilListenedOn(t *testing.T) {
	h := port.Hold(t)
	if h.Port() == 0 || h.Addr() != "127.0.0.1:"+strconv.Itoa(h.Port()) {
		t.Fatalf("held %q, port %d", h.Addr(), h.Port())
	}
	refused := func(when string) {
		t.Helper()
		c, err := net.Dial("tcp", h.Addr())
		if err == nil {
			c.Close()
			t.Fatalf("%s: a connection to the held port was accepted", when)
		}
		if !errors.Is(err, syscall.ECONNREFUSED) {
			t.Fatalf("%s: dial: %v, want connection refused", when, err)
		}
	}
	refused("before any listener")

	// Other sockets cannot take it, on its address or the wildcard.
	for _, addr := range []string{h.Addr(), "0.0.0.0:" + strconv.Itoa(h.Port())} {
		if ln, err := net.Listen("tcp4", addr); err == nil {
			ln.Close()
			t.Fatalf("a plain listener bound the held port (%s)", addr)
		} else if !errors.Is(err, syscall.EADDRINUSE) {
			t.Fatalf("plain listen on %s: %v, want address in use", addr, err)
		}
	}

	for round := range 2 { // a server stopped and started again on the same port
		ln, err := h.Listen()
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		accepted := make(chan error, 1)
		go func() {
			c, err := ln.Accept()
			if err == nil {
				c.Close()
			}
			accepted <- err
		}()
		c, err := net.Dial("tcp", h.Addr())
		if err != nil {
			t.Fatalf("round %d: dial the listener: %v", round, err)
		}
		c.Close()
		if err := <-accepted; err != nil {
			t.Fatalf("round %d: accept: %v", round, err)
		}
		ln.Close()
		refused("after the listener closed")
	}
}

func TestPickedPortsDiffer(t *testing.T) {
	ps := port.Pick(t, 20)
	seen := map[string]bool{}
	for _, p := range ps {
		if seen[p] {
			t.Fatalf("%s handed out twice: %v", p, ps)
		}
		seen[p] = true
	}
	ln, err := net.Listen("tcp", ps[0])
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if _, err = net.Listen("tcp", ps[0]); !port.InUse(err) {
		t.Fatalf("second bind of %s: %v, want address in use", ps[0], err)
	}
	if port.InUse(errors.New("connection refused")) || port.InUse(nil) {
		t.Fatal("InUse says yes to other errors")
	}
}
