// Package announcecfg is the announce section: how a scheduler's Anycast
// route follows its readiness, and the BGP speaker's settings. It is apart
// from announce so that config can compose it without linking GoBGP into
// the healthcheck daemon and schedctl.
package announcecfg

import (
	"fmt"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Mode is how a scheduler announces its route (announce.mode).
type Mode string

// The announce modes.
const (
	ModeNone Mode = "none" // no route: something else routes to this host
	ModeBGP  Mode = "bgp"  // the embedded GoBGP speaker (announce.bgp)
	ModeOSPF Mode = "ospf" // the address on anycast.interface, advertised by the local BIRD/FRR
)

// Config is the announce section.
type Config struct {
	Mode Mode `yaml:"mode"`
	// Families are the address families this scheduler announces (ipv4,
	// ipv6); empty: every family the province has (anycast.service_ip and
	// service_ip6). An IPv6-only city's scheduler lists ipv6 alone.
	Families []Family `yaml:"families"`
	Timing   `yaml:",inline"`
	BGP      BGP `yaml:"bgp"`
}

// Timing is when the route follows readiness and how it is given up on
// stop; the announce controller runs on it as the file gives it.
type Timing struct {
	// CheckInterval is how often readiness is evaluated.
	CheckInterval time.Duration `yaml:"check_interval"`
	// Rise and Fall: consecutive ready / not-ready checks before announcing /
	// withdrawing, so one bad check cannot flap the route.
	Rise int `yaml:"rise"`
	Fall int `yaml:"fall"`
	// HoldDown is the least time between two changes of the route.
	HoldDown time.Duration `yaml:"hold_down"`
	Drain    Drain         `yaml:"drain"`
}

// Drain times the graceful stop.
type Drain struct {
	// PreWithdraw: after re-announcing with GRACEFUL_SHUTDOWN, before
	// withdrawing, so routers move traffic first.
	PreWithdraw time.Duration `yaml:"pre_withdraw"`
	// Linger: answering after the withdrawal, while routers converge.
	Linger time.Duration `yaml:"linger"`
}

// BGP configures the embedded GoBGP speaker and the attributes of the
// route it announces.
type BGP struct {
	ASN           uint32      `yaml:"asn"`
	RouterID      netip.Addr  `yaml:"router_id"` // IPv4
	Peers         []BGPPeer   `yaml:"peers"`
	Communities   []Community `yaml:"communities"` // written "65101:100"
	MED           uint32      `yaml:"med"`
	ASPathPrepend int         `yaml:"as_path_prepend"` // a standby announces a longer path
}

// BGPPeer is one router the speaker sessions with.
type BGPPeer struct {
	Address   netip.Addr    `yaml:"address"`
	Port      int           `yaml:"port"` // default 179
	ASN       uint32        `yaml:"asn"`
	HoldTime  time.Duration `yaml:"hold_time"` // default 9s; the lab uses 3s
	Keepalive time.Duration `yaml:"keepalive"` // default hold_time/3
	Password  string        `yaml:"password"`  // TCP-MD5 (RFC 2385), optional; prefer PasswordFile
	// PasswordFile holds the TCP-MD5 key (one line, mode 0600), so that
	// the configuration itself holds no secret. At most one of the two.
	PasswordFile string `yaml:"password_file"`
}

// maxMD5Key is the longest TCP-MD5 key (RFC 2385 keys, as Linux's
// TCP_MD5SIG takes them: 80 bytes).
const maxMD5Key = 80

// Key is the peer's TCP-MD5 key: Password, or PasswordFile's first line;
// "" for none.
func (p BGPPeer) Key() (string, error) {
	if p.PasswordFile == "" {
		return p.Password, nil
	}
	b, err := os.ReadFile(p.PasswordFile)
	if err != nil {
		return "", err
	}
	key, _, _ := strings.Cut(string(b), "\n")
	return strings.TrimSuffix(key, "\r"), nil
}

// placeholder reports a key left as the examples give it.
func placeholder(key string) bool {
	k := strings.ToLower(strings.NewReplacer("-", "", "_", "", " ", "").Replace(key))
	return strings.Contains(k, "changeme") || k == "password" || k == "secret"
}

// validateKey checks a peer's TCP-MD5 key where it is set.
func (p BGPPeer) validateKey(errs *yamlstrict.Errors, pp string) {
	key := pp + ".password"
	switch {
	case p.Password != "" && p.PasswordFile != "":
		errs.Add(pp, "password and password_file are exclusive")
		return
	case p.PasswordFile != "":
		key = pp + ".password_file"
		if fi, err := os.Stat(p.PasswordFile); err == nil && fi.Mode().Perm()&0o077 != 0 {
			errs.Add(key, "%s is readable by group/others (mode %#o): chmod 600", p.PasswordFile, uint32(fi.Mode().Perm()))
		}
	}
	k, err := p.Key()
	switch {
	case err != nil:
		errs.Add(key, "cannot read %q: %v", p.PasswordFile, err)
	case p.PasswordFile != "" && k == "":
		errs.Add(key, "%s is empty: it holds the TCP-MD5 key", p.PasswordFile)
	case len(k) > maxMD5Key:
		errs.Add(key, "%d bytes: TCP-MD5 keys are at most %d", len(k), maxMD5Key)
	case k != "" && placeholder(k):
		errs.Add(key, "a placeholder, not a key: set the key the router's side has (both sides must match)")
	}
}

// DefaultConfig is the section's defaults: no route, a readiness check
// every 200ms, and a stop that announces GRACEFUL_SHUTDOWN for 2s and
// answers 5s after withdrawing.
func DefaultConfig() Config {
	return Config{Mode: ModeNone, Timing: Timing{CheckInterval: 200 * time.Millisecond, Rise: 3, Fall: 2, HoldDown: 2 * time.Second,
		Drain: Drain{PreWithdraw: 2 * time.Second, Linger: 5 * time.Second}}}
}

// CommunityValues is Communities as the 32-bit values BGP carries.
func (b BGP) CommunityValues() []uint32 {
	var out []uint32
	for _, c := range b.Communities {
		out = append(out, uint32(c))
	}
	return out
}

// Validate checks the section, each problem named by its key under path
// ("announce.").
func (a Config) Validate(path string) error {
	var errs yamlstrict.Errors
	switch a.Mode {
	case ModeNone, ModeOSPF:
	case ModeBGP:
		a.BGP.validate(&errs, path+"bgp.")
	default:
		errs.Add(path+"mode", "%q is not one of %s, %s, %s", a.Mode, ModeNone, ModeBGP, ModeOSPF)
	}
	a.validateFamilies(&errs, path)
	if a.CheckInterval <= 0 {
		errs.Add(path+"check_interval", "must be > 0")
	}
	if a.Rise < 1 || a.Fall < 1 {
		errs.Add(strings.TrimSuffix(path, "."), "rise and fall must be >= 1")
	}
	if a.HoldDown < 0 {
		errs.Add(path+"hold_down", "must be >= 0")
	}
	if a.Drain.PreWithdraw < 0 {
		errs.Add(path+"drain.pre_withdraw", "must be >= 0")
	}
	if a.Drain.Linger < 0 {
		errs.Add(path+"drain.linger", "must be >= 0")
	}
	return errs.Err()
}

func (b BGP) validate(errs *yamlstrict.Errors, path string) {
	if b.ASN == 0 {
		errs.Add(path+"asn", "required in bgp mode")
	}
	switch {
	case !b.RouterID.IsValid():
		errs.Add(path+"router_id", "required in bgp mode (an IPv4 address of this host)")
	case !b.RouterID.Is4():
		errs.Add(path+"router_id", "%s is not an IPv4 address", b.RouterID)
	}
	if len(b.Peers) == 0 {
		errs.Add(path+"peers", "at least one peer is required in bgp mode")
	}
	for i, p := range b.Peers {
		pp := fmt.Sprintf("%speers[%d]", path, i)
		if !p.Address.IsValid() {
			errs.Add(pp+".address", "required")
		}
		if p.ASN == 0 {
			errs.Add(pp+".asn", "required")
		}
		if p.Port < 0 || p.Port > 65535 {
			errs.Add(pp+".port", "%d is out of range", p.Port)
		}
		if p.HoldTime != 0 && p.HoldTime < 3*time.Second {
			errs.Add(pp+".hold_time", "%s is below BGP's minimum of 3s", p.HoldTime)
		}
		if p.Keepalive != 0 && p.HoldTime != 0 && p.Keepalive >= p.HoldTime {
			errs.Add(pp+".keepalive", "%s must be below hold_time %s", p.Keepalive, p.HoldTime)
		}
		p.validateKey(errs, pp)
	}
	if b.ASPathPrepend < 0 || b.ASPathPrepend > 10 {
		errs.Add(path+"as_path_prepend", "%d is out of range [0, 10]", b.ASPathPrepend)
	}
}

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

// Family is an address family: ipv4 or ipv6 (announce.families, and the
// family label of the announce metrics).
type Family string

// The families.
const (
	IPv4 Family = "ipv4"
	IPv6 Family = "ipv6"
)

// Is6 reports whether f is IPv6.
func (f Family) Is6() bool { return f == IPv6 }

// Announces reports whether the families list allows f: an empty list
// announces every family the province has.
func (a Config) Announces(f Family) bool {
	return len(a.Families) == 0 || slices.Contains(a.Families, f)
}

// validateFamilies checks announce.families: known, once each, and in bgp
// mode each with a peer of its family (a route goes only to the sessions of
// its family, whose local address is its next hop).
func (a Config) validateFamilies(errs *yamlstrict.Errors, path string) {
	for i, f := range a.Families {
		fp := fmt.Sprintf("%sfamilies[%d]", path, i)
		switch {
		case f != IPv4 && f != IPv6:
			errs.Add(fp, "%q is not %s or %s", f, IPv4, IPv6)
		case slices.Index(a.Families, f) < i:
			errs.Add(fp, "%s is listed twice", f)
		case a.Mode == ModeBGP && len(a.BGP.Peers) > 0 && !slices.ContainsFunc(a.BGP.Peers, func(p BGPPeer) bool { return p.Address.IsValid() && p.Address.Unmap().Is6() == f.Is6() }):
			errs.Add(fp, "no %s peer in %sbgp.peers: the %s route would reach no router (each family is announced over sessions of its own family)", f, path, f)
		}
	}
}
