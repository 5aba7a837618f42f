package announce

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"sync"

	"github.com/anysched/anysched/netconfig"
)

// OSPF announces by address presence: the route's address on the dummy
// interface, which the local BIRD or FRR advertises as an OSPF stub (see
// deploy/bird and deploy/frr). Removing the address withdraws the route.
// Attributes (MED, communities) have no meaning here and are ignored.
type OSPF struct {
	Interface string
	// ServiceIPs: a route shorter than a host route (the center's
	// aggregate) is put on the interface as the service address it
	// contains (one per family) with that prefix length, so the interface
	// network is the aggregate and the service address is local.
	ServiceIPs []netip.Addr
	Logger     *slog.Logger

	mu   sync.Mutex
	vips map[netip.Prefix]*netconfig.VIP
}

// Run removes every address it put when ctx ends.
func (o *OSPF) Run(ctx context.Context) error {
	<-ctx.Done()
	return o.Set(context.Background(), nil)
}

// Set puts exactly the routes' addresses on the interface.
func (o *OSPF) Set(ctx context.Context, routes map[netip.Prefix]Attrs) error {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.vips == nil {
		o.vips = map[netip.Prefix]*netconfig.VIP{}
	}
	var errs []error
	for p, v := range o.vips {
		if _, keep := routes[p]; keep {
			continue
		}
		if err := v.Down(ctx); err != nil {
			errs = append(errs, &RouteError{Prefix: p, Withdraw: true, Err: err})
			continue
		}
		delete(o.vips, p)
		o.Logger.Info("address removed: route withdrawn", "component", "ospf", "address", v)
	}
	for p := range routes {
		if _, ok := o.vips[p]; ok {
			continue
		}
		addr := p
		if p.Bits() < p.Addr().BitLen() {
			ip := netip.Addr{}
			for _, s := range o.ServiceIPs {
				if p.Contains(s) {
					ip = s
				}
			}
			a, err := netconfig.AggregateAddress(ip, p)
			if err != nil {
				errs = append(errs, &RouteError{Prefix: p, Err: err})
				continue
			}
			addr = a
		}
		v, err := netconfig.NewVIP(o.Interface, addr)
		if err == nil {
			err = v.Up(ctx)
		}
		if err != nil {
			errs = append(errs, &RouteError{Prefix: p, Err: err})
			continue
		}
		o.vips[p] = v
		o.Logger.Info("address added: route announced", "component", "ospf", "address", v)
	}
	return errors.Join(errs...)
}
