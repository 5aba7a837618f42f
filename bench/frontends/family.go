package main

import (
	"fmt"
	"net"
	"net/netip"
	"strings"

	"github.com/miekg/dns"
)

// family is the address family of a measurement: every server listens on
// its loopback address (127.0.0.1 or ::1), the load generators aim there,
// the STB addresses cycled through X-Forwarded-For and the ECS client
// subnets are of the family, the DNS load asks A or AAAA, and the peers
// answer with an address of the family. Each family's run has its own
// baselines (nginx, gdnsd, the bare servers), measured beside anysched.
type family struct{ v6 bool }

var (
	ipv4 = family{}
	ipv6 = family{v6: true}
)

// families are the runs -family asks for, in the order they run.
func families(flag string) ([]family, error) {
	switch flag {
	case "ipv4":
		return []family{ipv4}, nil
	case "ipv6":
		return []family{ipv6}, nil
	case "both":
		return []family{ipv4, ipv6}, nil
	}
	return nil, fmt.Errorf("-family must be ipv4, ipv6 or both, not %q", flag)
}

// name is the flag's spelling of the family (also the children's -family).
func (f family) name() string {
	if f.v6 {
		return "ipv6"
	}
	return "ipv4"
}

// label is how the report names the family.
func (f family) label() string {
	if f.v6 {
		return "IPv6"
	}
	return "IPv4"
}

// loopback is the address every server of the family's run listens on.
func (f family) loopback() netip.Addr {
	if f.v6 {
		return netip.IPv6Loopback()
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// hostPort is the loopback address with port, IPv6 bracketed.
func (f family) hostPort(port int) string {
	return netip.AddrPortFrom(f.loopback(), uint16(port)).String()
}

// listen is the loopback address with a free port to bind ("127.0.0.1:0").
func (f family) listen() string { return f.hostPort(0) }

// urlHost is the loopback address as a URL's host is written: [::1].
func (f family) urlHost() string {
	if f.v6 {
		return "[" + f.loopback().String() + "]"
	}
	return f.loopback().String()
}

// qtype is the DNS record type of the family's queries and answers.
func (f family) qtype() uint16 {
	if f.v6 {
		return dns.TypeAAAA
	}
	return dns.TypeA
}

// rrType is qtype's name: A or AAAA.
func (f family) rrType() string { return dns.TypeToString[f.qtype()] }

// of reports whether a is of the family (IPv4-mapped IPv6 is IPv4).
func (f family) of(a netip.Addr) bool { return a.IsValid() && a.Unmap().Is6() == f.v6 }

// trusted is the loopback network anysched trusts as a proxy (its
// X-Forwarded-For) and as a resolver (its ECS).
func (f family) trusted() netip.Prefix {
	if f.v6 {
		return netip.PrefixFrom(netip.IPv6Loopback(), 128)
	}
	return netip.MustParsePrefix("127.0.0.0/8")
}

// ecsBits is the client-subnet length a resolver sends (RFC 7871 §11.1:
// /24 for IPv4, /56 for IPv6).
func (f family) ecsBits() int {
	if f.v6 {
		return 56
	}
	return 24
}

// peerAddr is the edge address the peers' fixed answers give (nginx's
// Location, gdnsd's record): the address of the province's first server.
func (f family) peerAddr() netip.Addr {
	if f.v6 {
		return netip.MustParseAddr("fd99::1") // fixture.DualStack's first address6
	}
	return netip.MustParseAddr("10.1.1.1")
}

// nginxLocation is what nginx redirects every request to: a server
// address and the request's own path, the shape of anysched's Location.
func (f family) nginxLocation() string {
	return "http://" + bracket(f.peerAddr()) + "$request_uri"
}

// bareAddr is the bare servers' fixed edge address.
func (f family) bareAddr() netip.Addr {
	if f.v6 {
		return netip.MustParseAddr("fd99::1")
	}
	return netip.MustParseAddr("10.0.0.1")
}

// bareLocation is the bare HTTP server's fixed redirect (the shape of
// anysched's: a server address, the channel, a bitrate).
func (f family) bareLocation() string {
	return "http://" + netip.AddrPortFrom(f.bareAddr(), 8080).String() + "/live/cctv1/6000/index.m3u8"
}

// addrRR is the A or AAAA record of ip for name.
func addrRR(name string, ip netip.Addr, ttl uint32) dns.RR {
	if ip.Is4() {
		return &dns.A{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeA, Class: dns.ClassINET, Ttl: ttl}, A: net.IP(ip.AsSlice())}
	}
	return &dns.AAAA{Hdr: dns.RR_Header{Name: name, Rrtype: dns.TypeAAAA, Class: dns.ClassINET, Ttl: ttl}, AAAA: net.IP(ip.AsSlice())}
}

// rrAddr is the address of an A or AAAA record; ok is false for any
// other record.
func rrAddr(rr dns.RR) (netip.Addr, bool) {
	switch r := rr.(type) {
	case *dns.A:
		a, ok := netip.AddrFromSlice(r.A.To4())
		return a, ok
	case *dns.AAAA:
		a, ok := netip.AddrFromSlice(r.AAAA.To16())
		return a, ok && !a.Is4In6()
	}
	return netip.Addr{}, false
}

// bracket writes an address as a URL's host: IPv6 in brackets.
func bracket(a netip.Addr) string {
	if a.Is6() {
		return "[" + a.String() + "]"
	}
	return a.String()
}

// String and Set make a family a flag.Value: the children's -family,
// ipv4 (the zero family) or ipv6.
func (f *family) String() string { return f.name() }

func (f *family) Set(s string) error {
	switch strings.ToLower(s) {
	case "ipv4":
		*f = ipv4
	case "ipv6":
		*f = ipv6
	default:
		return fmt.Errorf("%q: want ipv4 or ipv6", s)
	}
	return nil
}
