package config

import (
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/allocation/qoe"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/stb/token"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestDefaultsAreValid(t *testing.T) {
	c := DefaultCenter()
	if err := c.Validate(); err != nil {
		t.Fatalf("center defaults: %v", err)
	}
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := r.Validate(); err != nil {
		t.Fatalf("regional defaults: %v", err)
	}
}

func TestFileOverridesDefaultsAndKeepsTheRest(t *testing.T) {
	c := DefaultCenter()
	if err := LoadFile(write(t, "grpc:\n  listen: 127.0.0.1:1234\nsnapshot:\n  max_staleness: 90s\n"), &c); err != nil {
		t.Fatal(err)
	}
	if c.GRPC.Listen != "127.0.0.1:1234" || c.Snapshot.MaxStaleness != 90*time.Second {
		t.Fatalf("file values not applied: %+v", c)
	}
	if c.Etcd.Embedded.ClientListen != "127.0.0.1:2379" || c.Snapshot.ConfirmInterval != 2*time.Second {
		t.Fatalf("defaults lost: %+v", c)
	}
}

func TestLoadErrorsNameTheField(t *testing.T) {
	tests := []struct{ name, body, want string }{
		{"unknown key", "etcd:\n  endpoint: [x]\n", `etcd.endpoint: unknown field (did you mean "endpoints"?)`},
		{"bad duration", "snapshot:\n  max_staleness: soon\n", "snapshot.max_staleness: invalid value"},
		{"wrong kind", "etcd:\n  endpoints: http://x\n", "etcd.endpoints: expected a list"},
		{"regional key in center", "region: hefei\n", "region: unknown field"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := DefaultCenter()
			err := LoadFile(write(t, tt.body), &c)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("got %v, want %q", err, tt.want)
			}
		})
	}
}

func TestValidateReportsEveryProblem(t *testing.T) {
	r := DefaultRegional()
	r.Log.Level = "loud"
	r.Etcd.Endpoints = []string{"127.0.0.1:2379"}
	r.Admin.Listen = "nowhere"
	r.Snapshot.MaxStaleness = 0
	r.Etcd.TLS.CertFile = "/no/such/cert.pem"
	err := r.Validate()
	if err == nil {
		t.Fatal("invalid config accepted")
	}
	for _, want := range []string{
		"region: required", "log.level:", "etcd.endpoints[0]: not an http(s) URL",
		"admin.listen: not host:port", "snapshot.max_staleness: must be > 0",
		"etcd.tls: cert_file and key_file go together", "etcd.tls.cert_file: cannot read",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
}

func TestCenterGRPCTLSNeedsBothFiles(t *testing.T) {
	c := DefaultCenter()
	c.GRPC.TLS.ClientCAFile = "/no/such/ca.pem"
	err := c.Validate()
	if err == nil || !strings.Contains(err.Error(), "grpc.tls: cert_file and key_file are both required") || !strings.Contains(err.Error(), "grpc.tls.client_ca_file: cannot read") {
		t.Fatalf("got %v", err)
	}
}

func TestAllocValidation(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	short := filepath.Join(dir, "short.key")
	if err := os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(short, []byte("tooshort"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		edit func(a *Alloc)
		want string // "" = valid
	}{
		{"defaults", func(*Alloc) {}, ""},
		{"required with a key", func(a *Alloc) { a.Auth, a.Keys = "required", []token.KeyFile{{ID: "k1", SecretFile: good}} }, ""},
		{"required without keys", func(a *Alloc) { a.Auth = "required" }, "alloc.keys: at least one key"},
		{"unknown auth", func(a *Alloc) { a.Auth = "sometimes" }, `alloc.auth: "sometimes" is not one of`},
		{"short secret", func(a *Alloc) { a.Keys = []token.KeyFile{{ID: "k1", SecretFile: short}} }, "alloc.keys[0].secret_file: "},
		{"missing secret file", func(a *Alloc) { a.Keys = []token.KeyFile{{ID: "k1", SecretFile: filepath.Join(dir, "nope")}} }, "alloc.keys[0].secret_file: "},
		{"duplicate ids", func(a *Alloc) { a.Keys = []token.KeyFile{{ID: "k", SecretFile: good}, {ID: "k", SecretFile: good}} }, `alloc.keys[1].id: duplicate key id "k"`},
		{"period too short", func(a *Alloc) { a.Period = 100 * time.Millisecond }, "alloc.period: 100ms is out of range"},
		{"ttl below period", func(a *Alloc) { a.SessionTTL = time.Second }, "alloc.session_ttl: 1s must be at least"},
		{"solve timeout too long", func(a *Alloc) { a.SolveTimeout = a.Period }, "alloc.solve_timeout:"},
		{"cold solve timeout too long", func(a *Alloc) { a.ColdSolveTimeout = a.Period + time.Second }, "alloc.cold_solve_timeout:"},
		{"target gap too wide", func(a *Alloc) { a.TargetGap = 0.5 }, "alloc.target_gap: 0.5 is out of range (0, 0.1]"},
		{"negative profile", func(a *Alloc) { a.Default.Gift = -1 }, "alloc.default_profile.gift: must be >= 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := DefaultRegional()
			r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
			tt.edit(&r.Alloc)
			err := r.Validate()
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("Validate: %v", err)
			case tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)):
				t.Fatalf("Validate = %v, want %q", err, tt.want)
			}
		})
	}
	r := DefaultRegional()
	if err := LoadFile(write(t, "alloc:\n  perod: 5s\n"), &r); err == nil || !strings.Contains(err.Error(), "alloc.perod: unknown field") {
		t.Fatalf("unknown alloc key: %v", err)
	}
}

func TestCenterLabEtcdMembers(t *testing.T) {
	c := DefaultCenter()
	c.LabEtcdMembers = []string{"10.0.1.2:2390", "nowhere"}
	err := c.Validate()
	for _, want := range []string{"lab_etcd_members: only in a lab", "lab_etcd_members: needs etcd.endpoints", "lab_etcd_members[1]: not host:port"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in: %v", want, err)
		}
	}
	c.Lab, c.LabEtcdMembers = true, []string{"10.0.1.2:2390"}
	c.Etcd.Endpoints = []string{"http://127.0.0.1:2379"} // beyond loopback it would need https (TestEtcdTransport)
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
}

func TestAllocModel(t *testing.T) {
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := LoadFile(write(t, "alloc:\n  model:\n    a: 5\n    theta_s: 0.3\n"), &r); err != nil {
		t.Fatal(err)
	}
	// A key left out keeps its default.
	want := qoe.DefaultParams()
	want.A, want.Theta = 5, 0.3
	if err := r.Validate(); err != nil || r.Alloc.Params != want {
		t.Fatalf("model %+v: %v", r.Alloc.Params, err)
	}
	bad := DefaultRegional()
	bad.Region, bad.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := LoadFile(write(t, "alloc:\n  model:\n    omega: .nan\n"), &bad); err == nil || !strings.Contains(err.Error(), "alloc.model.omega: invalid value: .nan is not a finite number") {
		t.Fatalf(".nan: %v", err)
	}
	if err := LoadFile(write(t, "alloc:\n  model:\n    c: -1\n    theta_s: 0\n    omega: 1e9\n"), &bad); err != nil {
		t.Fatal(err)
	}
	err := bad.Validate()
	for _, want := range []string{"alloc.model.c: -1 is out of range", "alloc.model.theta_s: must be > 0", "alloc.model.omega: 1e+09 is out of range [0, 1e+06]"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in %v", want, err)
		}
	}
	if err := LoadFile(write(t, "alloc:\n  model:\n    alpha: 1\n"), &bad); err == nil || !strings.Contains(err.Error(), "alloc.model.alpha: unknown field") {
		t.Errorf("unknown model key: %v", err)
	}
}

// TestModelOverrides: alloc.model decodes over the model's defaults, so
// the keys given override theirs and the rest keep theirs.
func TestModelOverrides(t *testing.T) {
	r := DefaultRegional()
	if err := LoadFile(write(t, "alloc:\n  model:\n    a: 5\n    fallback_latency_s: 0.1\n"), &r); err != nil {
		t.Fatal(err)
	}
	want := qoe.DefaultParams()
	want.A, want.FallbackLatency = 5, 0.1
	if r.Alloc.Params != want {
		t.Fatalf("model = %+v, want %+v", r.Alloc.Params, want)
	}
	if DefaultRegional().Alloc.Params != qoe.DefaultParams() || DefaultCenter().Alloc.Params != qoe.DefaultParams() {
		t.Fatal("no overrides must give the defaults")
	}
}

// TestCenterViewerTokens: the center's alloc section takes the token keys a
// city's has, is validated the same way, and refuses the planning keys.
func TestCenterViewerTokens(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "good.key")
	if err := os.WriteFile(good, []byte("0123456789abcdef0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	c := DefaultCenter()
	if err := LoadFile(write(t, "alloc:\n  auth: required\n  keys:\n    - {id: k1, secret_file: "+good+"}\n  default_profile: {desired_kbps: 2500}\n"), &c); err != nil {
		t.Fatal(err)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if keys, err := c.Alloc.ReadKeys("alloc."); err != nil || len(keys) != 1 || keys[0].ID != "k1" || c.Alloc.Leeway != 30*time.Second || c.Alloc.Default.DesiredKbps != 2500 {
		t.Fatalf("loaded %+v, keys %v, %v", c.Alloc, keys, err)
	}
	c = DefaultCenter()
	c.Alloc.Auth = "required"
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "alloc.keys: at least one key") {
		t.Fatalf("required without keys: %v", err)
	}
	// The center plans fallen cities with the cities' keys.
	c = DefaultCenter()
	if err := LoadFile(write(t, "alloc:\n  period: 5s\n  state_interval: 5s\n  plan_fallen_cities: false\n"), &c); err != nil || c.Alloc.Period != 5*time.Second || c.Alloc.PlanFallenCities {
		t.Fatalf("planning keys on the center: %+v, %v", c.Alloc, err)
	}
	if !DefaultCenter().Alloc.PlanFallenCities {
		t.Fatal("a center plans fallen cities by default")
	}
	c = DefaultCenter()
	if err := LoadFile(write(t, "alloc:\n  plan_fallen: true\n"), &c); err == nil || !strings.Contains(err.Error(), "plan_fallen") {
		t.Fatalf("an unknown key under the center's alloc: %v", err)
	}
	c = DefaultCenter()
	c.Alloc.StateInterval = time.Second
	if err := c.Validate(); err == nil || !strings.Contains(err.Error(), "alloc.state_interval") {
		t.Fatalf("state_interval below the period: %v", err)
	}
}

// TestTypedValues: addresses, prefixes and communities decode into typed
// values from the forms operators write; a malformed one is a decoding
// error with its key path and line.
func TestTypedValues(t *testing.T) {
	r := DefaultRegional()
	body := `http:
  trusted_proxies: [127.0.0.1, 10.0.0.0/8, "::1", 10.1.2.3/16]
announce:
  mode: bgp
  bgp:
    asn: 65201
    router_id: 10.1.0.2
    communities: ["65101:100", "65535:0"]
    peers:
      - {address: 10.1.0.1, asn: 65101}
`
	if err := LoadFile(write(t, body), &r); err != nil {
		t.Fatal(err)
	}
	b := r.Announce.BGP
	if b.RouterID != netip.MustParseAddr("10.1.0.2") || b.Peers[0].Address != netip.MustParseAddr("10.1.0.1") {
		t.Errorf("addresses: %v, %v", b.RouterID, b.Peers[0].Address)
	}
	if got := b.CommunityValues(); !slices.Equal(got, []uint32{65101<<16 | 100, 65535 << 16}) || b.Communities[0].String() != "65101:100" {
		t.Errorf("communities: %v (%v)", got, b.Communities)
	}
	want := []netip.Prefix{netip.MustParsePrefix("127.0.0.1/32"), netip.MustParsePrefix("10.0.0.0/8"), netip.MustParsePrefix("::1/128"), netip.MustParsePrefix("10.1.0.0/16")}
	if got := r.HTTP.TrustedPrefixes(); !slices.Equal(got, want) {
		t.Errorf("trusted proxies: %v, want %v", got, want)
	}
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}

	bad := `http:
  trusted_proxies: [127.0.0.1, lb.example]
announce:
  bgp:
    router_id: 10.1.0.256
    communities: ["65101:100", "65101-100", "70000:1"]
    peers:
      - {address: router1, asn: 65101}
`
	err := LoadFile(write(t, bad), &r)
	for _, want := range []string{
		`http.trusted_proxies[1]: invalid value: not an IP address or CIDR prefix: "lb.example" (line 2)`,
		`announce.bgp.router_id: invalid value: ParseAddr("10.1.0.256"): IPv4 field has value >255 (line 5)`,
		`announce.bgp.communities[1]: invalid value: "65101-100" is not ASN:VALUE with two 16-bit numbers (line 6)`,
		`announce.bgp.communities[2]: invalid value: "70000:1" is not ASN:VALUE`,
		`announce.bgp.peers[0].address: invalid value: ParseAddr("router1"): unable to parse IP (line 8)`,
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	if err != nil && !strings.HasPrefix(err.Error(), "config: ") {
		t.Errorf("error prefix: %v", err)
	}
}

// TestBGPValidation: the bgp mode's rules, on typed values.
func TestBGPValidation(t *testing.T) {
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	r.Announce.Mode = "bgp"
	r.Announce.BGP.ASPathPrepend = 11
	r.Announce.BGP.Peers = []announcecfg.BGPPeer{{Port: 70000, HoldTime: time.Second}, {Address: netip.MustParseAddr("10.1.0.1"), ASN: 1, HoldTime: 9 * time.Second, Keepalive: 9 * time.Second}}
	err := r.Validate()
	for _, want := range []string{
		"announce.bgp.asn: required in bgp mode",
		"announce.bgp.router_id: required in bgp mode",
		"announce.bgp.peers[0].address: required",
		"announce.bgp.peers[0].asn: required",
		"announce.bgp.peers[0].port: 70000 is out of range",
		"announce.bgp.peers[0].hold_time: 1s is below BGP's minimum of 3s",
		"announce.bgp.peers[1].keepalive: 9s must be below hold_time 9s",
		"announce.bgp.as_path_prepend: 11 is out of range [0, 10]",
	} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing %q in:\n%v", want, err)
		}
	}
	r.Announce.Mode = "isis"
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), `announce.mode: "isis" is not one of none, bgp, ospf`) {
		t.Errorf("unknown mode: %v", err)
	}
	r.Announce.Mode = announcecfg.ModeBGP
	r.Announce.BGP.RouterID = netip.MustParseAddr("2001:db8::1")
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "announce.bgp.router_id: 2001:db8::1 is not an IPv4 address") {
		t.Errorf("IPv6 router id: %v", err)
	}
	r.HTTP.TrustedProxies = []Network{{}}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "http.trusted_proxies[0]: required: an IP address or CIDR prefix") {
		t.Errorf("zero network: %v", err)
	}
}

// TestBaseIsShared: the three daemons embed one Base, decoded from the same
// keys and validated by the same rules.
func TestBaseIsShared(t *testing.T) {
	body := "etcd:\n  endpoints: [http://10.0.0.1:2379]\n  prefix: /p/\nadmin:\n  listen: 127.0.0.1:9999\nlog:\n  level: debug\n  format: json\nsnapshot:\n  cache_file: /tmp/x.cache\n"
	c, r, k := DefaultCenter(), DefaultRegional(), DefaultChecker()
	for _, cfg := range []struct {
		v    any
		base *Base
	}{{&c, &c.Base}, {&r, &r.Base}, {&k, &k.Base}} {
		if err := LoadFile(write(t, body), cfg.v); err != nil {
			t.Fatal(err)
		}
		b := cfg.base
		if b.Etcd.Endpoints[0] != "http://10.0.0.1:2379" || b.Etcd.Prefix != "/p/" || b.Admin.Listen != "127.0.0.1:9999" ||
			b.Log != (Log{Level: "debug", Format: "json"}) || b.Snapshot.CacheFile != "/tmp/x.cache" || b.Snapshot.MaxStaleness != 5*time.Minute {
			t.Errorf("%T: base %+v", cfg.v, *b)
		}
	}
	k.Log.Format = "xml"
	k.Etcd.Prefix = "p"
	err := k.Validate()
	for _, want := range []string{"region: required", `log.format: "xml" is not one of text, json`, `etcd.prefix: "p" must start and end with '/'`} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("checker: missing %q in:\n%v", want, err)
		}
	}
	if err := LoadFile(write(t, "instance_id: x\n"), &k); err == nil || !strings.Contains(err.Error(), "instance_id: unknown field") {
		t.Errorf("a scheduler key in the checker's file: %v", err)
	}
}

// TestCheckerTimeoutFitsInterval: nothing lowers the timeout behind the
// operator's back; a timeout above the interval names both keys.
func TestCheckerTimeoutFitsInterval(t *testing.T) {
	k := DefaultChecker()
	k.Region, k.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	if err := k.Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	k.Interval = 200 * time.Millisecond
	if err := k.Validate(); err == nil || !strings.Contains(err.Error(), "timeout: 250ms must be at most interval 200ms") {
		t.Errorf("timeout above interval: %v", err)
	}
	if k.Timeout != 250*time.Millisecond {
		t.Errorf("timeout changed to %s", k.Timeout)
	}
	k.Timeout = 0
	if err := k.Validate(); err == nil || !strings.Contains(err.Error(), "timeout: must be > 0") {
		t.Errorf("zero timeout: %v", err)
	}
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	r.Health.Embedded = true
	r.Health.Check.Interval = 100 * time.Millisecond
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), "health.check.timeout: 250ms must be at most health.check.interval 100ms") {
		t.Errorf("embedded checker: %v", err)
	}
}

// TestRegionCenterIsReserved: "center" names the central scheduler.
func TestRegionCenterIsReserved(t *testing.T) {
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "center", []string{"http://127.0.0.1:2379"}
	if err := r.Validate(); err == nil || !strings.Contains(err.Error(), `region: "center" is reserved for the central scheduler`) {
		t.Errorf("regional: %v", err)
	}
	// A checker of region center is the province's: it checks every region.
	k := DefaultChecker()
	k.Region, k.Etcd.Endpoints = "center", []string{"http://127.0.0.1:2379"}
	if err := k.Validate(); err != nil {
		t.Errorf("a province-wide checker: %v", err)
	}
}

func TestNetworkText(t *testing.T) {
	for in, want := range map[string]string{"10.0.0.1": "10.0.0.1/32", "10.0.0.7/24": "10.0.0.0/24", "::ffff:10.0.0.1": "10.0.0.1/32", "2001:db8::/32": "2001:db8::/32"} {
		n, err := ParseNetwork(in)
		if err != nil || n.String() != want {
			t.Errorf("%s: %v %v, want %s", in, n, err, want)
		}
		b, _ := n.MarshalText()
		var back Network
		if err := back.UnmarshalText(b); err != nil || back != n {
			t.Errorf("%s: round trip %v %v", in, back, err)
		}
	}
	for _, s := range []string{"", "x", "10.0.0.0/33", "fe80::1%eth0"} {
		if _, err := ParseNetwork(s); err == nil {
			t.Errorf("%q accepted", s)
		}
	}
}

// TestAdminListenApartFromSTBs: the admin listener may not share the STB
// listener's address, but any number of listeners may ask for port 0 (tests
// and embedding callers read the bound ports back).
func TestAdminListenApartFromSTBs(t *testing.T) {
	for _, c := range []struct {
		admin, http string
		ok          bool
	}{
		{"127.0.0.1:9101", "127.0.0.1:9101", false},
		{"127.0.0.1:0", "127.0.0.1:0", true},
		{"127.0.0.1:9101", "127.0.0.1:80", true},
	} {
		r := DefaultRegional()
		r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
		r.Admin.Listen, r.HTTP.Listen = c.admin, c.http
		err := r.Validate()
		if got := err == nil || !strings.Contains(err.Error(), "admin.listen"); got != c.ok {
			t.Errorf("admin %s, http %s: %v", c.admin, c.http, err)
		}
	}
}

// TestFrontEndLimits: the STB-facing limits have safe defaults, load from
// the file, and out-of-range values name their field.
func TestFrontEndLimits(t *testing.T) {
	r := DefaultRegional()
	if r.HTTP.MaxConnections != 50000 || r.DNS.MaxTCPConnections != 1000 || r.AccessLog.MaxErrorsPerSecond != 50 || len(r.DNS.TrustedResolvers) != 0 {
		t.Fatalf("defaults: http %d, dns %d, errors/s %d, resolvers %v", r.HTTP.MaxConnections, r.DNS.MaxTCPConnections, r.AccessLog.MaxErrorsPerSecond, r.DNS.TrustedResolvers)
	}
	body := "region: hefei\netcd:\n  endpoints: [http://127.0.0.1:2379]\n" +
		"http:\n  max_connections: 10\ndns:\n  trusted_resolvers: [10.9.0.0/24, 10.9.1.53]\n  max_tcp_connections: 5\n" +
		"access_log:\n  max_errors_per_second: 7\n"
	if err := LoadFile(write(t, body), &r); err != nil {
		t.Fatal(err)
	}
	if err := r.Validate(); err != nil {
		t.Fatal(err)
	}
	want := []netip.Prefix{netip.MustParsePrefix("10.9.0.0/24"), netip.MustParsePrefix("10.9.1.53/32")}
	if r.HTTP.MaxConnections != 10 || r.DNS.MaxTCPConnections != 5 || r.AccessLog.MaxErrorsPerSecond != 7 || !slices.Equal(r.DNS.TrustedResolverPrefixes(), want) {
		t.Fatalf("loaded: %+v %+v %+v", r.HTTP, r.DNS, r.AccessLog)
	}
	r.HTTP.MaxConnections, r.DNS.MaxTCPConnections, r.AccessLog.MaxErrorsPerSecond = 0, -1, 0
	r.DNS.TrustedResolvers = append(r.DNS.TrustedResolvers, Network{})
	err := r.Validate()
	for _, f := range []string{"http.max_connections", "dns.max_tcp_connections", "access_log.max_errors_per_second", "dns.trusted_resolvers[2]"} {
		if err == nil || !strings.Contains(err.Error(), f+":") {
			t.Errorf("missing %s in %v", f, err)
		}
	}
	if err := LoadFile(write(t, "dns:\n  trusted_resolvers: [resolver.example]\n"), &r); err == nil || !strings.Contains(err.Error(), "dns.trusted_resolvers") {
		t.Errorf("a name as a trusted resolver: %v", err)
	}
}
