// Package netconfig puts the Anycast service address on a dummy interface
// with netlink, the Linux half of the OSPF announcement mode and the local
// delivery half of the BGP mode: a regional scheduler puts the service IP as
// a /32 on anycast0, the central scheduler the service IP with the center
// prefix's length (198.18.0.1/26), and the local BIRD or FRR advertises
// anycast0 as an OSPF stub, so "address present" means "announced" and
// removing the address withdraws the route.
//
// Every operation is idempotent (adding a present address, removing an absent
// one, creating an existing dummy interface or cleaning up a missing one all
// succeed) and acts on the network namespace of the calling OS thread: each
// call locks its goroutine to the thread for its duration and opens its own
// netlink socket there, so a caller that has switched a locked thread into a
// namespace (netns.Set, netns.New) configures that namespace, and every other
// caller configures the process's namespace.
package netconfig

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"slices"
	"strings"
	"time"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// DefaultInterface is the dummy interface that carries the service address
// when Config.Interface is empty.
const DefaultInterface = "anycast0"

// Config is the daemons' anycast interface setting (anycast.interface).
type Config struct {
	// Interface is the dummy interface's name; empty means DefaultInterface.
	Interface string `yaml:"interface" json:"interface"`
}

// Name returns the interface name with the default applied.
func (c Config) Name() string {
	if c.Interface == "" {
		return DefaultInterface
	}
	return c.Interface
}

// Validate checks the interface name (after the default).
func (c Config) Validate() error { return ValidateName(c.Name()) }

var (
	// ErrNoInterface is wrapped by the errors of operations that need the
	// interface to exist (AddAddress, Addresses).
	ErrNoInterface = errors.New("no such interface")
	// ErrNotDummy is wrapped when an interface of the wanted name exists but
	// is not a dummy interface (nor an ifb, the stand-in on kernels without
	// the dummy driver), so it is not ours to set up or delete.
	ErrNotDummy = errors.New("not a dummy interface")
)

// opTimeout bounds one netlink request, so a wedged kernel call surfaces as
// an error instead of hanging the announcement loop.
const opTimeout = 5 * time.Second

// ValidateName checks that name is a usable Linux interface name.
func ValidateName(name string) error {
	switch {
	case name == "":
		return errors.New("netconfig: interface name is empty")
	case len(name) >= unix.IFNAMSIZ:
		return fmt.Errorf("netconfig: interface name %q is longer than %d bytes", name, unix.IFNAMSIZ-1)
	case name == "." || name == "..":
		return fmt.Errorf("netconfig: interface name %q is not allowed", name)
	case strings.ContainsAny(name, "/: \t\n\r\x00"):
		return fmt.Errorf("netconfig: interface name %q contains '/', ':' or white space", name)
	}
	return nil
}

// HostPrefix returns addr as a host route (/32 or /128): the prefix a
// regional scheduler puts on the interface.
func HostPrefix(addr netip.Addr) netip.Prefix {
	addr = addr.Unmap()
	return netip.PrefixFrom(addr, addr.BitLen())
}

// AggregateAddress returns the service address with the aggregate's prefix
// length (198.18.0.1 in 198.18.0.0/26 -> 198.18.0.1/26): what the central
// scheduler puts on the interface in OSPF mode, so the kernel's connected
// route and the OSPF stub are the aggregate itself, present exactly while the
// address is.
func AggregateAddress(serviceIP netip.Addr, aggregate netip.Prefix) (netip.Prefix, error) {
	serviceIP = serviceIP.Unmap()
	if !serviceIP.IsValid() || !aggregate.IsValid() {
		return netip.Prefix{}, fmt.Errorf("netconfig: invalid service address %v or aggregate %v", serviceIP, aggregate)
	}
	if !aggregate.Contains(serviceIP) {
		return netip.Prefix{}, fmt.Errorf("netconfig: aggregate %s does not contain service address %s", aggregate, serviceIP)
	}
	return netip.PrefixFrom(serviceIP, aggregate.Bits()), nil
}

// checkPrefix validates an interface address: a valid prefix whose address
// is a usable unicast address (its host bits identify the address, so
// 198.18.0.1/26 is the address .1 with a /26 connected route).
func checkPrefix(name string, p netip.Prefix) (netip.Prefix, error) {
	if !p.IsValid() {
		return p, fmt.Errorf("netconfig: interface %s: invalid address %v", name, p)
	}
	if a := p.Addr(); a.Is4In6() {
		if p.Bits() < 96 {
			return p, fmt.Errorf("netconfig: interface %s: invalid address %v", name, p)
		}
		p = netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	a := p.Addr()
	if a.IsUnspecified() || a.IsMulticast() || a.IsLoopback() || a.Zone() != "" {
		return p, fmt.Errorf("netconfig: interface %s: %s is not a unicast address", name, p)
	}
	if a.Is4() && p.Bits() <= 30 && p.Masked().Addr() == a {
		// 198.18.0.0/26 would put .0 on the interface, not the service IP.
		return p, fmt.Errorf("netconfig: interface %s: %s is a network address, not an interface address (for the center use the service IP with the prefix length, see AggregateAddress)", name, p)
	}
	if a.Is6() && a.IsLinkLocalUnicast() {
		return p, fmt.Errorf("netconfig: interface %s: %s is an IPv6 link-local address (managed by the kernel)", name, p)
	}
	return p, nil
}

// withHandle runs fn with a netlink route socket opened in the namespace of
// the current thread, with the goroutine locked to that thread meanwhile.
func withHandle(fn func(h *netlink.Handle) error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	h, err := netlink.NewHandle(unix.NETLINK_ROUTE)
	if err != nil {
		return fmt.Errorf("open netlink socket: %w", err)
	}
	defer h.Close()
	if err := h.SetSocketTimeout(opTimeout); err != nil {
		return fmt.Errorf("netlink socket timeout: %w", err)
	}
	return fn(h)
}

// lookup returns the link called name, or (nil, nil) when there is none.
func lookup(h *netlink.Handle, name string) (netlink.Link, error) {
	link, err := h.LinkByName(name)
	if err != nil {
		var nf netlink.LinkNotFoundError
		if errors.As(err, &nf) || errors.Is(err, unix.ENODEV) {
			return nil, nil
		}
		return nil, err
	}
	return link, nil
}

// isDummy reports whether link is of a kind this package creates: dummy,
// or ifb where the kernel has no dummy driver. Both are BROADCAST,NOARP
// devices that are up with carrier as soon as they are set up, hold
// addresses, and transmit nothing anywhere.
func isDummy(link netlink.Link) bool { return link.Type() == "dummy" || link.Type() == "ifb" }

// EnsureInterface creates the dummy interface name if it does not exist and
// sets it up. An existing dummy interface is only set up; an existing
// interface of another type is an error wrapping ErrNotDummy. On a kernel
// built without the dummy driver (CONFIG_DUMMY unset; creating one fails with
// EOPNOTSUPP) it creates an ifb device instead, which serves the same
// purpose: an always-up, carrier-on interface that holds the address.
func EnsureInterface(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	err := withHandle(func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if err != nil {
			return err
		}
		if link == nil {
			attrs := netlink.LinkAttrs{Name: name}
			err := h.LinkAdd(&netlink.Dummy{LinkAttrs: attrs})
			if errors.Is(err, unix.EOPNOTSUPP) {
				// Kernel built without CONFIG_DUMMY (some VM kernels):
				// an ifb device behaves the same for us.
				err = h.LinkAdd(&netlink.Ifb{LinkAttrs: attrs})
			}
			if err != nil && !errors.Is(err, unix.EEXIST) {
				return fmt.Errorf("create dummy interface: %w", err)
			}
			// Created by us, or by a concurrent caller in between.
			if link, err = lookup(h, name); err != nil {
				return err
			}
			if link == nil {
				return fmt.Errorf("created but not found: %w", ErrNoInterface)
			}
		}
		if !isDummy(link) {
			return fmt.Errorf("exists as a %q interface, refusing to use it: %w", link.Type(), ErrNotDummy)
		}
		if link.Attrs().Flags&net.FlagUp == 0 {
			if err := h.LinkSetUp(link); err != nil {
				return fmt.Errorf("set up: %w", err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netconfig: interface %s: %w", name, err)
	}
	return nil
}

// Cleanup deletes the dummy interface name with all its addresses: what a
// crashed daemon left behind. A missing interface is fine; an interface of
// another type is left alone and reported (ErrNotDummy).
func Cleanup(name string) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	err := withHandle(func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if err != nil || link == nil {
			return err
		}
		if !isDummy(link) {
			return fmt.Errorf("is a %q interface, not deleting it: %w", link.Type(), ErrNotDummy)
		}
		if err := h.LinkDel(link); err != nil && !errors.Is(err, unix.ENODEV) {
			return fmt.Errorf("delete: %w", err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netconfig: cleanup interface %s: %w", name, err)
	}
	return nil
}

func toAddr(p netip.Prefix) *netlink.Addr {
	a := &netlink.Addr{IPNet: &net.IPNet{
		IP:   net.IP(p.Addr().AsSlice()),
		Mask: net.CIDRMask(p.Bits(), p.Addr().BitLen()),
	}}
	if p.Addr().Is6() {
		// No duplicate address detection: the address is anycast by design
		// and must be usable at once.
		a.Flags = unix.IFA_F_NODAD
	}
	return a
}

func fromAddr(a netlink.Addr) (netip.Prefix, bool) {
	if a.IPNet == nil {
		return netip.Prefix{}, false
	}
	ip, ok := netip.AddrFromSlice(a.IP)
	if !ok {
		return netip.Prefix{}, false
	}
	ones, _ := a.Mask.Size()
	return netip.PrefixFrom(ip.Unmap(), ones), true
}

// list returns the link's addresses, retrying a dump the kernel reported as
// interrupted by a concurrent change.
func list(h *netlink.Handle, link netlink.Link) ([]netip.Prefix, error) {
	var addrs []netlink.Addr
	var err error
	for range 5 {
		addrs, err = h.AddrList(link, netlink.FAMILY_ALL)
		if !errors.Is(err, netlink.ErrDumpInterrupted) {
			break
		}
	}
	if err != nil {
		return nil, fmt.Errorf("list addresses: %w", err)
	}
	out := make([]netip.Prefix, 0, len(addrs))
	for _, a := range addrs {
		p, ok := fromAddr(a)
		if !ok || (p.Addr().Is6() && p.Addr().IsLinkLocalUnicast()) {
			continue
		}
		out = append(out, p)
	}
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Addr().Compare(b.Addr()); c != 0 {
			return c
		}
		return a.Bits() - b.Bits()
	})
	return out, nil
}

// Addresses lists the interface's addresses (IPv4 and IPv6, without the
// kernel's automatic IPv6 link-local ones), sorted. A missing interface is an
// error wrapping ErrNoInterface.
func Addresses(name string) ([]netip.Prefix, error) {
	if err := ValidateName(name); err != nil {
		return nil, err
	}
	var out []netip.Prefix
	err := withHandle(func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if err != nil {
			return err
		}
		if link == nil {
			return ErrNoInterface
		}
		out, err = list(h, link)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("netconfig: interface %s: %w", name, err)
	}
	return out, nil
}

// HasAddress reports whether the interface carries p (same address and
// prefix length). A missing interface carries nothing: false, nil.
func HasAddress(name string, p netip.Prefix) (bool, error) {
	if err := ValidateName(name); err != nil {
		return false, err
	}
	p, err := checkPrefix(name, p)
	if err != nil {
		return false, err
	}
	var has bool
	err = withHandle(func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if err != nil || link == nil {
			return err
		}
		addrs, err := list(h, link)
		has = slices.Contains(addrs, p)
		return err
	})
	if err != nil {
		return false, fmt.Errorf("netconfig: interface %s: look for %s: %w", name, p, err)
	}
	return has, nil
}

// AddAddress puts p on the interface; an address already present is fine.
// The interface must exist (EnsureInterface): otherwise the error wraps
// ErrNoInterface.
func AddAddress(name string, p netip.Prefix) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	p, err := checkPrefix(name, p)
	if err != nil {
		return err
	}
	err = withHandle(func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if err != nil {
			return err
		}
		if link == nil {
			return ErrNoInterface
		}
		a := toAddr(p)
		if name == LoopbackInterface && p.Addr().Is4() {
			a.Label = LocalLabel // marks the copies CleanupLocal may remove
		}
		if err := h.AddrAdd(link, a); err != nil && !errors.Is(err, unix.EEXIST) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netconfig: add %s to interface %s: %w", p, name, err)
	}
	return nil
}

// RemoveAddress takes p off the interface; an absent address or interface is
// fine.
func RemoveAddress(name string, p netip.Prefix) error {
	if err := ValidateName(name); err != nil {
		return err
	}
	p, err := checkPrefix(name, p)
	if err != nil {
		return err
	}
	err = withHandle(func(h *netlink.Handle) error {
		link, err := lookup(h, name)
		if err != nil || link == nil {
			return err
		}
		err = h.AddrDel(link, toAddr(p))
		if err != nil && !errors.Is(err, unix.EADDRNOTAVAIL) && !errors.Is(err, unix.ENODEV) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netconfig: remove %s from interface %s: %w", p, name, err)
	}
	return nil
}
