package tunlink

import (
	"net/netip"
	"os"
	"os/exec"
	"testing"
	"time"
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
		fast, slow, err := ConnectRTT("astla", "astlb", "10.200.0.2:7001", 5)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := float64(fast.Microseconds())/1000, float64(slow.Microseconds())/1000
		t.Logf("delay %s: TCP connect round trips %.2f-%.2f ms", tc.delay, lo, hi)
		// The fastest connect says what the link adds; the slowest also
		// says how busy the machine was (the link forwards in user space).
		if lo < tc.min || lo > tc.max {
			t.Errorf("delay %s: fastest round trip %.1f ms, want within [%.0f, %.0f]", tc.delay, lo, tc.min, tc.max)
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
