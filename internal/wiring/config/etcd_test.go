package config

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/security/signing"
)

// etcdCerts writes a CA, a server certificate and client certificates
// of the given CNs; it returns the files by name ("ca", "server", cn).
func etcdCerts(t *testing.T, cns ...string) map[string][2]string {
	t.Helper()
	dir := t.TempDir()
	ca, err := pki.NewCA("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	caFile, caKey, err := ca.WriteCA(dir)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][2]string{"ca": {caFile, caKey}}
	priv, pub := filepath.Join(dir, "signing.key"), filepath.Join(dir, "signing.pub")
	if _, err := signing.WriteKeyPair(priv, pub); err != nil {
		t.Fatal(err)
	}
	out["signing"] = [2]string{priv, pub}
	leaves := map[string]pki.Leaf{"server": {CN: "etcd", Hosts: []string{"127.0.0.1"}, Server: true}}
	for _, cn := range cns {
		leaves[cn] = pki.Leaf{CN: cn, Client: true}
	}
	for name, l := range leaves {
		c, k, err := ca.WriteLeaf(dir, name, l)
		if err != nil {
			t.Fatal(err)
		}
		out[name] = [2]string{c, k}
	}
	return out
}

func expectErrs(t *testing.T, what string, err error, want ...string) {
	t.Helper()
	if len(want) == 0 {
		if err != nil {
			t.Errorf("%s: %v", what, err)
		}
		return
	}
	for _, w := range want {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("%s: missing %q in: %v", what, w, err)
		}
	}
}

// TestEtcdTransport: etcd.tls with an http:// endpoint used to be dropped
// silently, and plaintext reached etcd beyond loopback; now both are
// errors on the endpoint's path, and https beyond loopback needs a client
// certificate.
func TestEtcdTransport(t *testing.T) {
	f := etcdCerts(t, "anysched-regional.hefei.h1")
	regional := func(tls ClientTLS, eps ...string) error {
		r := DefaultRegional()
		r.Region, r.Etcd.Endpoints, r.Etcd.TLS = "hefei", eps, tls
		r.Snapshot.TrustedKeys = []string{f["signing"][1]}
		return r.Validate()
	}
	client := ClientTLS{CAFile: f["ca"][0], CertFile: f["anysched-regional.hefei.h1"][0], KeyFile: f["anysched-regional.hefei.h1"][1]}
	expectErrs(t, "tls with http", regional(client, "https://10.0.0.2:2379", "http://127.0.0.1:2379"),
		"etcd.endpoints[1]: http:// with etcd.tls set: use https://")
	expectErrs(t, "plaintext beyond loopback", regional(ClientTLS{}, "http://10.0.0.2:2379"),
		`etcd.endpoints[0]: "http://10.0.0.2:2379" is plaintext beyond loopback`)
	expectErrs(t, "https without a client certificate", regional(ClientTLS{}, "https://etcd.example.net:2379"),
		"etcd.tls.cert_file: required: https://etcd.example.net:2379 is beyond loopback")
	for _, ep := range []string{"http://127.0.0.1:2379", "http://localhost:2379", "http://[::1]:2379"} {
		expectErrs(t, "loopback "+ep, regional(ClientTLS{}, ep))
	}
	expectErrs(t, "https with a certificate", regional(client, "https://10.0.0.2:2379", "https://10.0.0.3:2379"))
	// Without ca_file: the system's roots verify the server.
	expectErrs(t, "https without ca_file", regional(ClientTLS{CertFile: client.CertFile, KeyFile: client.KeyFile}, "https://etcd.example.net:2379"))
}

// TestSignedTopologyBeyondLoopback: once others may write etcd (reachable
// beyond loopback, a cluster's endpoints even on loopback, etcd with
// authentication), a scheduler must know the center's public key and the
// center must sign, or whoever can write etcd could redirect the province.
// Loopback endpoints of a cluster and a loopback etcd with auth on once
// passed as "loopback".
func TestSignedTopologyBeyondLoopback(t *testing.T) {
	f := etcdCerts(t, "anysched-regional.hefei.h1", "anysched-center")
	cert := ClientTLS{CAFile: f["ca"][0], CertFile: f["anysched-regional.hefei.h1"][0], KeyFile: f["anysched-regional.hefei.h1"][1]}
	for _, tc := range []struct {
		name string
		eps  []string
		tls  ClientTLS
		want string // "" : valid without trusted keys
	}{
		{"beyond loopback", []string{"https://10.0.0.2:2379"}, cert, "snapshot.trusted_keys: required: etcd endpoint https://10.0.0.2:2379 is beyond loopback"},
		{"a cluster's members on loopback", []string{"http://127.0.0.1:2379", "http://127.0.0.1:22379"}, ClientTLS{}, "snapshot.trusted_keys: required: etcd.endpoints name 2 members"},
		{"auth on loopback", []string{"https://127.0.0.1:2379"}, cert, "snapshot.trusted_keys: required: etcd.tls.cert_file is set"},
		{"one loopback member, no auth", []string{"http://127.0.0.1:2379"}, ClientTLS{}, ""},
	} {
		r := DefaultRegional()
		r.Region, r.Etcd.Endpoints, r.Etcd.TLS = "hefei", tc.eps, tc.tls
		if tc.want == "" {
			expectErrs(t, tc.name, r.Validate())
		} else {
			expectErrs(t, tc.name, r.Validate(), tc.want)
		}
	}
	c := DefaultCenter()
	c.Etcd.Embedded.ClientListen = "10.0.0.2:2379"
	c.Etcd.Embedded.TLS = ServerTLS{CertFile: f["server"][0], KeyFile: f["server"][1], ClientCAFile: f["ca"][0]}
	c.Etcd.TLS = ClientTLS{CAFile: f["ca"][0], CertFile: f["anysched-center"][0], KeyFile: f["anysched-center"][1]}
	expectErrs(t, "center beyond loopback, unsigned", c.Validate(), "apply.signing_key_file: required", "snapshot.trusted_keys: required")
	c.Etcd.Embedded.ClientListen = "127.0.0.1:2379"
	expectErrs(t, "center with an embedded etcd with auth on loopback, unsigned", c.Validate(),
		"apply.signing_key_file: required: etcd.tls.cert_file is set", "snapshot.trusted_keys: required: etcd.tls.cert_file is set")
}

// TestEmbeddedEtcdTLS: the embedded etcd listened in plaintext without auth
// wherever it was told to; beyond loopback it now needs TLS with client
// certificates, and the center's own client then authenticates as
// anysched-center.
func TestEmbeddedEtcdTLS(t *testing.T) {
	f := etcdCerts(t, "anysched-center", "someone-else")
	srv := ServerTLS{CertFile: f["server"][0], KeyFile: f["server"][1], ClientCAFile: f["ca"][0]}
	own := ClientTLS{CAFile: f["ca"][0], CertFile: f["anysched-center"][0], KeyFile: f["anysched-center"][1]}
	center := func(mod func(c *Center)) error {
		c := DefaultCenter()
		c.Apply.SigningKeyFile, c.Snapshot.TrustedKeys = f["signing"][0], []string{f["signing"][1]}
		mod(&c)
		return c.Validate()
	}
	expectErrs(t, "defaults (loopback, plaintext)", center(func(*Center) {}))
	for _, listen := range []string{"0.0.0.0:2379", ":2379", "10.0.0.2:2379", "[::]:2379"} {
		expectErrs(t, "plaintext on "+listen, center(func(c *Center) { c.Etcd.Embedded.ClientListen = listen }),
			"etcd.embedded.tls: etcd.embedded.client_listen \""+listen+"\" is beyond loopback")
	}
	expectErrs(t, "peers beyond loopback", center(func(c *Center) { c.Etcd.Embedded.PeerListen = "10.0.0.2:2380" }),
		`etcd.embedded.peer_listen: "10.0.0.2:2380" must be a loopback address`)
	expectErrs(t, "TLS without client CA", center(func(c *Center) {
		c.Etcd.Embedded.ClientListen, c.Etcd.Embedded.TLS, c.Etcd.TLS = "10.0.0.2:2379", ServerTLS{CertFile: srv.CertFile, KeyFile: srv.KeyFile}, own
	}), "etcd.embedded.tls.client_ca_file: required", "etcd.embedded.tls: etcd.embedded.client_listen")
	expectErrs(t, "TLS, the center's client without a certificate", center(func(c *Center) {
		c.Etcd.Embedded.ClientListen, c.Etcd.Embedded.TLS = "10.0.0.2:2379", srv
	}), "etcd.tls.ca_file: required with etcd.embedded.tls", "etcd.tls.cert_file: required", "etcd.tls.key_file: required")
	expectErrs(t, "TLS, the center's certificate of another CN", center(func(c *Center) {
		c.Etcd.Embedded.TLS = srv
		c.Etcd.TLS = ClientTLS{CAFile: own.CAFile, CertFile: f["someone-else"][0], KeyFile: f["someone-else"][1]}
	}), `etcd.tls.cert_file: CN "someone-else"`)
	expectErrs(t, "etcd.tls towards a plaintext embedded etcd", center(func(c *Center) { c.Etcd.TLS = own }),
		"etcd.tls: the embedded etcd serves plaintext")
	expectErrs(t, "identities without TLS", center(func(c *Center) { c.Etcd.Embedded.Identities = []string{"anysched-checker.hefei.c1"} }),
		"etcd.embedded.identities: only with etcd.embedded.tls")
	expectErrs(t, "bad identities", center(func(c *Center) {
		c.Etcd.Embedded.TLS, c.Etcd.TLS = srv, own
		c.Etcd.Embedded.Identities = []string{"anysched-checker.hefei.c1", "anysched-checker.hefei.c1", "anysched-regional.hefei", "city"}
	}), `etcd.embedded.identities[1]: "anysched-checker.hefei.c1" listed twice`, "etcd.embedded.identities[2]:", "etcd.embedded.identities[3]:")
	// A checker's identity of the form before regions is refused at
	// provisioning, naming the form that replaced it.
	expectErrs(t, "an old-form checker identity", center(func(c *Center) {
		c.Etcd.Embedded.TLS, c.Etcd.TLS = srv, own
		c.Etcd.Embedded.Identities = []string{"anysched-checker.c1"}
	}), `etcd.embedded.identities[0]: "anysched-checker.c1": anysched-checker.<checker-id> is the old form, refused: a checker's identity names the region it checks, anysched-checker.<region>.<checker-id>`)
	expectErrs(t, "TLS on a management address, complete", center(func(c *Center) {
		c.Etcd.Embedded.ClientListen, c.Etcd.Embedded.TLS, c.Etcd.TLS = "172.16.0.21:2379", srv, own
		c.Etcd.Embedded.Identities = []string{"anysched-regional.hefei.hefei-1+checker", "anysched-checker.hefei.c1", "anysched-checker.center.c2"}
	}))
	// A wildcard also listens on the anycast service address; so does the
	// STB listeners' own address.
	expectErrs(t, "TLS on every address", center(func(c *Center) {
		c.Etcd.Embedded.ClientListen, c.Etcd.Embedded.TLS, c.Etcd.TLS = "0.0.0.0:2379", srv, own
	}), `etcd.embedded.client_listen: "0.0.0.0:2379" listens on every address`)
	expectErrs(t, "TLS on the STB address", center(func(c *Center) {
		c.Etcd.Embedded.ClientListen, c.Etcd.Embedded.TLS, c.Etcd.TLS = "198.18.0.1:2379", srv, own
		c.HTTP.Listen = "198.18.0.1:80"
	}), `etcd.embedded.client_listen: shares its address with http.listen "198.18.0.1:80"`)
}

// TestEtcdHousekeeping: the center's section is checked with its path;
// any other daemon is told it has none.
func TestEtcdHousekeeping(t *testing.T) {
	c := DefaultCenter()
	c.Etcd.Housekeeping.KeepRevisions = 10
	c.Etcd.Housekeeping.MaxHistory = 30 * time.Second
	expectErrs(t, "center", c.Validate(), "etcd.housekeeping.keep_revisions: 10 must be >= 1000", "etcd.housekeeping.max_history: 30s must be at least etcd.housekeeping.min_history 1m0s")
	r := DefaultRegional()
	r.Region, r.Etcd.Endpoints = "hefei", []string{"http://127.0.0.1:2379"}
	expectErrs(t, "regional with the defaults", r.Validate())
	r.Etcd.Housekeeping.Maintain = false
	expectErrs(t, "regional", r.Validate(), "etcd.housekeeping: only the central scheduler keeps etcd's house")
}

// TestCheckerIdentity: --check-config reads the checker's certificate and
// says when its CN is not the identity etcd lets write this checker's
// verdicts, anysched-checker.<region>.<checker_id>, naming that form; the
// form before regions is refused as such.
func TestCheckerIdentity(t *testing.T) {
	f := etcdCerts(t, "anysched-checker.hefei.chk-1", "anysched-checker.chk-1", "anysched-checker.wuhu.chk-1", "anysched-regional.hefei.hefei-1", "anysched-checker.center.chk-1")
	checker := func(cn, region string) error {
		k := DefaultChecker()
		k.Region, k.CheckerID = region, "chk-1"
		k.Etcd.Endpoints = []string{"https://10.0.0.1:2379"}
		k.Etcd.TLS = ClientTLS{CAFile: f["ca"][0], CertFile: f[cn][0], KeyFile: f[cn][1]}
		k.Snapshot.TrustedKeys = []string{f["signing"][1]}
		return k.Validate()
	}
	expectErrs(t, "its own identity", checker("anysched-checker.hefei.chk-1", "hefei"))
	expectErrs(t, "a province-wide checker", checker("anysched-checker.center.chk-1", "center"))
	expectErrs(t, "the old form", checker("anysched-checker.chk-1", "hefei"),
		`etcd.tls.cert_file: CN: "anysched-checker.chk-1": anysched-checker.<checker-id> is the old form, refused`, "anysched-checker.<region>.<checker-id>")
	expectErrs(t, "another region's identity", checker("anysched-checker.wuhu.chk-1", "hefei"),
		`etcd.tls.cert_file: CN "anysched-checker.wuhu.chk-1": this checker (region "hefei", checker_id "chk-1") must have CN anysched-checker.hefei.chk-1`)
	expectErrs(t, "a city's identity", checker("anysched-regional.hefei.hefei-1", "hefei"),
		`etcd.tls.cert_file: CN "anysched-regional.hefei.hefei-1" is a regional's: a checker's etcd certificate has CN anysched-checker.hefei.chk-1`)
}

// TestRegionalIdentity: a city scheduler's etcd certificate must name its
// region (and its instance_id when set): etcd would refuse every write of
// another's, so --check-config says so instead of the first registration.
func TestRegionalIdentity(t *testing.T) {
	f := etcdCerts(t, "anysched-regional.hefei.hefei-1", "anysched-regional.wuhu.hefei-1", "anysched-regional.hefei.hefei-2", "anysched-checker.hefei.c1")
	regional := func(cn string) error {
		r := DefaultRegional()
		r.Region, r.InstanceID, r.Etcd.Endpoints = "hefei", "hefei-1", []string{"https://10.0.0.2:2379"}
		r.Etcd.TLS = ClientTLS{CAFile: f["ca"][0], CertFile: f[cn][0], KeyFile: f[cn][1]}
		r.Snapshot.TrustedKeys = []string{f["signing"][1]}
		return r.Validate()
	}
	expectErrs(t, "its own", regional("anysched-regional.hefei.hefei-1"))
	expectErrs(t, "another region's", regional("anysched-regional.wuhu.hefei-1"), `etcd.tls.cert_file: CN "anysched-regional.wuhu.hefei-1" names region "wuhu", but this scheduler serves "hefei"`)
	expectErrs(t, "another instance's", regional("anysched-regional.hefei.hefei-2"), `etcd.tls.cert_file: CN "anysched-regional.hefei.hefei-2" names instance "hefei-2", but instance_id is "hefei-1"`)
	expectErrs(t, "a checker's", regional("anysched-checker.hefei.c1"), `etcd.tls.cert_file: CN "anysched-checker.hefei.c1" is a checker's`)
}
