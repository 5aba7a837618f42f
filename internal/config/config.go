// Package config holds the daemons' configuration: defaults first, then the
// YAML file (decoded strictly: unknown keys are errors), then flags; Validate
// reports every problem with its field path.
//
// Values are typed as they are decoded (addresses and prefixes as netip
// values, communities as numbers, durations), so that a malformed one is a
// decoding error with its path and line, and the daemons' wiring never
// parses a string again. Base is what all three daemons share; Common adds
// what both schedulers have.
package config

import (
	"fmt"
	"math"
	"net"
	"net/netip"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/token"
	"github.com/anysched/anysched/internal/topology"
	"github.com/anysched/anysched/internal/yamlstrict"
)

// Log configures log/slog output.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json
}

// ClientTLS configures a TLS client (the etcd client, schedctl).
type ClientTLS struct {
	CAFile     string `yaml:"ca_file"`
	CertFile   string `yaml:"cert_file"` // client certificate, for servers that require one
	KeyFile    string `yaml:"key_file"`
	ServerName string `yaml:"server_name"`
}

// Enabled reports whether any TLS setting is given.
func (t ClientTLS) Enabled() bool { return t.CAFile != "" || t.CertFile != "" || t.KeyFile != "" }

// ServerTLS configures a TLS listener; with ClientCAFile, clients must present
// a certificate signed by it (mutual TLS).
type ServerTLS struct {
	CertFile     string `yaml:"cert_file"`
	KeyFile      string `yaml:"key_file"`
	ClientCAFile string `yaml:"client_ca_file"`
}

// Enabled reports whether the listener uses TLS.
func (t ServerTLS) Enabled() bool { return t.CertFile != "" || t.KeyFile != "" || t.ClientCAFile != "" }

// Embedded configures the single-node etcd a central scheduler runs when no
// external endpoints are configured.
type Embedded struct {
	Dir          string `yaml:"dir"`
	ClientListen string `yaml:"client_listen"`
	PeerListen   string `yaml:"peer_listen"`
	Name         string `yaml:"name"`
}

// Etcd configures the store.
type Etcd struct {
	Endpoints   []string      `yaml:"endpoints"`
	DialTimeout time.Duration `yaml:"dial_timeout"`
	Prefix      string        `yaml:"prefix"`
	TLS         ClientTLS     `yaml:"tls"`
	Embedded    Embedded      `yaml:"embedded"`
}

// Admin is the operator listener: /metrics, /healthz, /readyz, /debug/pprof/.
type Admin struct {
	Listen string `yaml:"listen"`
}

// GRPC is the central scheduler's admin API listener.
type GRPC struct {
	Listen string    `yaml:"listen"`
	TLS    ServerTLS `yaml:"tls"`
}

// HTTP is the STB-facing redirect listener.
type HTTP struct {
	Listen string `yaml:"listen"` // empty disables it
	// TrustedProxies: X-Forwarded-For is believed only from these networks
	// (written as CIDR prefixes or single addresses).
	TrustedProxies []Network `yaml:"trusted_proxies"`
}

// TrustedPrefixes is TrustedProxies as netip prefixes.
func (h HTTP) TrustedPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, len(h.TrustedProxies))
	for i, n := range h.TrustedProxies {
		out[i] = n.Prefix()
	}
	return out
}

// DNS is the STB-facing authoritative DNS listener (UDP and TCP).
type DNS struct {
	Listen string        `yaml:"listen"` // empty disables it
	TTL    time.Duration `yaml:"ttl"`
}

// AccessLog configures the per-decision log.
type AccessLog struct {
	Enabled bool `yaml:"enabled"`
	// SampleEvery logs one decision in N (MISS and ERROR always); 1 logs all.
	SampleEvery uint64 `yaml:"sample_every"`
}

// AnycastLocal is how this host carries the Anycast address.
type AnycastLocal struct {
	Interface string `yaml:"interface"` // the dummy interface for the address; default anycast0
	// ManageAddress: in BGP mode, put the service address on Interface while
	// running (default true). Off when the host configures it otherwise.
	ManageAddress bool `yaml:"manage_address"`
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

// Check configures a health checker (the healthcheck daemon, or one embedded
// in a regional scheduler).
type Check struct {
	Interval time.Duration `yaml:"interval"` // between probes of one server
	Timeout  time.Duration `yaml:"timeout"`  // of one probe
	Rise     int           `yaml:"rise"`     // consecutive successes to come up
	Fall     int           `yaml:"fall"`     // consecutive failures to go down
	// BandwidthThreshold: a server reporting more than this share of its
	// capacity gets no new STBs.
	BandwidthThreshold float64 `yaml:"bandwidth_threshold"`
}

// Health configures how a scheduler uses the checkers' verdicts.
type Health struct {
	Merge          string        `yaml:"merge"`           // optimistic | majority
	Grace          time.Duration `yaml:"grace"`           // keep a vanished checker's verdict this long
	PanicThreshold float64       `yaml:"panic_threshold"` // share of healthy servers below which a node ignores health
	// Embedded runs a checker inside a regional scheduler (small sites).
	Embedded bool  `yaml:"embedded"`
	Check    Check `yaml:"check"`
}

// DefaultCheck is the checker's defaults: a dead server is out within about
// 1.3 s (a failed probe, one fast re-probe, propagation).
func DefaultCheck() Check {
	return Check{Interval: time.Second, Timeout: 250 * time.Millisecond, Rise: 2, Fall: 2, BandwidthThreshold: 0.9}
}

// validate checks c; path is its key prefix ("" or "health.check."). A
// timeout above the interval is an error naming both keys: nothing lowers
// one to fit the other, so a shorter interval (file or --interval) needs a
// timeout that fits it (file or --timeout).
func (c Check) validate(errs *yamlstrict.Errors, path string) {
	if c.Interval < 50*time.Millisecond {
		errs.Add(path+"interval", "%s is below 50ms", c.Interval)
	}
	switch {
	case c.Timeout <= 0:
		errs.Add(path+"timeout", "must be > 0")
	case c.Timeout > c.Interval:
		errs.Add(path+"timeout", "%s must be at most %sinterval %s", c.Timeout, path, c.Interval)
	}
	if c.Rise < 1 || c.Rise > 100 {
		errs.Add(path+"rise", "%d is out of range [1, 100]", c.Rise)
	}
	if c.Fall < 1 || c.Fall > 100 {
		errs.Add(path+"fall", "%d is out of range [1, 100]", c.Fall)
	}
	if c.BandwidthThreshold <= 0 || c.BandwidthThreshold > 1 {
		errs.Add(path+"bandwidth_threshold", "%v is out of range (0, 1]", c.BandwidthThreshold)
	}
}

// Checker is the healthcheck daemon's configuration.
type Checker struct {
	Base `yaml:",inline"`
	// Region whose servers to probe; or Servers, an explicit list of names.
	Region  string   `yaml:"region"`
	Servers []string `yaml:"servers"`
	// CheckerID names this checker in its verdicts; default: hostname.
	CheckerID string `yaml:"checker_id"`
	Check     `yaml:",inline"`
}

// DefaultChecker returns the healthcheck daemon's defaults.
func DefaultChecker() Checker {
	return Checker{Base: defaultBase("/var/lib/anysched/healthcheck", "127.0.0.1:9102"), Check: DefaultCheck()}
}

// Validate checks the healthcheck daemon's configuration.
func (c *Checker) Validate() error {
	var errs yamlstrict.Errors
	if c.Region == "" && len(c.Servers) == 0 {
		errs.Add("region", "required (or servers: an explicit list)")
	} else if c.Region == topology.CenterName {
		errs.Add("region", "%q is reserved for the central scheduler, which has no servers", c.Region)
	}
	if len(c.Etcd.Endpoints) == 0 {
		errs.Add("etcd.endpoints", "required: the checker publishes its verdicts to the province's etcd")
	}
	c.Base.validate(&errs, false)
	c.Check.validate(&errs, "")
	return errs.Err()
}

// Snapshot configures how a daemon keeps its copy of the topology.
type Snapshot struct {
	CacheFile string `yaml:"cache_file"`
	// MaxStaleness: a snapshot not confirmed against the store for longer
	// makes the scheduler not ready.
	MaxStaleness time.Duration `yaml:"max_staleness"`
	// ConfirmInterval: how often the scheduler checks the store's revision,
	// besides watching it, so that a lost watch cannot go unnoticed.
	ConfirmInterval time.Duration `yaml:"confirm_interval"`
}

// Base is what every daemon's configuration has (the schedulers' through
// Common, the checker's directly): the log, the admin listener, the etcd
// client and the topology snapshot's disk cache.
type Base struct {
	Etcd     Etcd     `yaml:"etcd"`
	Admin    Admin    `yaml:"admin"`
	Snapshot Snapshot `yaml:"snapshot"`
	Log      Log      `yaml:"log"`
}

// Common is what both scheduler daemons have.
type Common struct {
	Base       `yaml:",inline"`
	InstanceID string       `yaml:"instance_id"` // default: hostname-role[-region]
	HTTP       HTTP         `yaml:"http"`
	DNS        DNS          `yaml:"dns"`
	AccessLog  AccessLog    `yaml:"access_log"`
	Health     Health       `yaml:"health"`
	Anycast    AnycastLocal `yaml:"anycast"`
	Announce   Announce     `yaml:"announce"`
}

// Center is the central scheduler's configuration.
type Center struct {
	Common `yaml:",inline"`
	GRPC   GRPC `yaml:"grpc"`
	// DefaultRegion serves STBs in no coverage zone; empty: the first region
	// of the topology.
	DefaultRegion string `yaml:"default_region"`
	// Lab marks a lab province: failover drills need no confirmation.
	Lab bool `yaml:"lab"`
	// LabEtcdMembers are the control addresses (host:port) of a lab's etcd
	// members (bin/lab etcd-member), in member order: the etcd-loss drill
	// stops and restarts members through them. Only with lab: true and
	// etcd.endpoints (the members' client URLs).
	LabEtcdMembers []string `yaml:"lab_etcd_members"`
	// Alloc: the viewer tokens of QoE services, checked as the cities'
	// schedulers check them (the center plans no city: the rest of a
	// regional alloc section does not apply).
	Alloc Viewers `yaml:"alloc"`
}

// Regional is a city scheduler's configuration.
type Regional struct {
	Common `yaml:",inline"`
	Region string `yaml:"region"`
	Alloc  Alloc  `yaml:"alloc"`
}

// Alloc configures the live QoE allocation of a regional scheduler (the
// services with selection: qoe).
type Alloc struct {
	Period       time.Duration `yaml:"period"`        // between two solves of the region
	SessionTTL   time.Duration `yaml:"session_ttl"`   // a session not seen this long has ended
	SolveTimeout time.Duration `yaml:"solve_timeout"` // 0: period/2, at most 2s
	MaxSessions  int           `yaml:"max_sessions"`
	Viewers      `yaml:",inline"`
	// ArrivalReserve: share of each server's capacity the solve leaves for
	// STBs arriving before the next solve (0 to 0.5).
	ArrivalReserve float64 `yaml:"arrival_reserve"`
	// Model overrides the QoE model's parameters (docs/design.md, "The QoE model"; defaults
	// and their reasons in docs/design.md); a key left out keeps its default.
	Model Model `yaml:"model"`
}

// Viewers is how a scheduler reads the viewer tokens of QoE services: a
// city's scheduler (under alloc, with the allocation's keys) and the center
// (its alloc section has these keys only) apply the same rules.
type Viewers struct {
	Auth string `yaml:"auth"` // optional | required
	// Keys verify the viewer tokens (HS256 JWTs) the business platform signs.
	Keys           []TokenKey    `yaml:"keys"`
	Leeway         time.Duration `yaml:"leeway"` // clock skew allowed on exp/nbf/iat
	DefaultProfile Profile       `yaml:"default_profile"`
}

// DefaultViewers returns the token defaults.
func DefaultViewers() Viewers {
	return Viewers{Auth: "optional", Leeway: 30 * time.Second, DefaultProfile: Profile{DanmakuPerHour: 1}}
}

// Model holds optional overrides of the QoE model's symbols. Units:
// seconds, kbps, transcoding compute units.
type Model struct {
	A               *float64 `yaml:"a"`                 // weight of the interaction experience
	B               *float64 `yaml:"b"`                 // weight of the video quality
	C               *float64 `yaml:"c"`                 // weight of the bitrate jitter
	D               *float64 `yaml:"d"`                 // weight of a server switch
	Theta           *float64 `yaml:"theta_s"`           // latency threshold
	Lambda          *float64 `yaml:"lambda"`            // room-mean scale of the interaction demand
	B1              *float64 `yaml:"b1"`                // video-quality scale
	K               *float64 `yaml:"k_per_kbps"`        // jitter per kbps of bitrate drop
	S               *float64 `yaml:"s"`                 // loss of one switch
	Omega           *float64 `yaml:"omega"`             // gift weight
	TIngest         *float64 `yaml:"ingest_s"`          // broadcaster uplink
	BackboneBase    *float64 `yaml:"backbone_base_s"`   // between edge sites: fixed part
	BackbonePerKm   *float64 `yaml:"backbone_s_per_km"` // between edge sites: per km
	BackboneOrigin  *float64 `yaml:"origin_s"`          // via the origin
	AccessBase      *float64 `yaml:"access_base_s"`     // server to STB: fixed part
	AccessPerKm     *float64 `yaml:"access_s_per_km"`   // server to STB: per km
	G               *float64 `yaml:"transcode_s_per_kbps"`
	H               *float64 `yaml:"transcode_units_per_kbps"`
	FallbackLatency *float64 `yaml:"fallback_latency_s"`
}

func (m Model) validate(errs *yamlstrict.Errors) {
	for _, f := range []struct {
		name     string
		v        *float64
		positive bool
	}{
		{"a", m.A, false}, {"b", m.B, false}, {"c", m.C, false}, {"d", m.D, false},
		{"theta_s", m.Theta, true}, {"lambda", m.Lambda, false}, {"b1", m.B1, true}, {"k_per_kbps", m.K, false},
		{"s", m.S, false}, {"omega", m.Omega, false}, {"ingest_s", m.TIngest, false},
		{"backbone_base_s", m.BackboneBase, false}, {"backbone_s_per_km", m.BackbonePerKm, false},
		{"origin_s", m.BackboneOrigin, false}, {"access_base_s", m.AccessBase, false},
		{"access_s_per_km", m.AccessPerKm, false}, {"transcode_s_per_kbps", m.G, false},
		{"transcode_units_per_kbps", m.H, false}, {"fallback_latency_s", m.FallbackLatency, false},
	} {
		switch {
		case f.v == nil:
		case math.IsNaN(*f.v) || math.IsInf(*f.v, 0) || *f.v < 0:
			errs.Add("alloc.model."+f.name, "%v must be a finite number >= 0", *f.v)
		case f.positive && *f.v == 0:
			errs.Add("alloc.model."+f.name, "must be > 0")
		}
	}
}

// TokenKey is one token signing key; the secret stays in its own file.
type TokenKey struct {
	ID         string `yaml:"id"`
	SecretFile string `yaml:"secret_file"`
}

// Profile is a viewer's profile for the allocation.
type Profile struct {
	DesiredKbps    float64 `yaml:"desired_kbps"` // 0: the top of the service's ladder
	DanmakuPerHour float64 `yaml:"danmaku_per_hour"`
	Gift           float64 `yaml:"gift"`
}

// DefaultAlloc returns the allocation defaults.
func DefaultAlloc() Alloc {
	return Alloc{
		Period: 10 * time.Second, SessionTTL: 2 * time.Minute, MaxSessions: 1_000_000,
		Viewers: DefaultViewers(), ArrivalReserve: 0.1,
	}
}

// TokenKeys reads the configured keys' secrets.
func (a Viewers) TokenKeys() ([]token.Key, error) {
	var out []token.Key
	for i, k := range a.Keys {
		secret, err := token.ReadSecret(k.SecretFile)
		if err != nil {
			return nil, fmt.Errorf("config: alloc.keys[%d].secret_file: %w", i, err)
		}
		out = append(out, token.Key{ID: k.ID, Secret: secret})
	}
	return out, nil
}

func (a Alloc) validate(errs *yamlstrict.Errors) {
	if a.Period < time.Second || a.Period > 10*time.Minute {
		errs.Add("alloc.period", "%s is out of range [1s, 10m]", a.Period)
	}
	if a.SessionTTL < a.Period {
		errs.Add("alloc.session_ttl", "%s must be at least alloc.period %s", a.SessionTTL, a.Period)
	}
	if a.SolveTimeout < 0 || (a.SolveTimeout > 0 && a.SolveTimeout >= a.Period) {
		errs.Add("alloc.solve_timeout", "%s must be >= 0 and below alloc.period %s", a.SolveTimeout, a.Period)
	}
	if a.MaxSessions < 1 {
		errs.Add("alloc.max_sessions", "must be >= 1")
	}
	a.Viewers.validate(errs)
	a.Model.validate(errs)
	if a.ArrivalReserve < 0 || a.ArrivalReserve > 0.5 {
		errs.Add("alloc.arrival_reserve", "%v is out of range [0, 0.5]", a.ArrivalReserve)
	}
}

func (a Viewers) validate(errs *yamlstrict.Errors) {
	switch a.Auth {
	case "optional":
	case "required":
		if len(a.Keys) == 0 {
			errs.Add("alloc.keys", "at least one key is required with alloc.auth: required")
		}
	default:
		errs.Add("alloc.auth", "%q is not one of optional, required", a.Auth)
	}
	seen := map[string]bool{}
	for i, k := range a.Keys {
		p := fmt.Sprintf("alloc.keys[%d]", i)
		if k.ID == "" {
			errs.Add(p+".id", "required")
		} else if seen[k.ID] {
			errs.Add(p+".id", "duplicate key id %q", k.ID)
		}
		seen[k.ID] = true
		if k.SecretFile == "" {
			errs.Add(p+".secret_file", "required")
		} else if _, err := token.ReadSecret(k.SecretFile); err != nil {
			errs.Add(p+".secret_file", "%v", err)
		}
	}
	if a.Leeway < 0 || a.Leeway > 5*time.Minute {
		errs.Add("alloc.leeway", "%s is out of range [0, 5m]", a.Leeway)
	}
	d := a.DefaultProfile
	if d.DesiredKbps < 0 {
		errs.Add("alloc.default_profile.desired_kbps", "must be >= 0")
	}
	if d.DanmakuPerHour < 0 {
		errs.Add("alloc.default_profile.danmaku_per_hour", "must be >= 0")
	}
	if d.Gift < 0 {
		errs.Add("alloc.default_profile.gift", "must be >= 0")
	}
}

// defaultBase is every daemon's defaults; stateDir holds its files.
func defaultBase(stateDir, adminListen string) Base {
	return Base{
		Etcd: Etcd{
			DialTimeout: 5 * time.Second,
			Prefix:      "/anysched/",
			Embedded: Embedded{
				Dir:          stateDir + "/etcd",
				ClientListen: "127.0.0.1:2379",
				PeerListen:   "127.0.0.1:2380",
				Name:         "anysched-center",
			},
		},
		Admin:    Admin{Listen: adminListen},
		Snapshot: Snapshot{CacheFile: stateDir + "/snapshot.cache", MaxStaleness: 5 * time.Minute, ConfirmInterval: 2 * time.Second},
		Log:      Log{Level: "info", Format: "text"},
	}
}

// defaultCommon is both schedulers' defaults.
func defaultCommon(stateDir, adminListen string) Common {
	return Common{
		Base:      defaultBase(stateDir, adminListen),
		DNS:       DNS{TTL: 30 * time.Second},
		AccessLog: AccessLog{Enabled: true, SampleEvery: 1},
		Health:    Health{Merge: "optimistic", Grace: 10 * time.Second, PanicThreshold: 0.5, Check: DefaultCheck()},
		Anycast:   AnycastLocal{Interface: "anycast0", ManageAddress: true},
		Announce:  Announce{Mode: AnnounceNone, CheckInterval: 200 * time.Millisecond, Rise: 3, Fall: 2, HoldDown: 2 * time.Second, Drain: Drain{PreWithdraw: 2 * time.Second, Linger: 5 * time.Second}},
	}
}

// DefaultCenter returns the central scheduler's defaults.
func DefaultCenter() Center {
	c := Center{Common: defaultCommon("/var/lib/anysched/center", "127.0.0.1:9100"), Alloc: DefaultViewers()}
	c.GRPC.Listen = "127.0.0.1:9090"
	return c
}

// DefaultRegional returns a regional scheduler's defaults.
func DefaultRegional() Regional {
	return Regional{Common: defaultCommon("/var/lib/anysched/regional", "127.0.0.1:9101"), Alloc: DefaultAlloc()}
}

// LoadFile decodes a YAML file over the defaults already in cfg. Its
// errors start "config: FILE:", decoding problems follow one a line, each
// with its key path and line.
func LoadFile(path string, cfg any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err) // the error names the file
	}
	if err := yamlstrict.Decode(data, cfg); err != nil {
		return fmt.Errorf("config: %s:\n%w", path, err)
	}
	return nil
}

// Validate checks the central scheduler's configuration.
func (c *Center) Validate() error {
	var errs yamlstrict.Errors
	c.Common.validate(&errs, true)
	hostPort(&errs, "grpc.listen", c.GRPC.Listen, true)
	c.GRPC.TLS.validate(&errs, "grpc.tls")
	if c.Health.Embedded {
		errs.Add("health.embedded", "only a regional scheduler embeds a checker; run the healthcheck daemon instead")
	}
	c.Alloc.validate(&errs)
	if len(c.LabEtcdMembers) > 0 {
		if !c.Lab {
			errs.Add("lab_etcd_members", "only in a lab (lab: true)")
		}
		if len(c.Etcd.Endpoints) == 0 {
			errs.Add("lab_etcd_members", "needs etcd.endpoints: the members' client URLs")
		}
		for i, m := range c.LabEtcdMembers {
			hostPort(&errs, fmt.Sprintf("lab_etcd_members[%d]", i), m, true)
		}
	}
	return errs.Err()
}

// Validate checks a regional scheduler's configuration.
func (r *Regional) Validate() error {
	var errs yamlstrict.Errors
	r.Common.validate(&errs, false)
	switch r.Region {
	case "":
		errs.Add("region", "required: the city this scheduler serves")
	case topology.CenterName:
		errs.Add("region", "%q is reserved for the central scheduler", r.Region)
	}
	if len(r.Etcd.Endpoints) == 0 {
		errs.Add("etcd.endpoints", "required: a regional scheduler is always a client of the province's etcd")
	}
	r.Alloc.validate(&errs)
	return errs.Err()
}

func (c *Common) validate(errs *yamlstrict.Errors, embeddedAllowed bool) {
	c.Base.validate(errs, embeddedAllowed)
	c.validateFrontEnds(errs)
}

// validate checks what every daemon has: etcd, admin listener, snapshot,
// log. Only the center may run an embedded etcd (embeddedAllowed).
func (c *Base) validate(errs *yamlstrict.Errors, embeddedAllowed bool) {
	if !slices.Contains([]string{"debug", "info", "warn", "error"}, c.Log.Level) {
		errs.Add("log.level", "%q is not one of debug, info, warn, error", c.Log.Level)
	}
	if !slices.Contains([]string{"text", "json"}, c.Log.Format) {
		errs.Add("log.format", "%q is not one of text, json", c.Log.Format)
	}
	for i, ep := range c.Etcd.Endpoints {
		p := fmt.Sprintf("etcd.endpoints[%d]", i)
		u, err := url.Parse(ep)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			errs.Add(p, "not an http(s) URL: %q", ep)
		}
	}
	if c.Etcd.DialTimeout <= 0 {
		errs.Add("etcd.dial_timeout", "must be > 0")
	}
	if !strings.HasPrefix(c.Etcd.Prefix, "/") || !strings.HasSuffix(c.Etcd.Prefix, "/") {
		errs.Add("etcd.prefix", "%q must start and end with '/'", c.Etcd.Prefix)
	}
	c.Etcd.TLS.validate(errs, "etcd.tls")
	if len(c.Etcd.Endpoints) == 0 && embeddedAllowed {
		if c.Etcd.Embedded.Dir == "" {
			errs.Add("etcd.embedded.dir", "required when etcd.endpoints is empty")
		}
		hostPort(errs, "etcd.embedded.client_listen", c.Etcd.Embedded.ClientListen, true)
		hostPort(errs, "etcd.embedded.peer_listen", c.Etcd.Embedded.PeerListen, true)
		if c.Etcd.Embedded.Name == "" {
			errs.Add("etcd.embedded.name", "required")
		}
	}
	hostPort(errs, "admin.listen", c.Admin.Listen, false)
	if c.Snapshot.MaxStaleness <= 0 {
		errs.Add("snapshot.max_staleness", "must be > 0")
	}
	if c.Snapshot.ConfirmInterval <= 0 {
		errs.Add("snapshot.confirm_interval", "must be > 0")
	} else if c.Snapshot.MaxStaleness > 0 && c.Snapshot.ConfirmInterval >= c.Snapshot.MaxStaleness {
		errs.Add("snapshot.confirm_interval", "%s must be below snapshot.max_staleness %s", c.Snapshot.ConfirmInterval, c.Snapshot.MaxStaleness)
	}
}

// validateFrontEnds checks the schedulers' STB-facing, health and announcement settings.
func (c *Common) validateFrontEnds(errs *yamlstrict.Errors) {
	hostPort(errs, "http.listen", c.HTTP.Listen, false)
	for i, p := range c.HTTP.TrustedProxies {
		if !p.Prefix().IsValid() { // only a zero Network set in code; the file's are checked as decoded
			errs.Add(fmt.Sprintf("http.trusted_proxies[%d]", i), "required: an IP address or CIDR prefix")
		}
	}
	hostPort(errs, "dns.listen", c.DNS.Listen, false)
	if c.DNS.TTL < time.Second || c.DNS.TTL > 24*time.Hour {
		errs.Add("dns.ttl", "%s is out of range [1s, 24h]", c.DNS.TTL)
	}
	if c.Health.Merge != "optimistic" && c.Health.Merge != "majority" {
		errs.Add("health.merge", "%q is not one of optimistic, majority", c.Health.Merge)
	}
	if c.Health.Grace < 0 {
		errs.Add("health.grace", "must be >= 0")
	}
	if c.Health.PanicThreshold < 0 || c.Health.PanicThreshold > 1 {
		errs.Add("health.panic_threshold", "%v is out of range [0, 1]", c.Health.PanicThreshold)
	}
	if c.Health.Embedded {
		c.Health.Check.validate(errs, "health.check.")
	}
	c.Announce.validate(errs)
	if c.Anycast.Interface == "" || len(c.Anycast.Interface) > 15 {
		errs.Add("anycast.interface", "%q is not an interface name (1-15 characters)", c.Anycast.Interface)
	}
	if c.AccessLog.SampleEvery == 0 {
		errs.Add("access_log.sample_every", "must be >= 1")
	}
	if c.Admin.Listen != "" && !anyPort(c.Admin.Listen) && (c.Admin.Listen == c.HTTP.Listen || c.Admin.Listen == c.DNS.Listen) {
		errs.Add("admin.listen", "must differ from the STB-facing listeners")
	}
}

func (t ClientTLS) validate(errs *yamlstrict.Errors, path string) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs.Add(path, "cert_file and key_file go together")
	}
	for _, f := range []struct{ key, file string }{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
		fileExists(errs, path+"."+f.key, f.file)
	}
}

func (t ServerTLS) validate(errs *yamlstrict.Errors, path string) {
	if !t.Enabled() {
		return
	}
	if t.CertFile == "" || t.KeyFile == "" {
		errs.Add(path, "cert_file and key_file are both required for TLS")
	}
	for _, f := range []struct{ key, file string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"client_ca_file", t.ClientCAFile}} {
		fileExists(errs, path+"."+f.key, f.file)
	}
}

func fileExists(errs *yamlstrict.Errors, path, file string) {
	if file == "" {
		return
	}
	if _, err := os.Stat(file); err != nil {
		errs.Add(path, "cannot read %q: %v", file, err)
	}
}

// hostPort checks a listen address; an empty one disables the listener
// unless required.
func hostPort(errs *yamlstrict.Errors, path, v string, required bool) {
	if v == "" {
		if required {
			errs.Add(path, "required")
		}
		return
	}
	host, port, err := net.SplitHostPort(v)
	if err != nil {
		errs.Add(path, "not host:port: %q", v)
		return
	}
	if host != "" && host != "localhost" {
		if _, err := netip.ParseAddr(host); err != nil {
			errs.Add(path, "host %q is not an IP address", host)
		}
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		errs.Add(path, "bad port %q", port)
	}
}

// anyPort reports whether addr asks for any free port (port 0): two such
// listeners never share one.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}
