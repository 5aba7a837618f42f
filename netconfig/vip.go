package netconfig

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	"github.com/vishvananda/netlink"
)

// VIP is one service address on the dummy interface, as the announcement
// code sees it in OSPF mode: Up = address present = announced (the local
// routing daemon advertises the interface as an OSPF stub), Down = address
// removed = withdrawn. In BGP mode the same Up makes the kernel accept
// packets for the address while GoBGP announces it.
//
// Up and Down act on the network namespace of the calling thread (see the
// package documentation) and are safe for concurrent use.
type VIP struct {
	iface  string
	prefix netip.Prefix

	mu    sync.Mutex
	up    bool
	local bool // on lo: never created or removed, only the address
}

// NewVIP returns the VIP for prefix p on interface iface (empty:
// DefaultInterface). p is the interface address: 198.18.0.1/32 for a
// regional scheduler (HostPrefix), 198.18.0.1/26 for the center in OSPF mode
// (AggregateAddress).
func NewVIP(iface string, p netip.Prefix) (*VIP, error) {
	iface = Config{Interface: iface}.Name()
	if err := ValidateName(iface); err != nil {
		return nil, err
	}
	p, err := checkPrefix(iface, p)
	if err != nil {
		return nil, err
	}
	return &VIP{iface: iface, prefix: p}, nil
}

// Interface returns the interface name.
func (v *VIP) Interface() string { return v.iface }

// Prefix returns the address with its prefix length.
func (v *VIP) Prefix() netip.Prefix { return v.prefix }

// String is "198.18.0.1/32 on anycast0".
func (v *VIP) String() string { return fmt.Sprintf("%s on %s", v.prefix, v.iface) }

// Up creates and sets up the interface if needed and puts the address on it.
// Idempotent.
func (v *VIP) Up(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("netconfig: add %s: %w", v, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if !v.local {
		if err := EnsureInterface(v.iface); err != nil {
			return err
		}
	}
	if err := AddAddress(v.iface, v.prefix); err != nil {
		return err
	}
	v.up = true
	return nil
}

// Down removes the address (the interface stays, for the next Up).
// Idempotent. After a failed Down the VIP still counts as announced.
func (v *VIP) Down(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("netconfig: remove %s: %w", v, err)
	}
	v.mu.Lock()
	defer v.mu.Unlock()
	if err := RemoveAddress(v.iface, v.prefix); err != nil {
		return err
	}
	v.up = false
	return nil
}

// Announced reports the state of the last successful Up or Down (false
// before the first): whether this process has the address on the interface.
// It does not ask the kernel; Present does.
func (v *VIP) Announced() bool {
	v.mu.Lock()
	defer v.mu.Unlock()
	return v.up
}

// Present asks the kernel whether the address is on the interface now (in
// the calling thread's namespace), e.g. to notice an operator's `ip addr del`.
func (v *VIP) Present() (bool, error) { return HasAddress(v.iface, v.prefix) }

// NewLocalVIP returns the address p on the loopback interface "lo": local
// (the kernel accepts packets for it) but never advertised by the routing
// daemon, which only advertises the dummy interface. In OSPF mode it keeps a
// withdrawing scheduler reachable for the packets still routed to it.
func NewLocalVIP(p netip.Prefix) (*VIP, error) {
	p, err := checkPrefix(LoopbackInterface, p)
	if err != nil {
		return nil, err
	}
	return &VIP{iface: LoopbackInterface, prefix: p, local: true}, nil
}

// LoopbackInterface holds local-only copies of the service address.
const LoopbackInterface = "lo"

// LocalLabel labels the IPv4 copies of the service address on lo.
const LocalLabel = "lo:anysched"

// CleanupLocal removes the local-only service addresses (see NewLocalVIP)
// that a crashed scheduler left on lo: exactly the IPv4 addresses labelled
// LocalLabel, nothing an administrator put there.
func CleanupLocal() error {
	err := withHandle(func(h *netlink.Handle) error {
		link, err := lookup(h, LoopbackInterface)
		if err != nil || link == nil {
			return err
		}
		addrs, err := h.AddrList(link, netlink.FAMILY_V4)
		if err != nil {
			return fmt.Errorf("list addresses: %w", err)
		}
		for _, a := range addrs {
			if a.Label != LocalLabel {
				continue
			}
			if err := h.AddrDel(link, &a); err != nil {
				return fmt.Errorf("remove %s: %w", a.IPNet, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("netconfig: cleanup %s: %w", LoopbackInterface, err)
	}
	return nil
}
