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
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/stb/accesslog"
	"github.com/anysched/anysched/internal/stb/geoip"
	"github.com/anysched/anysched/internal/stb/netutil"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdguard"
	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/etcd/etcdserver/embedcfg"
	"github.com/anysched/anysched/internal/province/topology"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/security/tlsutil"
	"github.com/anysched/anysched/internal/stb/outlier"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

// Log configures log/slog output.
type Log struct {
	Level  string `yaml:"level"`  // debug | info | warn | error
	Format string `yaml:"format"` // text | json
}

// ClientTLS and ServerTLS are the TLS file settings (tlsutil's).
type (
	ClientTLS = tlsutil.ClientTLS
	ServerTLS = tlsutil.ServerTLS
)

// Embedded configures the single-node etcd a central scheduler runs when no
// external endpoints are configured (embedcfg's).
type Embedded = embedcfg.Config

// Etcd configures the store.
type Etcd struct {
	Endpoints   []string      `yaml:"endpoints"`
	DialTimeout time.Duration `yaml:"dial_timeout"`
	Prefix      string        `yaml:"prefix"`
	TLS         ClientTLS     `yaml:"tls"`
	Embedded    Embedded      `yaml:"embedded"`
	// Housekeeping is the center's compaction, defragmentation and NOSPACE
	// recovery of the etcd it uses (etcdhousekeep's; only the center has
	// it).
	Housekeeping etcdhousekeep.Config `yaml:"housekeeping"`
	// WriteGuard bounds what each identity but the center writes into etcd
	// (etcdguard's; only the center has it).
	WriteGuard etcdguard.Config `yaml:"write_guard"`
}

// Admin is the operator listener: /metrics, /healthz, /readyz, /debug/pprof/.
// Beyond loopback it must serve HTTPS with client certificates (TLS with
// client_ca_file): pprof and the debug pages are not for everyone who can
// reach the management network.
type Admin struct {
	Listen string    `yaml:"listen"`
	TLS    ServerTLS `yaml:"tls"`
}

// GRPC is the central scheduler's admin API listener. Beyond loopback it
// must use mutual TLS: callers are identified by their client certificate
// and get the role it carries (docs/security.md).
type GRPC struct {
	Listen string    `yaml:"listen"`
	TLS    ServerTLS `yaml:"tls"`
	// LocalRole is the role of a plaintext caller on a loopback listener
	// (identity "local"): whoever reaches the center's loopback can already
	// read its keys and its etcd, so admin by default.
	LocalRole string `yaml:"local_role"`
	// MaxRequestBytes bounds one admin request, refused before it is
	// decoded (a 10,000-server province is about 10 MB of YAML).
	MaxRequestBytes int `yaml:"max_request_bytes"`
}

// Audit bounds the admin audit trail the center keeps in etcd.
type Audit struct {
	Keep   int           `yaml:"keep"`    // newest entries kept
	MaxAge time.Duration `yaml:"max_age"` // older entries are trimmed
}

// Drills configures the center's failover drills.
type Drills struct {
	// AllowProduction lets an admin run failover drills on a production
	// center (lab: false); off, every production drill is refused.
	AllowProduction bool `yaml:"allow_production"`
}

// Request-size bounds of grpc.max_request_bytes.
const (
	DefaultMaxRequestBytes = 16 << 20
	minRequestBytes        = 1 << 20
	maxRequestBytes        = 256 << 20
)

// HTTP is the STB-facing redirect listener.
type HTTP struct {
	Listen string `yaml:"listen"` // empty disables it
	// TrustedProxies: X-Forwarded-For is believed only from these networks
	// (written as CIDR prefixes or single addresses).
	TrustedProxies []Network `yaml:"trusted_proxies"`
	// MaxConnections caps the connections open at once (idle keep-alive
	// ones included); one beyond it is reset at once.
	MaxConnections int `yaml:"max_connections"`
	// StripQueryParams are query parameters {query} does not copy to the
	// edge, besides the viewer token ("token"), which it never copies.
	StripQueryParams []string `yaml:"strip_query_params"`
	// Server is "fast" (the STB path parsed and answered on the runtime's
	// poller, anything unusual handed to net/http) or "net/http" (every
	// request through net/http).
	Server string `yaml:"server"`
	// AcceptLoops is the goroutines accepting connections on the fast
	// server; 0: one per CPU.
	AcceptLoops int `yaml:"accept_loops"`
}

// TrustedPrefixes is TrustedProxies as netip prefixes.
func (h HTTP) TrustedPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, len(h.TrustedProxies))
	for i, n := range h.TrustedProxies {
		out[i] = n.Prefix()
	}
	return out
}

// HTTPS is the STB-facing TLS listener: the same answers as http, for
// players given https:// URLs. http.trusted_proxies and
// http.max_connections apply to it too.
type HTTPS struct {
	Listen string `yaml:"listen"` // empty disables it
	// Certificates are picked by the name the STB asks for (SNI); the
	// first also answers STBs that send no name or an unknown one.
	Certificates []CertificateFiles `yaml:"certificates"`
	// ReloadInterval: how often the files are checked for a change
	// (they are reloaded on SIGHUP too); negative: on SIGHUP only.
	ReloadInterval time.Duration `yaml:"reload_interval"`
	// TicketRotation: how often a new session ticket key is made; the
	// last TicketKeys keys are honoured, so a ticket resumes for
	// (TicketKeys-1) to TicketKeys rotations.
	TicketRotation time.Duration `yaml:"ticket_rotation"`
	TicketKeys     int           `yaml:"ticket_keys"`
}

// CertificateFiles is a certificate (PEM, with its chain) and its key.
type CertificateFiles struct {
	CertFile string `yaml:"cert_file"`
	KeyFile  string `yaml:"key_file"`
}

// DNS is the STB-facing authoritative DNS listener (UDP and TCP).
type DNS struct {
	Listen string        `yaml:"listen"` // empty disables it
	TTL    time.Duration `yaml:"ttl"`
	// TrustedResolvers: EDNS Client Subnet is believed only from these
	// networks (written like http.trusted_proxies); everyone else is
	// answered for the packet source.
	TrustedResolvers []Network `yaml:"trusted_resolvers"`
	// MaxTCPConnections caps the DNS-over-TCP connections open at once.
	MaxTCPConnections int `yaml:"max_tcp_connections"`
	// UDPSockets is how many SO_REUSEPORT UDP sockets share the port (the
	// kernel spreads queries over them); 0: one per CPU the process may use.
	UDPSockets int `yaml:"udp_sockets"`
	// UDPReaders is the goroutines reading each socket; 0: one.
	UDPReaders int `yaml:"udp_readers"`
}

// TrustedResolverPrefixes is TrustedResolvers as netip prefixes.
func (d DNS) TrustedResolverPrefixes() []netip.Prefix {
	out := make([]netip.Prefix, len(d.TrustedResolvers))
	for i, n := range d.TrustedResolvers {
		out[i] = n.Prefix()
	}
	return out
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
	// TrustedKeys are Ed25519 public key files (PEM): a topology document
	// must be signed by one of them (the center's apply.signing_key_file)
	// to be used, from etcd or from the cache. Several allow a rotation.
	// Empty: documents are used unverified (a warning at start).
	TrustedKeys []string `yaml:"trusted_keys"`
	// OpstateSignatures is what a daemon with TrustedKeys does with
	// operator state (drains, drills, the balance policy) the center did
	// not sign: "transition" (the default, for the upgrade from centers
	// that did not sign) uses it, warned and counted, until a signed value
	// has verified; "required" refuses it from the start.
	OpstateSignatures string `yaml:"opstate_signatures"`
}

// Operator state signature policies (Snapshot.OpstateSignatures).
const (
	OpstateTransition = "transition"
	OpstateRequired   = "required"
)

// Apply configures how the center guards, keeps and signs topology changes.
type Apply struct {
	// MaxRemovalShare: a change that removes more than this share of the
	// servers or of the zone networks (or empties a region, or removes
	// every node) is refused unless forced by an admin.
	MaxRemovalShare float64 `yaml:"max_removal_share"`
	// HistoryKeep is how many revisions' documents stay in etcd for
	// schedctl diff and rollback.
	HistoryKeep int `yaml:"history_keep"`
	// SigningKeyFile is the Ed25519 private key (PKCS#8 PEM, mode 0600)
	// the center signs each applied document with; empty: unsigned.
	SigningKeyFile string `yaml:"signing_key_file"`
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
	InstanceID string             `yaml:"instance_id"` // default: hostname-role[-region]
	HTTP       HTTP               `yaml:"http"`
	HTTPS      HTTPS              `yaml:"https"`
	DNS        DNS                `yaml:"dns"`
	AccessLog  accesslog.Config   `yaml:"access_log"`
	Health     Health             `yaml:"health"`
	Anycast    AnycastLocal       `yaml:"anycast"`
	Announce   announcecfg.Config `yaml:"announce"`
	GeoIP      GeoIP              `yaml:"geoip"`
	// Outlier: passive ejection of edges that fail STBs between probes.
	Outlier outlier.Config `yaml:"outlier"`
}

// GeoIP places STBs in no coverage zone with a MaxMind-format database
// (GeoLite2-City or GeoIP2-City layout), before the default region.
type GeoIP struct {
	// Database is the .mmdb file's absolute path; empty: no GeoIP.
	Database string `yaml:"database"`
	// ReloadInterval: how often the file is checked for a new version
	// (also reloaded on SIGHUP).
	ReloadInterval time.Duration `yaml:"reload_interval"`
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
	// schedulers check them, and how the center plans a fallen city.
	Alloc CenterAlloc `yaml:"alloc"`
	// Audit: retention of the admin audit trail.
	Audit Audit `yaml:"audit"`
	// Drills: what the admin API allows of failover drills.
	Drills Drills `yaml:"drills"`
	// Apply: the removal guard, the history kept and the signing key.
	Apply Apply `yaml:"apply"`
	// Console: the operator console on the admin listener.
	Console Console `yaml:"console"`
}

// Console is the center's operator console.
type Console struct {
	// LocalRole is the role of a plaintext caller on a loopback admin
	// listener (identity "local"). A browser is not a shell: any page it
	// opens may reach loopback (DNS rebinding), so viewer by default, and
	// the console answers only requests named for loopback.
	LocalRole string `yaml:"local_role"`
	// ClientCAFile: the CA (PEM, a bundle may hold several) whose client
	// certificates carry their role on the console; default
	// grpc.tls.client_ca_file, the operators' CA. The admin listener's
	// client CA also signs scrapers' certificates: those carry no role
	// here. Neither set: only a local caller has a role on the console.
	ClientCAFile string `yaml:"client_ca_file"`
}

// RoleCAFile is the file of the CAs whose certificates carry a role on
// the console ("" : none).
func (c *Center) RoleCAFile() string {
	if c.Console.ClientCAFile != "" {
		return c.Console.ClientCAFile
	}
	return c.GRPC.TLS.ClientCAFile
}

// Regional is a city scheduler's configuration.
type Regional struct {
	Common `yaml:",inline"`
	Region string `yaml:"region"`
	Alloc  Alloc  `yaml:"alloc"`
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
			Housekeeping: etcdhousekeep.DefaultConfig(),
			WriteGuard:   etcdguard.DefaultConfig(),
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
		HTTP:      HTTP{MaxConnections: 50000, Server: "fast"},
		HTTPS:     HTTPS{ReloadInterval: 10 * time.Second, TicketRotation: time.Hour, TicketKeys: 3},
		DNS:       DNS{TTL: 30 * time.Second, MaxTCPConnections: 1000},
		AccessLog: accesslog.DefaultConfig(),
		Health:    Health{MergerOptions: health.DefaultMergerOptions(), Check: health.DefaultCheckerOptions()},
		Anycast:   AnycastLocal{Interface: "anycast0", ManageAddress: true, CenterPrefixMinLength: PrefixMinLength{IPv4: topology.MinCenterPrefixBits4, IPv6: topology.MinCenterPrefixBits6}},
		Announce:  announcecfg.DefaultConfig(),
		GeoIP:     GeoIP{ReloadInterval: 30 * time.Second},
		Outlier:   outlier.DefaultConfig(),
	}
}

// DefaultCenter returns the central scheduler's defaults.
func DefaultCenter() Center {
	c := Center{Common: defaultCommon("/var/lib/anysched/center", "127.0.0.1:9100"), Alloc: DefaultCenterAlloc()}
	c.GRPC.Listen = "127.0.0.1:9090"
	c.GRPC.LocalRole = "admin"
	c.Console.LocalRole = "viewer"
	c.GRPC.MaxRequestBytes = DefaultMaxRequestBytes
	c.Audit = Audit{Keep: 10000, MaxAge: 90 * 24 * time.Hour}
	c.Apply = Apply{MaxRemovalShare: 0.2, HistoryKeep: 20}
	return c
}

// DefaultRegional returns a regional scheduler's defaults.
func DefaultRegional() Regional {
	return Regional{Common: defaultCommon("/var/lib/anysched/regional", "127.0.0.1:9101"), Alloc: DefaultAlloc()}
}

// LoadFile decodes a YAML file over the defaults already in cfg. Its
// errors start "config: FILE:", decoding problems follow one a line, each
// with its key path and line. Whatever decodes is set even then (a value
// that does not keeps its default), so that Problems can report the
// values' problems in the same pass.
func LoadFile(path string, cfg any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config: %w", err) // the error names the file
	}
	if err := yamlstrict.DecodePartial(data, cfg); err != nil {
		return fmt.Errorf("config: %s:\n%w", path, err)
	}
	return nil
}

// Problems joins what LoadFile (of file) could not decode and what
// Validate found, so that an operator fixes a file in one pass; nil when
// both are nil. A value problem about a field that failed to decode is
// left out: it would be about the default the field kept.
func Problems(file string, decodeErr, validateErr error) error {
	if decodeErr == nil {
		if validateErr == nil {
			return nil
		}
		return fmt.Errorf("config: invalid:\n%w", validateErr)
	}
	failed, ok := yamlstrict.AsErrors(decodeErr)
	if !ok || validateErr == nil {
		return decodeErr // an unreadable file: nothing was decoded
	}
	values, ok := yamlstrict.AsErrors(validateErr)
	if !ok {
		values = yamlstrict.Errors{{Msg: validateErr.Error()}}
	}
	all := append(append(yamlstrict.Errors(nil), failed...), values.Excluding(failed)...)
	return fmt.Errorf("config: %s:\n%w", file, all)
}

// Validate checks the central scheduler's configuration.
func (c *Center) Validate() error {
	var errs yamlstrict.Errors
	c.Common.validate(&errs, true)
	hostPort(&errs, "grpc.listen", c.GRPC.Listen, true)
	validateServerTLS(&errs, "grpc.tls", c.GRPC.TLS)
	mutualTLSBeyondLoopback(&errs, "grpc", c.GRPC.Listen, c.GRPC.TLS)
	c.Common.managementListener(&errs, "grpc.listen", c.GRPC.Listen)
	if len(c.Etcd.Endpoints) == 0 {
		c.Common.managementListener(&errs, "etcd.embedded.client_listen", c.Etcd.Embedded.ClientListen)
	}
	if c.GRPC.LocalRole != "" && !slices.Contains([]string{"viewer", "operator", "admin"}, c.GRPC.LocalRole) {
		errs.Add("grpc.local_role", "%q is not one of viewer, operator, admin (empty: plaintext callers get no role)", c.GRPC.LocalRole)
	}
	caFile(&errs, "console.client_ca_file", c.Console.ClientCAFile)
	if c.Console.LocalRole != "" && !slices.Contains([]string{"viewer", "operator", "admin"}, c.Console.LocalRole) {
		errs.Add("console.local_role", "%q is not one of viewer, operator, admin (empty: plaintext callers get no role)", c.Console.LocalRole)
	}
	if c.GRPC.MaxRequestBytes < minRequestBytes || c.GRPC.MaxRequestBytes > maxRequestBytes {
		errs.Add("grpc.max_request_bytes", "%d is out of range [%d, %d]", c.GRPC.MaxRequestBytes, minRequestBytes, maxRequestBytes)
	}
	if c.Audit.Keep < 1 {
		errs.Add("audit.keep", "must be >= 1")
	}
	if c.Audit.MaxAge < time.Hour {
		errs.Add("audit.max_age", "%s must be >= 1h", c.Audit.MaxAge)
	}
	if !(c.Apply.MaxRemovalShare > 0 && c.Apply.MaxRemovalShare <= 1) {
		errs.Add("apply.max_removal_share", "%v is out of range (0, 1]", c.Apply.MaxRemovalShare)
	}
	if c.Apply.HistoryKeep < 2 || c.Apply.HistoryKeep > 1000 {
		errs.Add("apply.history_keep", "%d is out of range [2, 1000]", c.Apply.HistoryKeep)
	}
	if why := c.Etcd.Shared(true); c.Apply.SigningKeyFile == "" && why != "" {
		errs.Add("apply.signing_key_file", "required: %s, and the schedulers believe only a signed topology (schedctl keygen --signing)", why)
	}
	fileExists(&errs, "apply.signing_key_file", c.Apply.SigningKeyFile)
	privateFile(&errs, "apply.signing_key_file", c.Apply.SigningKeyFile)
	if f := c.Apply.SigningKeyFile; f != "" && !slices.ContainsFunc(errs, func(e *yamlstrict.FieldError) bool { return e.Path == "apply.signing_key_file" }) {
		if _, err := signing.LoadPrivateKey(f); err != nil {
			errs.Add("apply.signing_key_file", "%v", err)
		}
	}
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
	if r.Region != "" && r.Etcd.TLS.CertFile != "" {
		// A file that is no certificate is ClientTLS.validate's to report.
		if cn, err := certCN(r.Etcd.TLS.CertFile); err == nil {
			r.checkIdentity(&errs, cn)
		}
	}
	return errs.Err()
}

// checkIdentity checks the certificate's CN, the scheduler's etcd user:
// etcd lets it write only its own region's and instance's keys, so
// another region or instance id would have its registration, claims and
// plan state refused.
func (r *Regional) checkIdentity(errs *yamlstrict.Errors, cn string) {
	parsed, err := etcdauth.ParseIdentity(cn)
	switch {
	case err != nil:
		errs.Add("etcd.tls.cert_file", "CN: %v", err)
	case parsed.Kind != etcdauth.Regional:
		errs.Add("etcd.tls.cert_file", "CN %q is a %s's: a regional scheduler's etcd certificate has CN %s%s.<instance_id>", cn, parsed.Kind, etcdauth.RegionalPrefix, r.Region)
	case parsed.Region != r.Region:
		errs.Add("etcd.tls.cert_file", "CN %q names region %q, but this scheduler serves %q: etcd would refuse its writes", cn, parsed.Region, r.Region)
	case r.InstanceID != "" && parsed.Instance != r.InstanceID:
		errs.Add("etcd.tls.cert_file", "CN %q names instance %q, but instance_id is %q: etcd would refuse its registration", cn, parsed.Instance, r.InstanceID)
	}
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
	c.Etcd.validate(errs, embeddedAllowed) // etcd.go
	hostPort(errs, "admin.listen", c.Admin.Listen, false)
	validateServerTLS(errs, "admin.tls", c.Admin.TLS)
	if c.Admin.Listen != "" {
		if host, _, err := net.SplitHostPort(c.Admin.Listen); err == nil && wildcardHost(host) {
			errs.Add("admin.listen", "%q listens on every address; name the management address (pprof and debug pages must not reach the STB network)", c.Admin.Listen)
		} else {
			mutualTLSBeyondLoopback(errs, "admin", c.Admin.Listen, c.Admin.TLS)
		}
	}
	if c.Snapshot.MaxStaleness <= 0 {
		errs.Add("snapshot.max_staleness", "must be > 0")
	}
	if c.Snapshot.ConfirmInterval <= 0 {
		errs.Add("snapshot.confirm_interval", "must be > 0")
	} else if c.Snapshot.MaxStaleness > 0 && c.Snapshot.ConfirmInterval >= c.Snapshot.MaxStaleness {
		errs.Add("snapshot.confirm_interval", "%s must be below snapshot.max_staleness %s", c.Snapshot.ConfirmInterval, c.Snapshot.MaxStaleness)
	}
	if why := c.Etcd.Shared(embeddedAllowed); len(c.Snapshot.TrustedKeys) == 0 && why != "" {
		errs.Add("snapshot.trusted_keys", "required: %s, and without the center's public key whoever can write etcd could redirect the province (schedctl keygen --signing)", why)
	}
	switch c.Snapshot.OpstateSignatures {
	case "", OpstateTransition:
	case OpstateRequired:
		if len(c.Snapshot.TrustedKeys) == 0 {
			errs.Add("snapshot.opstate_signatures", "required needs snapshot.trusted_keys: without the center's public key no signature can be checked")
		}
	default:
		errs.Add("snapshot.opstate_signatures", "%q is not %s or %s", c.Snapshot.OpstateSignatures, OpstateTransition, OpstateRequired)
	}
	for i, f := range c.Snapshot.TrustedKeys {
		p := fmt.Sprintf("snapshot.trusted_keys[%d]", i)
		if _, err := signing.LoadPublicKey(f); err != nil {
			errs.Add(p, "%v", err)
		}
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
	if c.HTTP.MaxConnections < 1 {
		errs.Add("http.max_connections", "must be >= 1")
	}
	c.HTTP.validateStrip(errs)
	if c.HTTP.Server != "fast" && c.HTTP.Server != "net/http" {
		errs.Add("http.server", "%q is not one of fast, net/http", c.HTTP.Server)
	}
	if c.HTTP.AcceptLoops < 0 || c.HTTP.AcceptLoops > 256 {
		errs.Add("http.accept_loops", "%d is out of range [0, 256] (0: one per CPU)", c.HTTP.AcceptLoops)
	}
	c.HTTPS.validate(errs)
	hostPort(errs, "dns.listen", c.DNS.Listen, false)
	if c.DNS.TTL < time.Second || c.DNS.TTL > 24*time.Hour {
		errs.Add("dns.ttl", "%s is out of range [1s, 24h]", c.DNS.TTL)
	}
	for i, p := range c.DNS.TrustedResolvers {
		if !p.Prefix().IsValid() {
			errs.Add(fmt.Sprintf("dns.trusted_resolvers[%d]", i), "required: an IP address or CIDR prefix")
		}
	}
	if c.DNS.MaxTCPConnections < 1 {
		errs.Add("dns.max_tcp_connections", "must be >= 1")
	}
	if c.DNS.UDPSockets < 0 || c.DNS.UDPSockets > 256 {
		errs.Add("dns.udp_sockets", "%d is out of range [0, 256] (0: one per CPU)", c.DNS.UDPSockets)
	}
	if c.DNS.UDPReaders < 0 || c.DNS.UDPReaders > 64 {
		errs.Add("dns.udp_readers", "%d is out of range [0, 64] (0: one)", c.DNS.UDPReaders)
	}
	if es, ok := yamlstrict.AsErrors(c.Health.MergerOptions.Validate("health.")); ok {
		*errs = append(*errs, es...)
	}
	if c.Health.Embedded {
		if es, ok := yamlstrict.AsErrors(c.Health.Check.Validate("health.check.")); ok {
			*errs = append(*errs, es...)
		}
	}
	if es, ok := yamlstrict.AsErrors(c.Announce.Validate("announce.")); ok {
		*errs = append(*errs, es...)
	}
	c.Anycast.validate(errs)
	if es, ok := yamlstrict.AsErrors(c.AccessLog.Validate("access_log.")); ok {
		*errs = append(*errs, es...)
	}
	if es, ok := yamlstrict.AsErrors(c.Outlier.Validate("outlier.")); ok {
		*errs = append(*errs, es...)
	}
	if db := c.GeoIP.Database; db != "" && !filepath.IsAbs(db) {
		errs.Add("geoip.database", "%q is not an absolute path", db)
	} else if db != "" {
		// Opened as the daemon opens it at start, so that --check-config
		// fails where the start would: a missing file, one that is not a
		// MaxMind DB.
		if _, err := geoip.Check(db); err != nil {
			errs.Add("geoip.database", "%v", err)
		}
	}
	if c.GeoIP.ReloadInterval < time.Second {
		errs.Add("geoip.reload_interval", "%v is below 1s", c.GeoIP.ReloadInterval)
	}
	if c.Admin.Listen != "" && !anyPort(c.Admin.Listen) && (c.Admin.Listen == c.HTTP.Listen || c.Admin.Listen == c.HTTPS.Listen || c.Admin.Listen == c.DNS.Listen) {
		errs.Add("admin.listen", "must differ from the STB-facing listeners")
	} else if ah, ok := listenHost(c.Admin.Listen); ok && !netutil.LoopbackHost(ah) {
		for _, stb := range []struct{ key, addr string }{{"http.listen", c.HTTP.Listen}, {"https.listen", c.HTTPS.Listen}, {"dns.listen", c.DNS.Listen}} {
			if h, ok := listenHost(stb.addr); ok && (h == ah || wildcardHost(h)) {
				errs.Add("admin.listen", "shares its address with %s %q, the STB-facing address: put it on the management network", stb.key, stb.addr)
			}
		}
	}
}

// managementListener refuses a management listener (the admin API, the
// embedded etcd) on every address or on an STB-facing one: a wildcard
// also listens on the anycast service address, which every STB reaches.
func (c *Common) managementListener(errs *yamlstrict.Errors, key, listen string) {
	h, ok := listenHost(listen)
	if !ok {
		return
	}
	if wildcardHost(h) {
		errs.Add(key, "%q listens on every address, the STB-facing ones included: name an address of the management network (or loopback)", listen)
		return
	}
	if netutil.LoopbackHost(h) {
		return
	}
	for _, stb := range []struct{ key, addr string }{{"http.listen", c.HTTP.Listen}, {"https.listen", c.HTTPS.Listen}, {"dns.listen", c.DNS.Listen}} {
		if sh, ok := listenHost(stb.addr); ok && sh == h {
			errs.Add(key, "shares its address with %s %q, the STB-facing address: put it on the management network", stb.key, stb.addr)
		}
	}
}

func (h HTTPS) validate(errs *yamlstrict.Errors) {
	hostPort(errs, "https.listen", h.Listen, false)
	if h.Listen != "" && len(h.Certificates) == 0 {
		errs.Add("https.certificates", "required with https.listen: at least one cert_file and key_file")
	}
	for i, cf := range h.Certificates {
		p := fmt.Sprintf("https.certificates[%d]", i)
		if cf.CertFile == "" || cf.KeyFile == "" {
			errs.Add(p, "cert_file and key_file are both required")
		}
		fileExists(errs, p+".cert_file", cf.CertFile)
		fileExists(errs, p+".key_file", cf.KeyFile)
		privateFile(errs, p+".key_file", cf.KeyFile)
		certKeyPair(errs, p, cf.CertFile, cf.KeyFile) // tlsfiles.go
	}
	if h.TicketRotation < time.Minute || h.TicketRotation > 7*24*time.Hour {
		errs.Add("https.ticket_rotation", "%s is out of range [1m, 168h]", h.TicketRotation)
	}
	if h.TicketKeys < 1 || h.TicketKeys > 16 {
		errs.Add("https.ticket_keys", "%d is out of range [1, 16]", h.TicketKeys)
	}
	if h.ReloadInterval > 0 && h.ReloadInterval < time.Second {
		errs.Add("https.reload_interval", "%s is below 1s (negative: reload on SIGHUP only)", h.ReloadInterval)
	}
}

func validateClientTLS(errs *yamlstrict.Errors, path string, t ClientTLS) {
	if (t.CertFile == "") != (t.KeyFile == "") {
		errs.Add(path, "cert_file and key_file go together")
	}
	for _, f := range []struct{ key, file string }{{"ca_file", t.CAFile}, {"cert_file", t.CertFile}, {"key_file", t.KeyFile}} {
		fileExists(errs, path+"."+f.key, f.file)
	}
	privateFile(errs, path+".key_file", t.KeyFile)
	certKeyPair(errs, path, t.CertFile, t.KeyFile) // tlsfiles.go
	caFile(errs, path+".ca_file", t.CAFile)
}

func validateServerTLS(errs *yamlstrict.Errors, path string, t ServerTLS) {
	if !t.Enabled() {
		return
	}
	if t.CertFile == "" || t.KeyFile == "" {
		errs.Add(path, "cert_file and key_file are both required for TLS")
	}
	for _, f := range []struct{ key, file string }{{"cert_file", t.CertFile}, {"key_file", t.KeyFile}, {"client_ca_file", t.ClientCAFile}} {
		fileExists(errs, path+"."+f.key, f.file)
	}
	privateFile(errs, path+".key_file", t.KeyFile)
	certKeyPair(errs, path, t.CertFile, t.KeyFile) // tlsfiles.go
	caFile(errs, path+".client_ca_file", t.ClientCAFile)
}

// privateFile refuses a private key or secret that group or others may
// read: whoever can read it can impersonate this daemon. Certificates and
// CA files may be world-readable. A file that cannot be found is reported
// by fileExists, not here.
func privateFile(errs *yamlstrict.Errors, path, file string) {
	if file == "" {
		return
	}
	if fi, err := os.Stat(file); err == nil && fi.Mode().Perm()&0o077 != 0 {
		errs.Add(path, "%s is readable by group/others (mode %#o): chmod 600", file, uint32(fi.Mode().Perm()))
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

// mutualTLSBeyondLoopback: a listener beyond loopback (a wildcard address
// included) must authenticate its callers with client certificates.
func mutualTLSBeyondLoopback(errs *yamlstrict.Errors, key, listen string, t ServerTLS) {
	host, ok := listenHost(listen)
	if !ok || netutil.LoopbackHost(host) {
		return
	}
	switch {
	case t.CertFile == "" || t.KeyFile == "":
		errs.Add(key+".tls.client_ca_file", "%s.listen %q is beyond loopback: it needs mutual TLS (%s.tls.cert_file, key_file and client_ca_file)", key, listen, key)
	case t.ClientCAFile == "":
		errs.Add(key+".tls.client_ca_file", "required: %s.listen %q is beyond loopback, and TLS without client certificates authenticates nobody", key, listen)
	}
}

// listenHost is the host of a listen address; false when there is none.
func listenHost(addr string) (string, bool) {
	if addr == "" {
		return "", false
	}
	h, _, err := net.SplitHostPort(addr)
	return h, err == nil
}

// wildcardHost: an empty host, 0.0.0.0 or :: listens on every address.
func wildcardHost(h string) bool {
	a, err := netip.ParseAddr(h)
	return h == "" || (err == nil && a.IsUnspecified())
}

// anyPort reports whether addr asks for any free port (port 0): two such
// listeners never share one.
func anyPort(addr string) bool {
	_, port, err := net.SplitHostPort(addr)
	return err == nil && port == "0"
}
