package lab

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"
	"time"
)

// etcdProxy6 is where an IPv6-only city's schedulers reach the center's
// embedded etcd, which listens on 10.0.0.2 only: `lab tcp-proxy` in the
// center's namespace relays the TLS bytes, untouched, to it.
const etcdProxy6 = "[fd00:0:1::2]:2379"

// RunTCPProxy relays every TCP connection accepted on listen to to, both
// ways, until ctx ends (bin/lab tcp-proxy). It holds nothing but the bytes
// in flight.
func RunTCPProxy(ctx context.Context, listen, to string) error {
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", listen)
	if err != nil {
		return err
	}
	go func() { <-ctx.Done(); ln.Close() }()
	var wg sync.WaitGroup
	defer wg.Wait()
	for {
		c, err := ln.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				return nil
			}
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			d, err := (&net.Dialer{Timeout: 5 * time.Second}).DialContext(ctx, "tcp", to)
			if err != nil {
				return
			}
			defer d.Close()
			done := make(chan struct{}, 2)
			relay := func(dst, src net.Conn) {
				_, _ = io.Copy(dst, src)
				if tc, ok := dst.(*net.TCPConn); ok {
					_ = tc.CloseWrite()
				}
				done <- struct{}{}
			}
			go relay(d, c)
			go relay(c, d)
			select {
			case <-done:
				<-done
			case <-ctx.Done():
			}
		}()
	}
}
