// Tests of the deployment kit: the production example configurations decode
// strictly and validate with the daemons' own config package, the systemd
// units are what the operator guide promises (and pass systemd-analyze verify
// where it is installed), and the Prometheus rules and the Grafana dashboard
// use only metric names docs/operations.md documents (and pass promtool where
// it is installed).
package deploy_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/routing/announce/announcecfg"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
)

const (
	productionDir = "examples/production"
	tlsDir        = "/etc/anysched/tls/"
)

// ---------------------------------------------------------------------------
// (a) the production example configurations

// example is one loaded production configuration.
type example struct {
	file string
	cfg  interface{ Validate() error }
	// tls points at every TLS file setting, by its key path.
	tls map[string]*string
	// signing points at the topology signing key settings: the center's
	// private key and every daemon's trusted public keys (real keys are
	// parsed at validation, so placeholders would not do).
	signKey   *string
	trustKeys []string
	// secrets points at the BGP peers' TCP-MD5 key files.
	secrets map[string]*string
}

// loadExample decodes a production example over its daemon's defaults; the
// file name says which daemon it is for.
func loadExample(t *testing.T, path string) example {
	t.Helper()
	ex := example{file: path, tls: map[string]*string{}, secrets: map[string]*string{}}
	bgp := func(b *announcecfg.BGP) {
		for i := range b.Peers {
			p := fmt.Sprintf("announce.bgp.peers[%d]", i)
			if b.Peers[i].Password != "" {
				t.Errorf("%s: %s.password inline: production keeps the key in password_file", path, p)
			}
			ex.secrets[p+".password_file"] = &b.Peers[i].PasswordFile
		}
	}
	clientTLS := func(prefix string, c *config.ClientTLS) {
		ex.tls[prefix+".ca_file"] = &c.CAFile
		ex.tls[prefix+".cert_file"] = &c.CertFile
		ex.tls[prefix+".key_file"] = &c.KeyFile
	}
	serverTLS := func(prefix string, c *config.ServerTLS) {
		ex.tls[prefix+".cert_file"] = &c.CertFile
		ex.tls[prefix+".key_file"] = &c.KeyFile
		ex.tls[prefix+".client_ca_file"] = &c.ClientCAFile
	}
	name := filepath.Base(path)
	var err error
	switch {
	case strings.HasPrefix(name, "center"):
		c := config.DefaultCenter()
		err = config.LoadFile(path, &c)
		clientTLS("etcd.tls", &c.Etcd.TLS)
		ex.tls["grpc.tls.cert_file"] = &c.GRPC.TLS.CertFile
		ex.tls["grpc.tls.key_file"] = &c.GRPC.TLS.KeyFile
		ex.tls["grpc.tls.client_ca_file"] = &c.GRPC.TLS.ClientCAFile
		serverTLS("admin.tls", &c.Admin.TLS)
		ex.tls["console.client_ca_file"] = &c.Console.ClientCAFile
		ex.signKey, ex.trustKeys = &c.Apply.SigningKeyFile, c.Snapshot.TrustedKeys
		bgp(&c.Announce.BGP)
		ex.cfg = &c
	case strings.HasPrefix(name, "regional"):
		c := config.DefaultRegional()
		err = config.LoadFile(path, &c)
		clientTLS("etcd.tls", &c.Etcd.TLS)
		serverTLS("admin.tls", &c.Admin.TLS)
		ex.trustKeys = c.Snapshot.TrustedKeys
		bgp(&c.Announce.BGP)
		ex.cfg = &c
	case strings.HasPrefix(name, "healthcheck"):
		c := config.DefaultChecker()
		err = config.LoadFile(path, &c)
		clientTLS("etcd.tls", &c.Etcd.TLS)
		serverTLS("admin.tls", &c.Admin.TLS)
		ex.trustKeys = c.Snapshot.TrustedKeys
		ex.cfg = &c
	default:
		t.Fatalf("%s: not a center*, regional* or healthcheck* file: which daemon is it for?", path)
	}
	if err != nil {
		t.Fatalf("strict decoding failed:\n%v", err)
	}
	for _, m := range []map[string]*string{ex.tls, ex.secrets} {
		for k, v := range m {
			if *v == "" {
				delete(m, k)
			}
		}
	}
	return ex
}

func productionFiles(t *testing.T) []string {
	t.Helper()
	var files []string
	for _, pat := range []string{"*.yaml", "*.yml"} {
		m, err := filepath.Glob(filepath.Join(productionDir, pat))
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	sort.Strings(files)
	for _, want := range []string{"center.yaml", "regional-primary.yaml", "regional-standby.yaml", "healthcheck.yaml"} {
		if !slices.Contains(files, filepath.Join(productionDir, want)) {
			t.Errorf("%s/%s is missing", productionDir, want)
		}
	}
	return files
}

// TestProductionConfigsValidate: every example decodes strictly and validates;
// the only problems allowed are the TLS files, which do not exist here. With
// those files present (placeholders in a temporary directory) there is none.
func TestProductionConfigsValidate(t *testing.T) {
	for _, path := range productionFiles(t) {
		t.Run(filepath.Base(path), func(t *testing.T) {
			ex := loadExample(t, path)
			if len(ex.tls) == 0 {
				t.Errorf("no TLS settings: production talks to etcd with client certificates")
			}
			if len(ex.trustKeys) == 0 || (ex.signKey != nil && *ex.signKey == "") {
				t.Errorf("the topology is not signed and checked: production etcd is beyond loopback")
			}
			keyFiles := slices.Clone(ex.trustKeys)
			if ex.signKey != nil {
				keyFiles = append(keyFiles, *ex.signKey)
			}
			for key, file := range ex.tls {
				if !strings.HasPrefix(*file, tlsDir) {
					t.Errorf("%s: %q is not under %s", key, *file, tlsDir)
				}
			}
			if err := ex.cfg.Validate(); err != nil {
				errs, ok := yamlstrict.AsErrors(err)
				if !ok {
					t.Fatalf("Validate: %v", err)
				}
				for _, e := range errs {
					file, isTLS := ex.tls[e.Path]
					secret, isSecret := ex.secrets[e.Path]
					switch {
					case isTLS && strings.HasPrefix(e.Msg, fmt.Sprintf("cannot read %q", *file)):
					case isSecret && strings.HasPrefix(e.Msg, fmt.Sprintf("cannot read %q", *secret)):
					case slices.ContainsFunc(keyFiles, func(f string) bool { return strings.Contains(e.Msg, f) }):
					default:
						t.Errorf("unexpected problem (only unreadable TLS and key files are expected here): %v", e)
					}
				}
			}
			// The same configuration with its TLS files present (real ones:
			// validation parses them) is clean.
			dir := t.TempDir()
			ca, err := pki.NewCA("example CA", time.Hour)
			if err != nil {
				t.Fatal(err)
			}
			caFile, _, err := ca.WriteCA(dir)
			if err != nil {
				t.Fatal(err)
			}
			cert, key, err := ca.WriteLeaf(dir, "leaf", pki.Leaf{CN: "anysched-center", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
			if err != nil {
				t.Fatal(err)
			}
			// A checker's etcd certificate must name its region and id
			// (its --check-config reads the CN).
			etcdCert, etcdKey := cert, key
			cn := ""
			switch c := ex.cfg.(type) {
			case *config.Checker:
				cn = etcdauth.CheckerPrefix + c.Region + "." + c.CheckerID
			case *config.Regional: // and a city scheduler's its region and instance
				cn = etcdauth.RegionalPrefix + c.Region + "." + c.InstanceID
			}
			if cn != "" {
				if etcdCert, etcdKey, err = ca.WriteLeaf(dir, "etcd-client", pki.Leaf{CN: cn, Client: true}); err != nil {
					t.Fatal(err)
				}
				if b, err := os.ReadFile(path); err != nil || !(strings.Contains(string(b), "# CN "+cn+":") || strings.Contains(string(b), "# CN "+cn+" ")) {
					t.Errorf("the etcd certificate's comment does not name its CN %s (%v)", cn, err)
				}
			}
			for k, file := range ex.tls {
				switch {
				case strings.HasSuffix(k, "ca_file"):
					*file = caFile
				case k == "etcd.tls.cert_file":
					*file = etcdCert
				case k == "etcd.tls.key_file":
					*file = etcdKey
				case strings.HasSuffix(k, "cert_file"):
					*file = cert
				case strings.HasSuffix(k, "key_file"):
					*file = key
				default:
					t.Fatalf("%s: which kind of TLS file is it?", k)
				}
			}
			priv, pub := filepath.Join(dir, "signing.key"), filepath.Join(dir, "signing.pub")
			if _, err := signing.WriteKeyPair(priv, pub); err != nil {
				t.Fatal(err)
			}
			for i := range ex.trustKeys {
				ex.trustKeys[i] = pub
			}
			if ex.signKey != nil {
				*ex.signKey = priv
			}
			for k, file := range ex.secrets {
				*file = filepath.Join(dir, strings.NewReplacer("[", "", "]", "").Replace(k)+".key")
				if err := os.WriteFile(*file, []byte("a-shared-md5-key\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			if err := ex.cfg.Validate(); err != nil {
				t.Errorf("with the TLS files present:\n%v", err)
			}
		})
	}
}

// sampleTopology is what the examples must agree with in the sample province.
type sampleTopology struct {
	Anycast struct {
		ServiceIP    string `yaml:"service_ip"`
		CenterPrefix string `yaml:"center_prefix"`
	} `yaml:"anycast"`
	Regions []struct {
		Name string `yaml:"name"`
	} `yaml:"regions"`
}

func host(t *testing.T, hostPort string) string {
	t.Helper()
	h, _, err := net.SplitHostPort(hostPort)
	if err != nil {
		t.Fatalf("%q: %v", hostPort, err)
	}
	return h
}

// TestProductionConfigsFitTogether: the examples describe one province: the
// same etcd, the service address of the topology, a primary and a standby of
// one city with the standby's worse path, the city's checker.
func TestProductionConfigsFitTogether(t *testing.T) {
	load := func(name string) any { return loadExample(t, filepath.Join(productionDir, name)).cfg }
	center := load("center.yaml").(*config.Center)
	primary := load("regional-primary.yaml").(*config.Regional)
	standby := load("regional-standby.yaml").(*config.Regional)
	checker := load("healthcheck.yaml").(*config.Checker)

	data, err := os.ReadFile("examples/topology.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var topo sampleTopology
	if err := yaml.Unmarshal(data, &topo); err != nil {
		t.Fatal(err)
	}
	regions := map[string]bool{}
	for _, r := range topo.Regions {
		regions[r.Name] = true
	}

	// The center: an external etcd over TLS, mutual TLS on the admin API, BGP.
	if len(center.Etcd.Endpoints) != 3 {
		t.Errorf("center: etcd.endpoints = %v, want the 3 members", center.Etcd.Endpoints)
	}
	if center.GRPC.TLS.ClientCAFile == "" || center.GRPC.TLS.CertFile == "" {
		t.Errorf("center: the admin API must use mutual TLS: %+v", center.GRPC.TLS)
	}
	if center.Announce.Mode != "bgp" {
		t.Errorf("center: announce.mode = %q, want bgp", center.Announce.Mode)
	}
	if !regions[center.DefaultRegion] {
		t.Errorf("center: default_region %q is not a region of examples/topology.yaml", center.DefaultRegion)
	}

	commons := map[string]*config.Common{"center": &center.Common, "primary": &primary.Common, "standby": &standby.Common}
	for name, c := range commons {
		for _, l := range []struct{ key, addr string }{{"http.listen", c.HTTP.Listen}, {"dns.listen", c.DNS.Listen}} {
			if l.addr == "" || host(t, l.addr) != topo.Anycast.ServiceIP {
				t.Errorf("%s: %s = %q, want the service address %s", name, l.key, l.addr, topo.Anycast.ServiceIP)
			}
		}
		if h := host(t, c.Admin.Listen); h == topo.Anycast.ServiceIP || h == "" || h == "0.0.0.0" {
			t.Errorf("%s: admin.listen %q must be on the management network, not the STB-facing address", name, c.Admin.Listen)
		}
		if c.Announce.Drain.Linger <= 0 || c.Announce.Drain.PreWithdraw <= 0 {
			t.Errorf("%s: a production scheduler drains on stop: %+v", name, c.Announce.Drain)
		}
	}

	// Every daemon talks to the same etcd, under the same prefix and CA.
	etcds := map[string]config.Etcd{"center": center.Etcd, "primary": primary.Etcd, "standby": standby.Etcd, "healthcheck": checker.Etcd}
	for name, e := range etcds {
		if !slices.Equal(e.Endpoints, center.Etcd.Endpoints) || e.Prefix != center.Etcd.Prefix || e.TLS.CAFile != center.Etcd.TLS.CAFile {
			t.Errorf("%s: etcd %v %s %s differs from the center's %v %s %s", name, e.Endpoints, e.Prefix, e.TLS.CAFile,
				center.Etcd.Endpoints, center.Etcd.Prefix, center.Etcd.TLS.CAFile)
		}
		for _, ep := range e.Endpoints {
			if !strings.HasPrefix(ep, "https://") {
				t.Errorf("%s: etcd endpoint %q is not https", name, ep)
			}
		}
		if e.TLS.CertFile == "" || e.TLS.KeyFile == "" {
			t.Errorf("%s: etcd needs a client certificate (--client-cert-auth)", name)
		}
	}

	// Primary and standby of one city.
	if primary.Region != standby.Region || !regions[primary.Region] {
		t.Errorf("primary region %q and standby region %q must be the same region of the topology", primary.Region, standby.Region)
	}
	if primary.InstanceID == standby.InstanceID || primary.InstanceID == "" {
		t.Errorf("instance ids %q and %q must be set and differ", primary.InstanceID, standby.InstanceID)
	}
	if primary.Admin.Listen == standby.Admin.Listen {
		t.Errorf("primary and standby share admin.listen %q (they are different hosts)", primary.Admin.Listen)
	}
	pb, sb := primary.Announce.BGP, standby.Announce.BGP
	if primary.Announce.Mode != "bgp" || standby.Announce.Mode != "bgp" {
		t.Errorf("announce.mode: primary %q, standby %q, want bgp", primary.Announce.Mode, standby.Announce.Mode)
	}
	if pb.RouterID == sb.RouterID {
		t.Errorf("primary and standby share router_id %s", pb.RouterID)
	}
	if sb.MED != 200 || sb.ASPathPrepend != 2 {
		t.Errorf("standby: med %d, as_path_prepend %d, want 200 and 2", sb.MED, sb.ASPathPrepend)
	}
	if pb.MED >= sb.MED || pb.ASPathPrepend >= sb.ASPathPrepend {
		t.Errorf("the primary's path (med %d, prepend %d) must be better than the standby's (med %d, prepend %d)",
			pb.MED, pb.ASPathPrepend, sb.MED, sb.ASPathPrepend)
	}
	if !slices.Equal(pb.Peers, sb.Peers) || pb.ASN != sb.ASN {
		t.Errorf("primary and standby must peer with the same city router: %+v / %+v", pb.Peers, sb.Peers)
	}

	// The city's checker.
	if checker.Region != primary.Region {
		t.Errorf("healthcheck region %q, want the city %q", checker.Region, primary.Region)
	}
}

// ---------------------------------------------------------------------------
// (c) the systemd units

// unitFile is a parsed systemd unit: section -> key -> values in order.
type unitFile map[string]map[string][]string

func parseUnit(t *testing.T, path string) unitFile {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	u := unitFile{}
	section := ""
	for i, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		switch {
		case line == "" || strings.HasPrefix(line, "#") || strings.HasPrefix(line, ";"):
		case strings.HasPrefix(line, "[") && strings.HasSuffix(line, "]"):
			section = line[1 : len(line)-1]
			if u[section] == nil {
				u[section] = map[string][]string{}
			}
		default:
			k, v, ok := strings.Cut(line, "=")
			if !ok || section == "" {
				t.Fatalf("%s:%d: not KEY=VALUE in a section: %q", path, i+1, line)
			}
			u[section][k] = append(u[section][k], v)
		}
	}
	return u
}

// one returns the single (last) value of a key.
func (u unitFile) one(section, key string) string {
	v := u[section][key]
	if len(v) == 0 {
		return ""
	}
	return v[len(v)-1]
}

// words returns the space-separated words of every assignment of a key.
func (u unitFile) words(section, key string) []string {
	var w []string
	for _, v := range u[section][key] {
		w = append(w, strings.Fields(v)...)
	}
	slices.Sort(w)
	return w
}

// systemdDuration parses "30s", "5min", "2" (seconds).
func systemdDuration(t *testing.T, v string) time.Duration {
	t.Helper()
	s := strings.ReplaceAll(strings.ReplaceAll(v, "min", "m"), "sec", "s")
	if s != "" && strings.Trim(s, "0123456789") == "" {
		s += "s"
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		t.Fatalf("systemd time span %q: %v", v, err)
	}
	return d
}

type unitSpec struct {
	file, binary, config string
	scheduler            bool
	// drains: the stop timings the unit must outlast (defaults and examples).
	drains []announcecfg.Drain
}

func unitSpecs(t *testing.T) []unitSpec {
	center := loadExample(t, filepath.Join(productionDir, "center.yaml")).cfg.(*config.Center)
	primary := loadExample(t, filepath.Join(productionDir, "regional-primary.yaml")).cfg.(*config.Regional)
	standby := loadExample(t, filepath.Join(productionDir, "regional-standby.yaml")).cfg.(*config.Regional)
	return []unitSpec{
		{"anysched-central.service", "central-scheduler", "/etc/anysched/center.yaml", true,
			[]announcecfg.Drain{config.DefaultCenter().Announce.Drain, center.Announce.Drain}},
		{"anysched-regional.service", "regional-scheduler", "/etc/anysched/regional.yaml", true,
			[]announcecfg.Drain{config.DefaultRegional().Announce.Drain, primary.Announce.Drain, standby.Announce.Drain}},
		{"anysched-healthcheck.service", "healthcheck", "/etc/anysched/healthcheck.yaml", false, nil},
	}
}

// shutdownAllowance: after the drain the listeners finish in-flight requests
// for a few seconds, and BGP and etcd are closed.
const shutdownAllowance = 5 * time.Second

// TestUnits: the units run the daemons as the operator guide says: as
// anysched with two capabilities (none for the checker), a config check
// before the start, the crash cleanup after the stop, a stop timeout longer
// than the graceful drain, restart on failure, and hardening that keeps
// netlink.
func TestUnits(t *testing.T) {
	for _, spec := range unitSpecs(t) {
		t.Run(spec.file, func(t *testing.T) {
			u := parseUnit(t, filepath.Join("systemd", spec.file))
			s := func(key string) string { return u.one("Service", key) }
			bin := "/usr/local/bin/" + spec.binary
			run := bin + " --config " + spec.config
			if got := s("ExecStart"); got != run {
				t.Errorf("ExecStart=%s, want %s", got, run)
			}
			if got := s("ExecStartPre"); got != run+" --check-config" {
				t.Errorf("ExecStartPre=%s, want %s --check-config", got, run)
			}
			want := map[string]string{
				"User": "anysched", "Group": "anysched", "KillSignal": "SIGTERM", "Restart": "on-failure",
				"NoNewPrivileges": "yes", "ProtectSystem": "strict", "PrivateTmp": "yes", "ProtectHome": "yes",
				"RestartPreventExitStatus": "2",
			}
			for k, v := range want {
				if got := s(k); got != v {
					t.Errorf("%s=%s, want %s", k, got, v)
				}
			}
			if rs := systemdDuration(t, s("RestartSec")); rs <= 0 || rs > 10*time.Second {
				t.Errorf("RestartSec=%s: want a small delay", rs)
			}
			if sd := u.words("Service", "StateDirectory"); !slices.Contains(sd, "anysched") {
				t.Errorf("StateDirectory=%v lacks anysched", sd)
			}
			if rw := u.words("Service", "ReadWritePaths"); !slices.Contains(rw, "/var/lib/anysched") {
				t.Errorf("ReadWritePaths=%v lacks /var/lib/anysched", rw)
			}
			fam := u.words("Service", "RestrictAddressFamilies")
			for _, f := range []string{"AF_INET", "AF_INET6", "AF_NETLINK", "AF_UNIX"} {
				if !slices.Contains(fam, f) {
					t.Errorf("RestrictAddressFamilies=%v lacks %s", fam, f)
				}
			}
			caps := u.words("Service", "AmbientCapabilities")
			bounding := u.words("Service", "CapabilityBoundingSet")
			if !spec.scheduler {
				if len(caps) != 0 || len(bounding) != 0 || len(u["Service"]["CapabilityBoundingSet"]) == 0 {
					t.Errorf("the checker needs no capability: AmbientCapabilities=%v, CapabilityBoundingSet=%v (want an empty set)", caps, bounding)
				}
				return
			}
			wantCaps := []string{"CAP_NET_ADMIN", "CAP_NET_BIND_SERVICE"}
			if !slices.Equal(caps, wantCaps) || !slices.Equal(bounding, wantCaps) {
				t.Errorf("AmbientCapabilities=%v, CapabilityBoundingSet=%v, want both %v", caps, bounding, wantCaps)
			}
			if got := s("ExecStopPost"); strings.TrimLeft(got, "-") != run+" --cleanup" {
				t.Errorf("ExecStopPost=%s, want [-]%s --cleanup", got, run)
			}
			stop := systemdDuration(t, s("TimeoutStopSec"))
			for _, d := range spec.drains {
				if need := d.PreWithdraw + d.Linger + shutdownAllowance; stop <= need {
					t.Errorf("TimeoutStopSec=%s is not longer than pre_withdraw %s + linger %s + %s", stop, d.PreWithdraw, d.Linger, shutdownAllowance)
				}
			}
		})
	}
}

// unitFilesToVerify are the unit files of the kit (drop-ins are not units).
func unitFilesToVerify(t *testing.T) []string {
	var files []string
	for _, pat := range []string{"systemd/*.service", "etcd/*.service", "etcd/*.timer"} {
		m, err := filepath.Glob(pat)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	return files
}

var execLine = regexp.MustCompile(`(?m)^(Exec[A-Za-z]+=)([-+@!:]*)(/\S+)`)

// TestUnitsVerify runs systemd-analyze verify on each unit, with the daemons'
// paths pointed at /bin/true (verify insists the executables exist).
func TestUnitsVerify(t *testing.T) {
	sa, err := exec.LookPath("systemd-analyze")
	if err != nil {
		t.Skip("systemd-analyze is not installed")
	}
	dir := t.TempDir()
	var copies []string
	for _, f := range unitFilesToVerify(t) {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, filepath.Base(f))
		if err := os.WriteFile(p, execLine.ReplaceAll(data, []byte("${1}${2}/bin/true")), 0o644); err != nil {
			t.Fatal(err)
		}
		copies = append(copies, p)
	}
	out, err := exec.Command(sa, append([]string{"verify", "--man=no"}, copies...)...).CombinedOutput()
	if err != nil || len(strings.TrimSpace(string(out))) > 0 {
		t.Errorf("systemd-analyze verify: %v\n%s", err, out)
	}
	// The exposure score of the daemons' sandboxing: "OK" is below 3.0.
	for _, p := range copies {
		if !strings.HasPrefix(filepath.Base(p), "anysched-") || strings.Contains(p, "etcd") {
			continue
		}
		out, err := exec.Command(sa, "security", "--offline=true", "--no-pager", "--threshold=30", p).CombinedOutput()
		if err != nil {
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			t.Errorf("systemd-analyze security %s: %v: %s", filepath.Base(p), err, lines[len(lines)-1])
		}
	}
}

// TestSysusersTmpfiles applies the sysusers.d and tmpfiles.d snippets to a
// scratch root (as root only: tmpfiles changes owners).
func TestSysusersTmpfiles(t *testing.T) {
	sysusers, err1 := exec.LookPath("systemd-sysusers")
	tmpfiles, err2 := exec.LookPath("systemd-tmpfiles")
	if err1 != nil || err2 != nil {
		t.Skip("systemd-sysusers / systemd-tmpfiles are not installed")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root")
	}
	root := t.TempDir()
	for _, d := range []string{"etc", "var/lib"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, f := range []string{"passwd", "group", "shadow", "gshadow"} {
		if data, err := os.ReadFile(filepath.Join("/etc", f)); err == nil {
			if err := os.WriteFile(filepath.Join(root, "etc", f), data, 0o600); err != nil {
				t.Fatal(err)
			}
		}
	}
	abs := func(p string) string {
		a, err := filepath.Abs(p)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	if out, err := exec.Command(sysusers, "--root="+root, abs("systemd/sysusers.d/anysched.conf")).CombinedOutput(); err != nil {
		t.Fatalf("systemd-sysusers: %v\n%s", err, out)
	}
	passwd, _ := os.ReadFile(filepath.Join(root, "etc/passwd"))
	if !strings.Contains(string(passwd), "\nanysched:") && !strings.HasPrefix(string(passwd), "anysched:") {
		t.Errorf("no anysched user after systemd-sysusers:\n%s", passwd)
	}
	if out, err := exec.Command(tmpfiles, "--root="+root, "--create", abs("systemd/tmpfiles.d/anysched.conf")).CombinedOutput(); err != nil {
		t.Fatalf("systemd-tmpfiles: %v\n%s", err, out)
	}
	for _, d := range []string{"etc/anysched/tls", "var/lib/anysched/center", "var/lib/anysched/regional", "var/lib/anysched/healthcheck"} {
		if fi, err := os.Stat(filepath.Join(root, d)); err != nil || !fi.IsDir() {
			t.Errorf("%s was not created: %v", d, err)
		}
	}
}

// ---------------------------------------------------------------------------
// (b) metric names in the dashboard and the rules

var (
	metricRef  = regexp.MustCompile(`anysched_[a-z_]+`)
	metricDoc  = regexp.MustCompile("(?m)^\\|\\s*`(anysched_[a-z_]+)(?:\\{[^}`]*\\})?`\\s*\\|\\s*(\\w+)\\s*\\|")
	recordRef  = regexp.MustCompile(`anysched:[a-z0-9_:]+`)
	grafanaVar = regexp.MustCompile(`\$\{?(\w+)(?::\w+)?\}?`)
)

// documentedMetrics reads the metrics table of docs/operations.md: name -> type.
func documentedMetrics(t *testing.T) map[string]string {
	t.Helper()
	data, err := os.ReadFile("../docs/operations.md")
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, sm := range metricDoc.FindAllStringSubmatch(string(data), -1) {
		m[sm[1]] = sm[2]
	}
	if len(m) < 10 {
		t.Fatalf("found only %d metrics in the table of docs/operations.md: %v", len(m), m)
	}
	return m
}

// undocumented returns the anysched_ names in expr that the docs do not
// list; a histogram's _bucket, _sum and _count series count as documented.
func undocumented(expr string, docs map[string]string) (used, bad []string) {
	for _, name := range metricRef.FindAllString(expr, -1) {
		base := name
		if _, ok := docs[name]; !ok {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if b, ok := strings.CutSuffix(name, suffix); ok && docs[b] == "histogram" {
					base = b
				}
			}
		}
		if _, ok := docs[base]; !ok {
			bad = append(bad, name)
			continue
		}
		used = append(used, base)
	}
	return used, bad
}

// dashboard is the part of the Grafana model the tests read.
type dashboard struct {
	UID           string  `json:"uid"`
	Title         string  `json:"title"`
	SchemaVersion int     `json:"schemaVersion"`
	Panels        []panel `json:"panels"`
	Templating    struct {
		List []struct {
			Type  string `json:"type"`
			Name  string `json:"name"`
			Query any    `json:"query"`
		} `json:"list"`
	} `json:"templating"`
}

type datasourceRef struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int            `json:"id"`
	Type       string         `json:"type"`
	Title      string         `json:"title"`
	Datasource *datasourceRef `json:"datasource"`
	GridPos    struct{ H, W, X, Y int }
	Targets    []struct {
		RefID      string         `json:"refId"`
		Expr       string         `json:"expr"`
		Datasource *datasourceRef `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

func loadDashboard(t *testing.T) dashboard {
	t.Helper()
	data, err := os.ReadFile("grafana/anysched.json")
	if err != nil {
		t.Fatal(err)
	}
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		t.Fatalf("grafana/anysched.json: %v", err)
	}
	return d
}

func allPanels(ps []panel) []panel {
	var out []panel
	for _, p := range ps {
		out = append(out, p)
		out = append(out, allPanels(p.Panels)...)
	}
	return out
}

// dashboardExprs returns every PromQL expression of the dashboard by panel title.
func dashboardExprs(d dashboard) map[string][]string {
	m := map[string][]string{}
	for _, p := range allPanels(d.Panels) {
		for _, tg := range p.Targets {
			m[p.Title] = append(m[p.Title], tg.Expr)
		}
	}
	return m
}

func TestGrafanaDashboard(t *testing.T) {
	d := loadDashboard(t)
	docs := documentedMetrics(t)
	if d.SchemaVersion < 36 {
		t.Errorf("schemaVersion %d, want 36 or later", d.SchemaVersion)
	}
	if d.UID == "" || d.Title == "" {
		t.Errorf("uid %q, title %q: both are needed for provisioning", d.UID, d.Title)
	}
	dsVar := ""
	for _, v := range d.Templating.List {
		if v.Type == "datasource" && v.Query == "prometheus" {
			dsVar = v.Name
		}
	}
	if dsVar == "" {
		t.Fatal("no Prometheus datasource variable in templating")
	}
	wantDS := "${" + dsVar + "}"
	ids := map[int]bool{}
	used := map[string]bool{}
	for _, p := range allPanels(d.Panels) {
		if ids[p.ID] {
			t.Errorf("panel id %d is used twice", p.ID)
		}
		ids[p.ID] = true
		if p.GridPos.W <= 0 || p.GridPos.X+p.GridPos.W > 24 {
			t.Errorf("panel %q: gridPos %+v does not fit the 24 columns", p.Title, p.GridPos)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource == nil || p.Datasource.UID != wantDS {
			t.Errorf("panel %q: datasource %+v, want the variable %s", p.Title, p.Datasource, wantDS)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q has no query", p.Title)
		}
		for _, tg := range p.Targets {
			if tg.Datasource != nil && tg.Datasource.UID != wantDS {
				t.Errorf("panel %q, query %s: datasource %+v, want %s", p.Title, tg.RefID, tg.Datasource, wantDS)
			}
			names, bad := undocumented(tg.Expr, docs)
			if len(bad) > 0 {
				t.Errorf("panel %q: %v are not documented in docs/operations.md: %s", p.Title, bad, tg.Expr)
			}
			if len(names)+len(bad) == 0 {
				t.Errorf("panel %q: query %s uses no anysched metric: %q", p.Title, tg.RefID, tg.Expr)
			}
			for _, n := range names {
				used[n] = true
			}
		}
	}
	for _, m := range []string{
		"anysched_requests_total", "anysched_decision_duration_seconds", "anysched_announce_state",
		"anysched_announce_changes_total", "anysched_snapshot_age_seconds", "anysched_snapshot_revision_number",
		"anysched_health_server_up", "anysched_health_checkers", "anysched_health_probe_errors_total",
		"anysched_health_publish_writes_total",
	} {
		if !used[m] {
			t.Errorf("no panel shows %s", m)
		}
	}
}

// rulesFile is the part of a Prometheus rules file the tests read.
type rulesFile struct {
	Groups []struct {
		Name  string `yaml:"name"`
		Rules []struct {
			Record string            `yaml:"record"`
			Alert  string            `yaml:"alert"`
			Expr   string            `yaml:"expr"`
			Labels map[string]string `yaml:"labels"`
		} `yaml:"rules"`
	} `yaml:"groups"`
}

func TestPrometheusRules(t *testing.T) {
	data, err := os.ReadFile("prometheus/anysched.rules.yml")
	if err != nil {
		t.Fatal(err)
	}
	var rf rulesFile
	if err := yaml.Unmarshal(data, &rf); err != nil {
		t.Fatal(err)
	}
	docs := documentedMetrics(t)
	records := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			if r.Record != "" {
				records[r.Record] = true
			}
		}
	}
	used := map[string]bool{}
	alerts := map[string]bool{}
	for _, g := range rf.Groups {
		for _, r := range g.Rules {
			name := r.Record + r.Alert
			if strings.TrimSpace(r.Expr) == "" {
				t.Errorf("%s: empty expr", name)
			}
			names, bad := undocumented(r.Expr, docs)
			if len(bad) > 0 {
				t.Errorf("%s: %v are not documented in docs/operations.md", name, bad)
			}
			for _, n := range names {
				used[n] = true
			}
			for _, rec := range recordRef.FindAllString(r.Expr, -1) {
				if !records[rec] {
					t.Errorf("%s uses the recording rule %s, which is not defined", name, rec)
				}
			}
			if r.Alert != "" {
				alerts[r.Alert] = true
				if sev := r.Labels["severity"]; !slices.Contains([]string{"info", "warning", "critical"}, sev) {
					t.Errorf("alert %s: severity %q", r.Alert, sev)
				}
			}
		}
	}
	for _, m := range []string{
		"anysched_snapshot_age_seconds", "anysched_announce_state", "anysched_health_checkers",
		"anysched_health_failopen_servers", "anysched_accesslog_dropped_total", "anysched_requests_total",
	} {
		if !used[m] {
			t.Errorf("no rule uses %s", m)
		}
	}
	for _, a := range []string{"AnyschedSnapshotStale", "AnyschedRegionalRouteWithdrawn", "AnyschedTooFewCheckers",
		"AnyschedFailOpenServers", "AnyschedAccessLogDropping", "AnyschedErrorAnswers"} {
		if !alerts[a] {
			t.Errorf("alert %s is missing", a)
		}
	}
}

// scrapeConfig is the part of prometheus.yml the tests read.
type scrapeConfig struct {
	RuleFiles     []string `yaml:"rule_files"`
	ScrapeConfigs []struct {
		JobName       string        `yaml:"job_name"`
		StaticConfigs []targetGroup `yaml:"static_configs"`
		FileSDConfigs []struct {
			Files []string `yaml:"files"`
		} `yaml:"file_sd_configs"`
	} `yaml:"scrape_configs"`
}

type targetGroup struct {
	Targets []string          `yaml:"targets"`
	Labels  map[string]string `yaml:"labels"`
}

// TestPrometheusScrapeConfig: every anysched target carries the labels the
// rules and the dashboard group by, and none that would collide with the
// metrics' own region label.
func TestPrometheusScrapeConfig(t *testing.T) {
	data, err := os.ReadFile("prometheus/prometheus.yml")
	if err != nil {
		t.Fatal(err)
	}
	var sc scrapeConfig
	if err := yaml.Unmarshal(data, &sc); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(sc.RuleFiles, "anysched.rules.yml") {
		t.Errorf("rule_files %v lacks anysched.rules.yml", sc.RuleFiles)
	}
	roles := map[string]string{"anysched-central": "central", "anysched-regional": "regional", "anysched-healthcheck": "healthcheck"}
	seen := map[string]int{}
	for _, job := range sc.ScrapeConfigs {
		role, ok := roles[job.JobName]
		if !ok {
			continue
		}
		groups := slices.Clone(job.StaticConfigs)
		for _, fsd := range job.FileSDConfigs {
			for _, pat := range fsd.Files {
				files, err := filepath.Glob(filepath.Join("prometheus", pat))
				if err != nil || len(files) == 0 {
					t.Errorf("%s: file_sd %s matches no file (%v)", job.JobName, pat, err)
				}
				for _, f := range files {
					data, err := os.ReadFile(f)
					if err != nil {
						t.Fatal(err)
					}
					var tgs []targetGroup
					if err := yaml.Unmarshal(data, &tgs); err != nil {
						t.Fatalf("%s: %v", f, err)
					}
					groups = append(groups, tgs...)
				}
			}
		}
		for _, g := range groups {
			seen[job.JobName] += len(g.Targets)
			if g.Labels["role"] != role || g.Labels["city"] == "" || g.Labels["instance"] == "" {
				t.Errorf("%s: targets %v have labels %v, want role=%s, city and instance", job.JobName, g.Targets, g.Labels, role)
			}
			if _, ok := g.Labels["region"]; ok {
				t.Errorf("%s: target label region collides with the metrics' own region label (use city)", job.JobName)
			}
		}
	}
	for _, job := range slices.Sorted(maps.Keys(roles)) {
		if seen[job] == 0 {
			t.Errorf("no targets for job %s", job)
		}
	}
}

// ---------------------------------------------------------------------------
// (d) promtool

// TestPromtool checks the scrape configuration, the rules and their unit
// tests, and the dashboard's PromQL (as recording rules), with promtool.
func TestPromtool(t *testing.T) {
	pt, err := exec.LookPath("promtool")
	if err != nil {
		t.Skip("promtool is not installed (Debian package prometheus)")
	}
	run := func(args ...string) {
		t.Helper()
		out, err := exec.Command(pt, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	// --syntax-only: the TLS files of the scrape jobs are the site's own.
	run("check", "config", "--syntax-only", "prometheus/prometheus.yml")
	run("check", "rules", "prometheus/anysched.rules.yml")
	run("test", "rules", "prometheus/anysched.rules.test.yml")

	// The dashboard's queries with Grafana's variables filled in.
	type rule struct {
		Record string `yaml:"record"`
		Expr   string `yaml:"expr"`
	}
	var rules []rule
	exprs := dashboardExprs(loadDashboard(t))
	for _, title := range slices.Sorted(maps.Keys(exprs)) {
		for _, e := range exprs[title] {
			e = grafanaVar.ReplaceAllStringFunc(e, func(v string) string {
				if strings.Contains(v, "__rate_interval") || strings.Contains(v, "__interval") || strings.Contains(v, "__range") {
					return "5m"
				}
				return ".*"
			})
			rules = append(rules, rule{Record: fmt.Sprintf("dashboard:query:%d", len(rules)), Expr: e})
		}
	}
	doc := map[string]any{"groups": []any{map[string]any{"name": "dashboard", "rules": rules}}}
	data, err := yaml.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "dashboard.rules.yml")
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	run("check", "rules", p)
}

// TestProductionConfigComments: what the production examples' comments say
// a setting does is what the loaded configuration does. Each claim quotes
// the comment it checks, so that rewording one without the other fails.
func TestProductionConfigComments(t *testing.T) {
	load := func(name string) example { return loadExample(t, filepath.Join(productionDir, name)) }
	text := func(name string) string {
		b, err := os.ReadFile(filepath.Join(productionDir, name))
		if err != nil {
			t.Fatal(err)
		}
		// A comment's lines read as one text, values and inline comments kept.
		var lines []string
		for _, l := range strings.Split(string(b), "\n") {
			lines = append(lines, strings.TrimLeft(l, " #"))
		}
		return strings.Join(strings.Fields(strings.Join(lines, " ")), " ")
	}
	center := load("center.yaml").cfg.(*config.Center)
	cities := []*config.Regional{load("regional-primary.yaml").cfg.(*config.Regional), load("regional-standby.yaml").cfg.(*config.Regional)}
	for _, c := range []struct {
		file, says string
		holds      bool
	}{
		{"center.yaml", "plans the fallen city's viewers from the city's last published plan", center.Alloc.PlanFallenCities},
		{"center.yaml", "Give it the same keys and auth mode as the cities",
			center.Alloc.Auth == cities[0].Alloc.Auth && center.Alloc.Auth == cities[1].Alloc.Auth &&
				slices.Equal(center.Alloc.Keys, cities[0].Alloc.Keys) && slices.Equal(center.Alloc.Keys, cities[1].Alloc.Keys)},
		{"center.yaml", "pre_withdraw: 2s # GRACEFUL_SHUTDOWN first, then withdraw", center.Announce.Drain.PreWithdraw > 0},
		{"center.yaml", "linger: 5s # keep answering while the core converges", center.Announce.Drain.Linger > 0},
	} {
		if !strings.Contains(text(c.file), c.says) {
			t.Errorf("%s no longer says %q: update the claim here with the comment", c.file, c.says)
		} else if !c.holds {
			t.Errorf("%s says %q, but the loaded configuration does otherwise", c.file, c.says)
		}
	}
}
