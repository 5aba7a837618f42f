package netutil

import (
	"net"
	"testing"
)

// TestListenNonLocal binds an address this host does not have (TEST-NET-2),
// which plain net.Listen refuses.
func TestListenNonLocal(t *testing.T) {
	if _, err := net.Listen("tcp", "198.51.100.7:0"); err == nil {
		t.Skip("this host binds non-local addresses anyway (ip_nonlocal_bind)")
	}
	ln, err := Listen("tcp", "198.51.100.7:0")
	if err != nil {
		t.Fatalf("freebind listen: %v", err)
	}
	ln.Close()
	pc, err := ListenPacket("udp", "198.51.100.7:0")
	if err != nil {
		t.Fatalf("freebind listen packet: %v", err)
	}
	pc.Close()
}
