//go:build !linux

package dnsd

import (
	"errors"
	"net"
)

// newMmsgConn: recvmmsg and sendmmsg are Linux's; elsewhere a socket is
// read a datagram at a time (packetConn), without destination addresses.
func newMmsgConn(*net.UDPConn, int) (batchConn, error) { return nil, errors.ErrUnsupported }
