package config

import (
	"fmt"
	"net/netip"
)

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
