package dnsd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"

	"github.com/miekg/dns"
)

// Run serves UDP (Config.UDPSockets sockets) and TCP on Config.Listen until
// ctx is cancelled, then stops both and returns nil.
func (s *Server) Run(ctx context.Context) error {
	pcs, ln, err := ListenSockets(s.cfg.Listen, s.cfg.UDPSockets)
	if err != nil {
		return err
	}
	return s.ServeSockets(ctx, pcs, ln)
}

// Serve answers on pc (UDP) and ln (TCP) until ctx is cancelled, then shuts
// both down, closes them and returns nil. If either stops by itself, the
// other is shut down too and its error returned.
func (s *Server) Serve(ctx context.Context, pc net.PacketConn, ln net.Listener) error {
	return s.ServeSockets(ctx, []net.PacketConn{pc}, ln)
}

// ServeSockets answers UDP on every socket of pcs, each read by
// Config.UDPReaders goroutines, and TCP on ln, until ctx is cancelled; then
// it shuts all down, closes them, waits for the readers and returns nil. If
// a socket or TCP stops by itself, the rest are shut down and its error
// returned.
func (s *Server) ServeSockets(ctx context.Context, pcs []net.PacketConn, ln net.Listener) error {
	closeAll := func() {
		for _, pc := range pcs {
			pc.Close()
		}
		ln.Close()
	}
	if len(pcs) == 0 {
		closeAll()
		return errors.New("dns: no UDP socket to serve")
	}
	var readers []*udpReader
	for _, pc := range pcs {
		conns, err := batchConns(pc, s.cfg.UDPReaders)
		if err != nil {
			closeAll()
			return fmt.Errorf("dns: %w", err)
		}
		for _, c := range conns {
			readers = append(readers, s.newUDPReader(c, pc.LocalAddr()))
		}
	}

	tcp := &dns.Server{
		Listener: s.tcp.Listener(ln), ReadTimeout: tcpReadTimeout,
		IdleTimeout: func() time.Duration { return tcpIdleTimeout },
		Handler:     s, MsgAcceptFunc: acceptQuery, MsgInvalidFunc: s.invalid,
	}
	tcpStarted, tcpDone := make(chan struct{}), make(chan struct{})
	tcp.NotifyStartedFunc = func() { close(tcpStarted) }
	var tcpErr error
	go func() {
		tcpErr = tcp.ActivateAndServe()
		close(tcpDone)
	}()
	udpStopped := make(chan error, len(readers))
	var wg sync.WaitGroup
	for _, r := range readers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			udpStopped <- r.run()
		}()
	}
	s.log.Info("listening", "udp", pcs[0].LocalAddr().String(), "udp_sockets", len(pcs),
		"udp_readers", len(readers), "tcp", ln.Addr().String())
	// The UDP readers serve from their first read; announce once TCP does.
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		select {
		case <-tcpStarted:
			s.listening.Store(true)
		case <-tcpDone:
		}
	}()

	var failed error
	select {
	case <-ctx.Done():
	case err := <-udpStopped:
		if err == nil {
			err = net.ErrClosed
		}
		failed = fmt.Errorf("dns: udp server stopped: %w", err)
	case <-tcpDone:
		failed = fmt.Errorf("dns: tcp server stopped: %w", tcpErr)
	}
	// Closing a socket ends its readers' reads (a batch in hand is still
	// answered, its write then fails quietly).
	for _, pc := range pcs {
		pc.Close()
	}
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	select {
	case <-tcpStarted: // ShutdownContext before start would be a no-op and leave it running
		if err := tcp.ShutdownContext(sctx); err != nil && failed == nil {
			s.log.Warn("shutdown", "net", "tcp", "err", err)
		}
	case <-tcpDone:
	}
	<-tcpDone
	wg.Wait()
	<-announced
	s.listening.Store(false)
	// miekg closes the listener on shutdown, not when it failed.
	ln.Close()
	s.log.Info("stopped")
	if failed != nil && ctx.Err() == nil {
		return failed
	}
	return nil
}

// acceptQuery replaces miekg's default filter, which would answer bad
// opcodes and question counts itself, without EDNS and unlogged. It only
// drops responses (QR set); every other message that parses reaches ServeDNS,
// which decides, forms and logs every rejection in one place.
func acceptQuery(h dns.Header) dns.MsgAcceptAction {
	const qr = 1 << 15
	if h.Bits&qr != 0 {
		return dns.MsgIgnore
	}
	return dns.MsgAccept
}
