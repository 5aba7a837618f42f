package config

import (
	"fmt"
	"net/netip"
	"time"

	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/yamlstrict"
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

// BGPPeer is one router a scheduler sessions with.
type BGPPeer struct {
	Address   netip.Addr    `yaml:"address"`
	Port      int           `yaml:"port"` // default 179
	ASN       uint32        `yaml:"asn"`
	HoldTime  time.Duration `yaml:"hold_time"` // default 9s
	Keepalive time.Duration `yaml:"keepalive"` // default hold_time/3
	Password  string        `yaml:"password"`  // TCP-MD5
}

// BGP configures the embedded GoBGP speaker.
type BGP struct {
	ASN           uint32      `yaml:"asn"`
	RouterID      netip.Addr  `yaml:"router_id"` // IPv4
	Peers         []BGPPeer   `yaml:"peers"`
	Communities   []Community `yaml:"communities"` // written "65101:100"
	MED           uint32      `yaml:"med"`
	ASPathPrepend int         `yaml:"as_path_prepend"` // a standby announces a longer path
}

// Drain times the graceful stop.
type Drain struct {
	// PreWithdraw: after re-announcing with GRACEFUL_SHUTDOWN, before withdrawing.
	PreWithdraw time.Duration `yaml:"pre_withdraw"`
	// Linger: answering after the withdrawal, while routers converge.
	Linger time.Duration `yaml:"linger"`
}

// AnnounceMode is how a scheduler announces its route (announce.mode).
type AnnounceMode string

// The announce modes.
const (
	AnnounceNone AnnounceMode = "none" // no route: something else routes to this host
	AnnounceBGP  AnnounceMode = "bgp"  // the embedded GoBGP speaker (announce.bgp)
	AnnounceOSPF AnnounceMode = "ospf" // the address on anycast.interface, advertised by the local BIRD/FRR
)

// Announce configures how the Anycast route follows readiness.
type Announce struct {
	Mode          AnnounceMode  `yaml:"mode"`
	CheckInterval time.Duration `yaml:"check_interval"`
	Rise          int           `yaml:"rise"`
	Fall          int           `yaml:"fall"`
	HoldDown      time.Duration `yaml:"hold_down"`
	Drain         Drain         `yaml:"drain"`
	BGP           BGP           `yaml:"bgp"`
}

// CommunityValues is Communities as the 32-bit values BGP carries.
func (b BGP) CommunityValues() []uint32 {
	var out []uint32
	for _, c := range b.Communities {
		out = append(out, uint32(c))
	}
	return out
}

func (a Announce) validate(errs *yamlstrict.Errors) {
	switch a.Mode {
	case AnnounceNone, AnnounceOSPF:
	case AnnounceBGP:
		b := a.BGP
		if b.ASN == 0 {
			errs.Add("announce.bgp.asn", "required in bgp mode")
		}
		switch {
		case !b.RouterID.IsValid():
			errs.Add("announce.bgp.router_id", "required in bgp mode (an IPv4 address of this host)")
		case !b.RouterID.Is4():
			errs.Add("announce.bgp.router_id", "%s is not an IPv4 address", b.RouterID)
		}
		if len(b.Peers) == 0 {
			errs.Add("announce.bgp.peers", "at least one peer is required in bgp mode")
		}
		for i, p := range b.Peers {
			path := fmt.Sprintf("announce.bgp.peers[%d]", i)
			if !p.Address.IsValid() {
				errs.Add(path+".address", "required")
			}
			if p.ASN == 0 {
				errs.Add(path+".asn", "required")
			}
			if p.Port < 0 || p.Port > 65535 {
				errs.Add(path+".port", "%d is out of range", p.Port)
			}
			if p.HoldTime != 0 && p.HoldTime < 3*time.Second {
				errs.Add(path+".hold_time", "%s is below BGP's minimum of 3s", p.HoldTime)
			}
			if p.Keepalive != 0 && p.HoldTime != 0 && p.Keepalive >= p.HoldTime {
				errs.Add(path+".keepalive", "%s must be below hold_time %s", p.Keepalive, p.HoldTime)
			}
		}
		if b.ASPathPrepend < 0 || b.ASPathPrepend > 10 {
			errs.Add("announce.bgp.as_path_prepend", "%d is out of range [0, 10]", b.ASPathPrepend)
		}
	default:
		errs.Add("announce.mode", "%q is not one of %s, %s, %s", a.Mode, AnnounceNone, AnnounceBGP, AnnounceOSPF)
	}
	if a.CheckInterval <= 0 {
		errs.Add("announce.check_interval", "must be > 0")
	}
	if a.Rise < 1 || a.Fall < 1 {
		errs.Add("announce", "rise and fall must be >= 1")
	}
	if a.HoldDown < 0 {
		errs.Add("announce.hold_down", "must be >= 0")
	}
	if a.Drain.PreWithdraw < 0 {
		errs.Add("announce.drain.pre_withdraw", "must be >= 0")
	}
	if a.Drain.Linger < 0 {
		errs.Add("announce.drain.linger", "must be >= 0")
	}
}
