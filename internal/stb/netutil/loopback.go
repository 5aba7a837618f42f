package netutil

import "net/netip"

// LoopbackHost reports whether a host (of a listen address or an
// endpoint) is localhost or a loopback address (127.0.0.0/8, ::1, or
// their IPv4-mapped forms): what stays on this machine, where the
// configuration allows plaintext and the admin API trusts "local".
func LoopbackHost(h string) bool {
	if h == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(h)
	return err == nil && a.Unmap().IsLoopback()
}
