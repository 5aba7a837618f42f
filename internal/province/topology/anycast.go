package topology

import (
	"cmp"
	"fmt"
	"net/netip"
)

// The shortest aggregate a center may announce by default: a covering
// prefix this wide already takes an operator's whole address block; anything
// wider (a /0 in OSPF mode, say) would pull traffic that is not the province's.
const (
	MinCenterPrefixBits4 = 16
	MinCenterPrefixBits6 = 48
)

// Limits are the route-safety limits a province configures
// (anycast.center_prefix_min_length on both schedulers); the zero value
// means the defaults.
type Limits struct {
	CenterPrefixMinBits4 int // 8..32; 0: MinCenterPrefixBits4
	CenterPrefixMinBits6 int // 16..128; 0: MinCenterPrefixBits6
}

// DefaultLimits are the limits Validate, Compile and CheckAnnounced apply.
var DefaultLimits = Limits{CenterPrefixMinBits4: MinCenterPrefixBits4, CenterPrefixMinBits6: MinCenterPrefixBits6}

// LoosestLimits are the loosest limits a province may configure, for
// daemons that compile topologies but announce nothing.
var LoosestLimits = Limits{CenterPrefixMinBits4: 8, CenterPrefixMinBits6: 16}

// minBits is the shortest center prefix allowed for p's family.
func (l Limits) minBits(p netip.Prefix) int {
	if p.Addr().Is6() {
		return cmp.Or(l.CenterPrefixMinBits6, MinCenterPrefixBits6)
	}
	return cmp.Or(l.CenterPrefixMinBits4, MinCenterPrefixBits4)
}

// CheckServiceIP says why ip may not be the Anycast service address: it
// must be a global or private unicast host address, never unspecified,
// loopback, link-local, multicast or the broadcast address, since routers
// would carry it to every city.
func CheckServiceIP(ip netip.Addr) error {
	if !ip.IsGlobalUnicast() {
		return fmt.Errorf("%s is not a unicast host address (unspecified, loopback, link-local, multicast and broadcast addresses cannot be announced)", ip)
	}
	return nil
}

// CheckCenterPrefix says why p may not be the center's aggregate for
// service IP ip under the default limits.
func CheckCenterPrefix(p netip.Prefix, ip netip.Addr) error {
	return DefaultLimits.CheckCenterPrefix(p, ip)
}

// CheckCenterPrefix says why p may not be the center's aggregate for
// service IP ip: it must contain ip, be no shorter than l allows, and not
// be a host route.
func (l Limits) CheckCenterPrefix(p netip.Prefix, ip netip.Addr) error {
	min := l.minBits(p)
	switch {
	case p.Bits() == p.Addr().BitLen():
		return fmt.Errorf("%s is a host route; the center must announce a covering aggregate", p)
	case p.Bits() < min:
		return fmt.Errorf("%s is shorter than /%d: the center would announce more than the province's addresses", p, min)
	case ip.IsValid() && !p.Contains(ip):
		return fmt.Errorf("%s does not contain the service address %s, so routers could not fall back to the center", p, ip)
	}
	return nil
}

// CheckAnnounced is CheckAnnounced under the default limits.
func CheckAnnounced(p netip.Prefix, ip netip.Addr) error {
	return DefaultLimits.CheckAnnounced(p, ip)
}

// CheckAnnounced is the last line before a route reaches a router: a
// scheduler announces only the service /32 (/128) or the center's
// aggregate that CheckServiceIP and l.CheckCenterPrefix accept.
func (l Limits) CheckAnnounced(p netip.Prefix, ip netip.Addr) error {
	if err := CheckServiceIP(ip); err != nil {
		return fmt.Errorf("topology: refusing to announce %s: %w", p, err)
	}
	if p.Bits() == p.Addr().BitLen() {
		if p.Addr() != ip {
			return fmt.Errorf("topology: refusing to announce %s: a host route other than the service address %s", p, ip)
		}
		return nil
	}
	if err := l.CheckCenterPrefix(p, ip); err != nil {
		return fmt.Errorf("topology: refusing to announce %s: %w", p, err)
	}
	return nil
}
