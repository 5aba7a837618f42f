package netconfig

import (
	"context"
	"errors"
	"net/netip"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netns"
)

// inNewNetns skips unless the test runs as root with iproute2, then locks the
// test goroutine to its thread and moves that thread into a fresh network
// namespace for the rest of the test. Cleanup restores the original
// namespace; if that fails the thread stays locked, so the runtime discards
// it when the test goroutine ends instead of reusing a thread in a stray
// namespace. Nothing here touches the host namespace's interfaces.
//
// Everything the test does with netconfig must run on the test goroutine
// itself (no t.Run subtests, no goroutines): other threads are not in the
// new namespace.
func inNewNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root (network namespaces)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		t.Skip("needs iproute2's ip")
	}
	runtime.LockOSThread()
	orig, err := netns.Get()
	if err != nil {
		runtime.UnlockOSThread()
		t.Fatalf("current netns: %v", err)
	}
	ns, err := netns.New()
	if err != nil {
		orig.Close()
		runtime.UnlockOSThread()
		t.Fatalf("new netns: %v", err)
	}
	t.Cleanup(func() {
		ns.Close()
		if err := netns.Set(orig); err != nil {
			orig.Close()
			t.Errorf("restore netns: %v (thread left locked and discarded)", err)
			return
		}
		orig.Close()
		runtime.UnlockOSThread()
	})
	// Sanity: a fresh namespace has only lo.
	out := ipCmd(t, "-o", "link", "show")
	if n := strings.Count(strings.TrimSpace(out), "\n") + 1; n != 1 || !strings.Contains(out, "lo:") {
		t.Fatalf("not in a fresh namespace, links:\n%s", out)
	}
}

// ipCmd runs iproute2 in the test's namespace (children inherit the locked
// thread's namespace).
func ipCmd(t *testing.T, args ...string) string {
	t.Helper()
	out, err := exec.Command("ip", args...).CombinedOutput()
	if err != nil {
		t.Fatalf("ip %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func mustHave(t *testing.T, name string, p netip.Prefix, want bool) {
	t.Helper()
	got, err := HasAddress(name, p)
	if err != nil {
		t.Fatalf("HasAddress(%s, %s): %v", name, p, err)
	}
	if got != want {
		t.Fatalf("HasAddress(%s, %s) = %v, want %v", name, p, got, want)
	}
	// Cross-check with iproute2.
	out, _ := exec.Command("ip", "-o", "addr", "show", "dev", name).CombinedOutput()
	if strings.Contains(string(out), " "+p.String()+" ") != want {
		t.Fatalf("ip addr show dev %s disagrees (want %s present=%v):\n%s", name, p, want, out)
	}
}

var (
	v4   = netip.MustParsePrefix("198.18.0.1/32")
	v4ag = netip.MustParsePrefix("198.18.0.1/26")
	v6   = netip.MustParsePrefix("2001:db8::1/128")
)

func TestPrivilegedEnsureInterface(t *testing.T) {
	inNewNetns(t)
	const name = "anycast0"
	for i := range 3 { // idempotent
		if err := EnsureInterface(name); err != nil {
			t.Fatalf("EnsureInterface #%d: %v", i, err)
		}
	}
	out := ipCmd(t, "-d", "-o", "link", "show", "dev", name)
	if !(strings.Contains(out, " dummy ") || strings.Contains(out, " ifb ")) || !strings.Contains(out, ",UP") {
		t.Fatalf("want an up dummy interface, got:\n%s", out)
	}
	// Someone set it down: EnsureInterface sets it up again.
	ipCmd(t, "link", "set", "dev", name, "down")
	if err := EnsureInterface(name); err != nil {
		t.Fatal(err)
	}
	if out := ipCmd(t, "-o", "link", "show", "dev", name); !strings.Contains(out, ",UP") {
		t.Fatalf("not up again:\n%s", out)
	}
	addrs, err := Addresses(name)
	if err != nil || len(addrs) != 0 {
		t.Fatalf("fresh interface: Addresses = %v, %v; want none", addrs, err)
	}
}

func TestPrivilegedEnsureInterfaceNotDummy(t *testing.T) {
	inNewNetns(t)
	const name = "anycast0"
	ipCmd(t, "link", "add", name, "type", "bridge")
	err := EnsureInterface(name)
	if err == nil {
		t.Fatal("EnsureInterface on an existing bridge succeeded")
	}
	if !errors.Is(err, ErrNotDummy) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), "bridge") {
		t.Fatalf("error should wrap ErrNotDummy and name the interface and its type: %v", err)
	}
	// Cleanup must not delete somebody else's interface either.
	if err := Cleanup(name); !errors.Is(err, ErrNotDummy) {
		t.Fatalf("Cleanup of a bridge: %v, want ErrNotDummy", err)
	}
	ipCmd(t, "link", "show", "dev", name) // still there
	// A VIP on it fails in Up, naming the interface.
	vip, err := NewVIP(name, v4)
	if err != nil {
		t.Fatal(err)
	}
	if err := vip.Up(context.Background()); !errors.Is(err, ErrNotDummy) || vip.Announced() {
		t.Fatalf("VIP.Up on a bridge: %v, announced=%v", err, vip.Announced())
	}
}

func TestPrivilegedAddRemoveAddress(t *testing.T) {
	inNewNetns(t)
	const name = "anycast0"
	// No interface yet: add fails clearly, has/remove are fine.
	err := AddAddress(name, v4)
	if !errors.Is(err, ErrNoInterface) || !strings.Contains(err.Error(), name) || !strings.Contains(err.Error(), v4.String()) {
		t.Fatalf("AddAddress without interface: %v", err)
	}
	if err := RemoveAddress(name, v4); err != nil {
		t.Fatalf("RemoveAddress without interface: %v", err)
	}
	if has, err := HasAddress(name, v4); has || err != nil {
		t.Fatalf("HasAddress without interface = %v, %v", has, err)
	}
	if _, err := Addresses(name); !errors.Is(err, ErrNoInterface) {
		t.Fatalf("Addresses without interface: %v", err)
	}

	if err := EnsureInterface(name); err != nil {
		t.Fatal(err)
	}
	for _, p := range []netip.Prefix{v4, v4, v4ag, v6, v6} { // repeated adds are fine
		if err := AddAddress(name, p); err != nil {
			t.Fatalf("AddAddress(%s): %v", p, err)
		}
	}
	mustHave(t, name, v4, true)
	mustHave(t, name, v4ag, true)
	mustHave(t, name, v6, true)
	mustHave(t, name, netip.MustParsePrefix("198.18.0.2/32"), false)
	got, err := Addresses(name)
	if err != nil {
		t.Fatal(err)
	}
	if want := []netip.Prefix{v4ag, v4, v6}; !slices.Equal(got, want) {
		t.Fatalf("Addresses = %v, want %v", got, want)
	}
	// The kernel routes the aggregate to the dummy interface.
	if out := ipCmd(t, "-4", "route", "show", "dev", name); !strings.Contains(out, "198.18.0.0/26") {
		t.Fatalf("no connected /26:\n%s", out)
	}

	for _, p := range []netip.Prefix{v4, v4, v6, v6} { // repeated removes are fine
		if err := RemoveAddress(name, p); err != nil {
			t.Fatalf("RemoveAddress(%s): %v", p, err)
		}
	}
	mustHave(t, name, v4, false)
	mustHave(t, name, v6, false)
	mustHave(t, name, v4ag, true) // same IP, other length: a different address
	if got, _ := Addresses(name); !slices.Equal(got, []netip.Prefix{v4ag}) {
		t.Fatalf("Addresses after removes = %v", got)
	}

	// Invalid input names the interface.
	for _, p := range []netip.Prefix{{}, netip.MustParsePrefix("224.0.0.1/32"), netip.MustParsePrefix("fe80::1/64"), netip.MustParsePrefix("0.0.0.0/0")} {
		if err := AddAddress(name, p); err == nil || !strings.Contains(err.Error(), name) {
			t.Errorf("AddAddress(%v) = %v, want an error naming %s", p, err, name)
		}
	}
}

func TestPrivilegedCleanup(t *testing.T) {
	inNewNetns(t)
	const name = "anycast0"
	if err := Cleanup(name); err != nil { // nothing there
		t.Fatalf("Cleanup without interface: %v", err)
	}
	// What a crashed daemon leaves: the interface with its address.
	if err := EnsureInterface(name); err != nil {
		t.Fatal(err)
	}
	if err := AddAddress(name, v4); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := Cleanup(name); err != nil {
			t.Fatalf("Cleanup #%d: %v", i, err)
		}
	}
	if out, err := exec.Command("ip", "link", "show", "dev", name).CombinedOutput(); err == nil {
		t.Fatalf("interface still there:\n%s", out)
	}
	if out := ipCmd(t, "-4", "route", "show", "table", "local"); strings.Contains(out, "198.18.0.1") {
		t.Fatalf("local route left behind:\n%s", out)
	}
	// And it can be created again.
	if err := EnsureInterface(name); err != nil {
		t.Fatal(err)
	}
}

func TestPrivilegedVIP(t *testing.T) {
	inNewNetns(t)
	ctx := context.Background()
	vip, err := NewVIP("", v4) // default interface
	if err != nil {
		t.Fatal(err)
	}
	if vip.Interface() != DefaultInterface || vip.Announced() {
		t.Fatalf("new VIP: %s announced=%v", vip, vip.Announced())
	}
	for range 2 {
		if err := vip.Up(ctx); err != nil {
			t.Fatal(err)
		}
		if !vip.Announced() {
			t.Fatal("not announced after Up")
		}
		mustHave(t, DefaultInterface, v4, true)
	}
	// The kernel accepts packets for it.
	if out := ipCmd(t, "route", "get", "198.18.0.1"); !strings.HasPrefix(out, "local 198.18.0.1") {
		t.Fatalf("route get: %s", out)
	}
	// Removed behind our back: Present sees it, Announced is our own state.
	ipCmd(t, "addr", "del", v4.String(), "dev", DefaultInterface)
	if p, err := vip.Present(); p || err != nil || !vip.Announced() {
		t.Fatalf("Present=%v,%v Announced=%v", p, err, vip.Announced())
	}
	if err := vip.Up(ctx); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := vip.Down(ctx); err != nil {
			t.Fatal(err)
		}
		if vip.Announced() {
			t.Fatal("announced after Down")
		}
		mustHave(t, DefaultInterface, v4, false)
	}
	ipCmd(t, "link", "show", "dev", DefaultInterface) // Down keeps the interface
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := vip.Up(cctx); !errors.Is(err, context.Canceled) || vip.Announced() {
		t.Fatalf("Up with a cancelled context: %v", err)
	}
}

func TestConfigAndHelpers(t *testing.T) {
	if got := (Config{}).Name(); got != "anycast0" {
		t.Fatalf("default name %q", got)
	}
	if got := (Config{Interface: "vip1"}).Name(); got != "vip1" {
		t.Fatalf("name %q", got)
	}
	for _, bad := range []string{"a/b", "has space", "waytoolonginterfacename", ".", "a:b"} {
		if err := (Config{Interface: bad}).Validate(); err == nil {
			t.Errorf("Validate(%q) = nil", bad)
		}
		if _, err := NewVIP(bad, v4); err == nil {
			t.Errorf("NewVIP(%q) = nil error", bad)
		}
		if err := EnsureInterface(bad); err == nil {
			t.Errorf("EnsureInterface(%q) = nil", bad)
		}
	}
	if _, err := NewVIP("", netip.MustParsePrefix("198.18.0.0/26")); err == nil || !strings.Contains(err.Error(), "AggregateAddress") {
		t.Errorf("NewVIP with the center prefix itself: %v", err)
	}
	if _, err := NewVIP("", netip.Prefix{}); err == nil {
		t.Error("NewVIP with an invalid prefix succeeded")
	}
	if got := HostPrefix(netip.MustParseAddr("198.18.0.1")); got != v4 {
		t.Errorf("HostPrefix = %s", got)
	}
	if got := HostPrefix(netip.MustParseAddr("2001:db8::1")); got != v6 {
		t.Errorf("HostPrefix v6 = %s", got)
	}
	got, err := AggregateAddress(netip.MustParseAddr("198.18.0.1"), netip.MustParsePrefix("198.18.0.0/26"))
	if err != nil || got != v4ag {
		t.Errorf("AggregateAddress = %s, %v", got, err)
	}
	if _, err := AggregateAddress(netip.MustParseAddr("198.18.1.1"), netip.MustParsePrefix("198.18.0.0/26")); err == nil {
		t.Error("AggregateAddress outside the aggregate succeeded")
	}
	vip, err := NewVIP("", netip.MustParsePrefix("::ffff:198.18.0.1/128"))
	if err != nil || vip.Prefix() != v4 {
		t.Errorf("4in6 VIP = %v, %v", vip, err)
	}
}

func TestPrivilegedLocalVIPAndCleanupLocal(t *testing.T) {
	inNewNetns(t)
	p := netip.MustParsePrefix("198.18.0.1/32")
	v, err := NewLocalVIP(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Up(context.Background()); err != nil {
		t.Fatal(err)
	}
	mustHave(t, LoopbackInterface, p, true)
	// An administrator's own address on lo is not ours to remove.
	theirs := netip.MustParsePrefix("192.0.2.9/32")
	ipCmd(t, "addr", "add", theirs.String(), "dev", "lo")
	if err := CleanupLocal(); err != nil {
		t.Fatal(err)
	}
	mustHave(t, LoopbackInterface, p, false)
	mustHave(t, LoopbackInterface, theirs, true)
}
