package tunlink

import (
	"math"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"testing"
	"time"

	"github.com/vishvananda/netns"
)

// privileged skips unless the test may create namespaces and TUN devices.
func privileged(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces, TUN devices)")
	}
	if _, err := os.Stat("/dev/net/tun"); err != nil {
		t.Skip("no /dev/net/tun")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("no iproute2")
	}
}

func netnsPair(t *testing.T, a, b string) {
	t.Helper()
	for _, n := range []string{a, b} {
		_ = exec.Command("ip", "netns", "del", n).Run() // left by a crashed run
		if out, err := exec.Command("ip", "netns", "add", n).CombinedOutput(); err != nil {
			t.Fatalf("ip netns add %s: %v %s", n, err, out)
		}
		t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", n).Run() })
		if out, err := exec.Command("ip", "-n", n, "link", "set", "lo", "up").CombinedOutput(); err != nil {
			t.Fatalf("lo up: %v %s", err, out)
		}
	}
}

// inNetns runs fn on a thread inside the named namespace; sockets fn
// creates stay in that namespace.
func inNetns(t *testing.T, name string, fn func()) {
	t.Helper()
	ns, err := netns.GetFromName(name)
	if err != nil {
		t.Fatal(err)
	}
	defer ns.Close()
	done := make(chan struct{})
	go func() {
		defer close(done)
		// Back to the original namespace before unlocking (the main thread
		// cannot retire, and must not stay in the test's namespace).
		runtime.LockOSThread()
		orig, err := netns.Get()
		if err != nil {
			t.Error(err)
			return
		}
		defer orig.Close()
		if err := netns.Set(ns); err != nil {
			t.Error(err)
			return
		}
		defer func() {
			if netns.Set(orig) == nil {
				runtime.UnlockOSThread()
			}
		}()
		fn()
	}()
	<-done
}

// roundTrips measures TCP connects (one round trip each) from namespace a
// to an echo listener at addr in namespace b, in milliseconds.
func roundTrips(t *testing.T, a, b, addr string, n int) (min, max float64) {
	t.Helper()
	var ln net.Listener
	inNetns(t, b, func() {
		var err error
		if ln, err = net.Listen("tcp", addr); err != nil {
			t.Error(err)
		}
	})
	if ln == nil {
		t.FailNow()
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	min = math.Inf(1)
	inNetns(t, a, func() {
		for range n {
			start := time.Now()
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				t.Error(err)
				return
			}
			ms := float64(time.Since(start).Microseconds()) / 1000
			c.Close()
			min, max = math.Min(min, ms), math.Max(max, ms)
		}
	})
	return min, max
}

func TestPrivilegedDelayedLink(t *testing.T) {
	privileged(t)
	netnsPair(t, "astla", "astlb")
	for _, tc := range []struct {
		delay    time.Duration
		min, max float64 // ms, round trip
	}{
		{25 * time.Millisecond, 50, 80},
		{0, 0, 10},
	} {
		l, err := Up(Config{
			A:     End{Netns: "astla", Interface: "dly0", Addr: netip.MustParsePrefix("10.200.0.1/30")},
			B:     End{Netns: "astlb", Interface: "dly0", Addr: netip.MustParsePrefix("10.200.0.2/30")},
			Delay: tc.delay,
		})
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := roundTrips(t, "astla", "astlb", "10.200.0.2:7001", 5)
		t.Logf("delay %s: TCP connect round trips %.2f-%.2f ms", tc.delay, lo, hi)
		if lo < tc.min || hi > tc.max {
			t.Errorf("delay %s: round trips %.1f-%.1f ms, want within [%.0f, %.0f]", tc.delay, lo, hi, tc.min, tc.max)
		}
		if l.Packets.Load() < 10 {
			t.Errorf("forwarded %d packets for 5 connections", l.Packets.Load())
		}
		if err := l.Close(); err != nil {
			t.Fatal(err)
		}
		// The devices go with the link.
		if out, err := exec.Command("ip", "-n", "astla", "link", "show", "dly0").CombinedOutput(); err == nil {
			t.Fatalf("dly0 still exists after Close:\n%s", out)
		}
	}
}

func TestUpRejectsBadConfig(t *testing.T) {
	for name, c := range map[string]Config{
		"negative delay": {A: End{Addr: netip.MustParsePrefix("10.0.0.1/30")}, B: End{Addr: netip.MustParsePrefix("10.0.0.2/30")}, Delay: -time.Second},
		"IPv6":           {A: End{Addr: netip.MustParsePrefix("fd00::1/64")}, B: End{Addr: netip.MustParsePrefix("fd00::2/64")}},
		"host prefix":    {A: End{Addr: netip.MustParsePrefix("10.0.0.1/32")}, B: End{Addr: netip.MustParsePrefix("10.0.0.2/32")}},
	} {
		if _, err := Up(c); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}
