package app

import (
	"context"
	"fmt"
	"net"

	"github.com/anysched/anysched/internal/stb/certstore"
	"github.com/anysched/anysched/internal/stb/dnsd"
	"github.com/anysched/anysched/internal/stb/netutil"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
)

// bound holds a scheduler's sockets. They are bound before anything
// serves, so a port in use fails the start instead of a component later,
// and so that the addresses are known (port 0) before they are published.
type bound struct {
	admin, http net.Listener
	https       net.Listener     // TCP; TLS is layered when serving
	dnsUDP      []net.PacketConn // SO_REUSEPORT sockets of one port (dns.udp_sockets)
	dnsTCP      net.Listener
}

// Listen binds the admin, HTTP and DNS listeners the configuration asks
// for; CloseListeners releases them if the start fails after.
func (s *Scheduler) Listen() (daemon.Listeners, error) {
	var l daemon.Listeners
	if s.accessErr != nil {
		return l, s.accessErr
	}
	if s.policyErr != nil {
		return l, s.policyErr
	}
	var err error
	b := &s.bound
	if a := s.common.Admin.Listen; a != "" {
		if s.Admin.TLS, err = daemon.AdminTLS(s.common.Admin); err != nil {
			return l, err
		}
		if b.admin, err = net.Listen("tcp", a); err != nil {
			return l, fmt.Errorf("admin listener: %w", err)
		}
		l.Admin = b.admin.Addr().String()
	}
	if a := s.common.HTTP.Listen; a != "" {
		if b.http, err = netutil.Listen("tcp", a); err != nil {
			b.close()
			return l, fmt.Errorf("http listener: %w", err)
		}
		l.HTTP = b.http.Addr().String()
	}
	if c := s.common.HTTPS; c.Listen != "" {
		if s.certs, err = s.certStore(c); err != nil {
			b.close()
			return l, err
		}
		if b.https, err = netutil.Listen("tcp", c.Listen); err != nil {
			b.close()
			return l, fmt.Errorf("https listener: %w", err)
		}
		l.HTTPS = b.https.Addr().String()
	}
	if a := s.common.DNS.Listen; a != "" {
		if b.dnsUDP, b.dnsTCP, err = dnsd.ListenSockets(a, s.common.DNS.UDPSockets); err != nil {
			b.close()
			return l, err
		}
		l.DNS = b.dnsUDP[0].LocalAddr().String()
	}
	s.listeners = l
	return l, nil
}

// certStore loads the STB-facing HTTPS certificates (https.certificates);
// a file that does not load is a configuration error.
func (s *Scheduler) certStore(c config.HTTPS) (*certstore.Store, error) {
	pairs := make([]certstore.Pair, len(c.Certificates))
	for i, cf := range c.Certificates {
		pairs[i] = certstore.Pair{CertFile: cf.CertFile, KeyFile: cf.KeyFile}
	}
	cs, err := certstore.New(certstore.Options{
		Pairs: pairs, ReloadInterval: c.ReloadInterval, TicketRotation: c.TicketRotation, TicketKeys: c.TicketKeys,
		Logger: s.Logger.With("component", "certstore"), Registerer: s.Registry,
	})
	if err != nil {
		return nil, &daemon.ConfigError{Err: fmt.Errorf("https.certificates: %w", err)}
	}
	return cs, nil
}

// CloseListeners releases whatever Listen bound (a failed start; serving
// closes them itself).
func (s *Scheduler) CloseListeners() { s.bound.close() }

func (b *bound) close() {
	for _, pc := range b.dnsUDP {
		_ = pc.Close()
	}
	for _, c := range []interface{ Close() error }{b.admin, b.http, b.https, b.dnsTCP} {
		if c != nil { // an unset interface field converts to a nil interface
			_ = c.Close()
		}
	}
}

// serveAdmin serves the admin listener, or waits when there is none.
func (s *Scheduler) serveAdmin(ctx context.Context) error {
	if s.bound.admin == nil {
		<-ctx.Done()
		return nil
	}
	return s.Admin.Serve(ctx, s.bound.admin)
}
