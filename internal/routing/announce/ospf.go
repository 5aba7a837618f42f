package announce

import (
	"context"
	"errors"
	"fmt"
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
	// ServiceIP: a route shorter than a host route (the center's aggregate)
	// is put on the interface as ServiceIP with that prefix length, so the
	// interface network is the aggregate and the service address is local.
	ServiceIP netip.Addr
	Logger    *slog.Logger

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
			errs = append(errs, err)
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
			a, err := netconfig.AggregateAddress(o.ServiceIP, p)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			addr = a
		}
		v, err := netconfig.NewVIP(o.Interface, addr)
		if err == nil {
			err = v.Up(ctx)
		}
		if err != nil {
			errs = append(errs, fmt.Errorf("announce %s: %w", p, err))
			continue
		}
		o.vips[p] = v
		o.Logger.Info("address added: route announced", "component", "ospf", "address", v)
	}
	return errors.Join(errs...)
}
