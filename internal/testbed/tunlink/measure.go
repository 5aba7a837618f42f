package tunlink

import (
	"fmt"
	"net"
	"time"

	"github.com/anysched/anysched/netconfig"
)

// ConnectRTT measures n TCP connects (one round trip each) from namespace
// from to a listener it opens at addr in namespace to, and returns the
// fastest and the slowest: what a link's delay adds, as an STB would see it.
func ConnectRTT(from, to, addr string, n int) (fastest, slowest time.Duration, err error) {
	var ln net.Listener
	if err := netconfig.InNamespace(to, func() (err error) { ln, err = net.Listen("tcp", addr); return err }); err != nil {
		return 0, 0, fmt.Errorf("tunlink: %w", err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	fastest = time.Hour
	err = netconfig.InNamespace(from, func() error {
		for range n {
			start := time.Now()
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				return fmt.Errorf("connect %s: %w", addr, err)
			}
			d := time.Since(start)
			c.Close()
			fastest, slowest = min(fastest, d), max(slowest, d)
		}
		return nil
	})
	if err != nil {
		err = fmt.Errorf("tunlink: %w", err)
	}
	return fastest, slowest, err
}
