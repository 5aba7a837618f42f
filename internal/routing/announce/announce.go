// Package announce makes the Anycast address reachable: it announces the
// service /32 (regional scheduler) or the center's aggregate (central
// scheduler) while the scheduler is ready, withdraws it when it is not, and
// stops gracefully. Two speakers sit behind one desired-state interface: BGP
// (an embedded GoBGP) and OSPF (the address on a dummy interface, which a
// local BIRD or FRR advertises as a stub).
package announce

import (
	"context"
	"net/netip"
	"slices"
)

// GracefulShutdown is the well-known community of RFC 8326 (65535:0):
// routers lower the route's preference before it is withdrawn.
const GracefulShutdown uint32 = 0xFFFF0000

// Attrs are a route's attributes.
type Attrs struct {
	MED         uint32
	Communities []uint32
	Prepend     int // extra copies of the local ASN (a standby announces a longer path)
}

// Equal compares attributes.
func (a Attrs) Equal(b Attrs) bool {
	return a.MED == b.MED && a.Prepend == b.Prepend && slices.Equal(a.Communities, b.Communities)
}

// With returns a copy with community c added.
func (a Attrs) With(c uint32) Attrs {
	if slices.Contains(a.Communities, c) {
		return a
	}
	a.Communities = append(slices.Clone(a.Communities), c)
	return a
}

// Speaker announces exactly the routes it is given (MetalLB's desired-state
// Set): an empty map withdraws everything.
type Speaker interface {
	Set(ctx context.Context, routes map[netip.Prefix]Attrs) error
	Run(ctx context.Context) error
}
