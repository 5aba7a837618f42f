package lab

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/security/pki"
	"github.com/anysched/anysched/internal/security/signing"
)

// The lab runs the secure configuration: every listener beyond loopback
// (etcd, the admin API) requires client certificates from the lab's own CA,
// created at Up in Dir/pki, and every daemon's etcd identity has the roles
// a production province gives it.

// LabAdmin is the identity of the certificate the lab's schedctl presents
// (role admin: the lab runs drills).
const LabAdmin = "lab-admin"

// creds are the lab's certificate files by name.
type creds struct {
	dir string
	ca  *pki.CA
	// CA is the CA certificate every daemon trusts.
	CA string
}

type certPair struct{ Cert, Key string }

// newCreds makes the lab's CA.
func newCreds(dir string) (*creds, error) {
	dir = filepath.Join(dir, "pki")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	ca, err := pki.NewCA("anysched lab CA", 7*24*time.Hour)
	if err != nil {
		return nil, err
	}
	caFile, _, err := ca.WriteCA(dir)
	if err != nil {
		return nil, err
	}
	return &creds{dir: dir, ca: ca, CA: caFile}, nil
}

// issue writes (once) the certificate called name.
func (c *creds) issue(name string, l pki.Leaf) (certPair, error) {
	p := certPair{filepath.Join(c.dir, name+".pem"), filepath.Join(c.dir, name+"-key.pem")}
	if _, err := os.Stat(p.Key); err == nil {
		return p, nil
	}
	if c.ca == nil {
		return certPair{}, fmt.Errorf("lab pki: no %s in %s, and an attached lab cannot issue certificates", name, c.dir)
	}
	if l.Validity == 0 {
		l.Validity = 7 * 24 * time.Hour
	}
	cert, key, err := c.ca.WriteLeaf(c.dir, name, l)
	if err != nil {
		return certPair{}, fmt.Errorf("lab pki: %w", err)
	}
	return certPair{cert, key}, nil
}

// attachCreds is the lab's credentials as Up left them on disk (for
// commands run against a lab another process brought up): the files only,
// no CA key, so nothing new can be issued.
func attachCreds(dir string) *creds {
	dir = filepath.Join(dir, "pki")
	return &creds{dir: dir, CA: filepath.Join(dir, "ca.pem")}
}

// etcdIdentity is the etcd user (certificate CN) of a regional scheduler.
func etcdIdentity(city, instance string) string {
	return etcdauth.RegionalPrefix + city + "." + instance
}

// etcdIdentities are every lab daemon's etcd users but the center's
// (implied): each scheduler, with a checker's keys when it embeds one.
func (l *Lab) etcdIdentities() []string {
	var ids []string
	for i, city := range l.o.Cities {
		insts := []string{PrimaryID(city)}
		if l.o.Standby[i] {
			insts = append(insts, StandbyID(city))
		}
		for _, in := range insts {
			id := etcdIdentity(city, in)
			if l.o.Edges {
				id += etcdauth.EmbeddedCheckerSuffix
			}
			ids = append(ids, id)
		}
	}
	return append(ids, l.o.EtcdIdentities...)
}

// etcdClient writes the etcd client certificate of identity cn and returns
// the configuration's etcd.tls section for it.
func (l *Lab) etcdClientTLS(cn string) (string, error) {
	p, err := l.creds.issue(cn, pki.Leaf{CN: cn, Client: true})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("  tls: {ca_file: %s, cert_file: %s, key_file: %s}\n", l.creds.CA, p.Cert, p.Key), nil
}

// provisionEtcd gives the lab's etcd cluster its users and roles with the
// root certificate, as an operator does for an external cluster
// (schedctl etcd-roles), retrying until the members make a quorum.
func (l *Lab) provisionEtcd(ctx context.Context) error {
	root, err := l.creds.issue(etcdauth.RootUser, pki.Leaf{CN: etcdauth.RootUser, Client: true})
	if err != nil {
		return err
	}
	args := []string{"netns", "exec", l.nsName("core"), filepath.Join(l.o.Bin, "schedctl"), "etcd-roles",
		"--endpoints", strings.Join(l.EtcdEndpoints(), ","), "--cacert", l.creds.CA, "--cert", root.Cert, "--key", root.Key}
	for _, id := range l.etcdIdentities() {
		args = append(args, "--identity", id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		out, err := exec.CommandContext(ctx, "ip", args...).CombinedOutput()
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return fmt.Errorf("provision etcd roles: %v: %s", err, bytes.TrimSpace(out))
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// SchedctlArgs are the global flags that reach the lab center's admin API
// as the lab's admin (mutual TLS).
func (l *Lab) SchedctlArgs() []string {
	p, err := l.creds.issue(LabAdmin, pki.Leaf{CN: LabAdmin, Role: "admin", Client: true})
	if err != nil { // only an attached lab cannot issue, and Up issued it
		p = certPair{filepath.Join(l.creds.dir, LabAdmin+".pem"), filepath.Join(l.creds.dir, LabAdmin+"-key.pem")}
	}
	return []string{"--server", centerGRPC, "--tls-ca", l.creds.CA, "--tls-cert", p.Cert, "--tls-key", p.Key}
}

// centerGRPC is the center's admin API address.
const centerGRPC = "10.0.0.2:9090"

// signingKeys writes (once) the lab's topology signing key pair: the
// center signs every applied document, every scheduler trusts only it.
func (c *creds) signingKeys() (priv, pub string, err error) {
	priv, pub = filepath.Join(c.dir, "topology-signing.key"), filepath.Join(c.dir, "topology-signing.pub")
	if _, err := os.Stat(priv); err == nil {
		return priv, pub, nil
	}
	if _, err := signing.WriteKeyPair(priv, pub); err != nil {
		return "", "", fmt.Errorf("lab pki: %w", err)
	}
	return priv, pub, nil
}

// etcdClientYAML is a scheduler's etcd section: the endpoints (none for
// the center's embedded etcd) and its client certificate (identity cn).
func (l *Lab) etcdClientYAML(cn string, endpoints bool) (string, error) {
	etcdTLS, err := l.etcdClientTLS(cn)
	if err != nil {
		return "", err
	}
	eps := ""
	if endpoints {
		eps = fmt.Sprintf("  endpoints: [%s]\n", strings.Join(l.EtcdEndpoints(), ", "))
	}
	return "etcd:\n" + eps + etcdTLS, nil
}
