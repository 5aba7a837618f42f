// Package embedcfg is the etcd.embedded section, the settings of the
// member etcdserver runs. It is apart from etcdserver so that config can
// compose it without linking the etcd server into every binary.
package embedcfg

import "github.com/anysched/anysched/internal/security/tlsutil"

// Config is the etcd.embedded section: the single-node etcd a central
// scheduler runs when no external endpoints are configured. Its checks
// span the etcd client's settings too, so config validates it.
type Config struct {
	Dir          string `yaml:"dir"`
	ClientListen string `yaml:"client_listen"`
	PeerListen   string `yaml:"peer_listen"`
	Name         string `yaml:"name"`
	// TLS makes the embedded etcd serve https and require client
	// certificates (client_ca_file) with etcd's RBAC on: required beyond
	// loopback.
	TLS tlsutil.ServerTLS `yaml:"tls"`
	// Identities are the etcd users (client certificate CNs) the center
	// provisions with their roles at every start when TLS is on: the
	// regionals' and checkers' (docs/security.md); its own is implied.
	Identities []string `yaml:"identities"`
}
