package config

import (
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// AnycastLocal is how this host carries the Anycast address.
type AnycastLocal struct {
	Interface string `yaml:"interface"` // the dummy interface for the address; default anycast0
	// ManageAddress: in BGP mode, put the service address on Interface while
	// running (default true). Off when the host configures it otherwise.
	ManageAddress bool `yaml:"manage_address"`
	// CenterPrefixMinLength is the shortest center_prefix a topology may
	// give, checked when it is applied, compiled and announced.
	CenterPrefixMinLength PrefixMinLength `yaml:"center_prefix_min_length"`
}

// PrefixMinLength is a shortest prefix length per address family.
type PrefixMinLength struct {
	IPv4 int `yaml:"ipv4"` // 8..32, default 16
	IPv6 int `yaml:"ipv6"` // 16..128, default 48
}

// Limits are the topology limits these settings give.
func (a AnycastLocal) Limits() topology.Limits {
	return topology.Limits{CenterPrefixMinBits4: a.CenterPrefixMinLength.IPv4, CenterPrefixMinBits6: a.CenterPrefixMinLength.IPv6}
}

func (a AnycastLocal) validate(errs *yamlstrict.Errors) {
	if a.Interface == "" || len(a.Interface) > 15 {
		errs.Add("anycast.interface", "%q is not an interface name (1-15 characters)", a.Interface)
	}
	if v := a.CenterPrefixMinLength.IPv4; v < 8 || v > 32 {
		errs.Add("anycast.center_prefix_min_length.ipv4", "%d is out of range [8, 32]", v)
	}
	if v := a.CenterPrefixMinLength.IPv6; v < 16 || v > 128 {
		errs.Add("anycast.center_prefix_min_length.ipv6", "%d is out of range [16, 128]", v)
	}
}
