package config

import (
	"fmt"
	"net/netip"
	"strconv"
	"strings"
)

// Community is a BGP community, written as two 16-bit numbers ASN:VALUE
// ("65101:100"); it decodes to its 32-bit value.
type Community uint32

// ParseCommunity reads "ASN:VALUE".
func ParseCommunity(s string) (Community, error) {
	hi, lo, ok := strings.Cut(s, ":")
	h, err1 := strconv.ParseUint(hi, 10, 16)
	l, err2 := strconv.ParseUint(lo, 10, 16)
	if !ok || err1 != nil || err2 != nil {
		return 0, fmt.Errorf("%q is not ASN:VALUE with two 16-bit numbers", s)
	}
	return Community(h<<16 | l), nil
}

// String is the ASN:VALUE form.
func (c Community) String() string { return fmt.Sprintf("%d:%d", uint32(c)>>16, uint32(c)&0xffff) }

// MarshalText implements encoding.TextMarshaler.
func (c Community) MarshalText() ([]byte, error) { return []byte(c.String()), nil }

// UnmarshalText implements encoding.TextUnmarshaler.
func (c *Community) UnmarshalText(b []byte) error {
	v, err := ParseCommunity(string(b))
	if err == nil {
		*c = v
	}
	return err
}

// Network is a CIDR prefix that may also be written as a single address
// ("10.0.0.1" is 10.0.0.1/32, an IPv6 address a /128; an IPv4-mapped
// address counts as IPv4). It is kept masked.
type Network netip.Prefix

// ParseNetwork reads "10.0.0.0/8" or "10.0.0.1".
func ParseNetwork(s string) (Network, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return Network(p.Masked()), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return Network{}, fmt.Errorf("not an IP address or CIDR prefix: %q", s)
	}
	a = a.Unmap()
	return Network(netip.PrefixFrom(a, a.BitLen())), nil
}

// MustParseNetwork is ParseNetwork for constants; it panics on an error.
func MustParseNetwork(s string) Network {
	n, err := ParseNetwork(s)
	if err != nil {
		panic(err)
	}
	return n
}

// Prefix is the network as a netip.Prefix.
func (n Network) Prefix() netip.Prefix { return netip.Prefix(n) }

// String is the CIDR form.
func (n Network) String() string { return n.Prefix().String() }

// MarshalText implements encoding.TextMarshaler.
func (n Network) MarshalText() ([]byte, error) { return n.Prefix().MarshalText() }

// UnmarshalText implements encoding.TextUnmarshaler.
func (n *Network) UnmarshalText(b []byte) error {
	v, err := ParseNetwork(string(b))
	if err == nil {
		*n = v
	}
	return err
}
