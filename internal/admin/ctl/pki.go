package ctl

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/security/pki"
)

// pkiCmd makes certificates for a province whose operator has no PKI of
// their own (docs/security.md): a CA, then leaf certificates whose subject
// CN is the identity and whose URI SAN carries an admin role.
func pkiCmd(ctx context.Context, e *env, args []string) error {
	if e.help && (len(args) == 0 || args[0] != "ca" && args[0] != "issue") {
		return e.helpEach(ctx, pkiCmd, "ca", "issue")
	}
	if len(args) == 0 {
		return usagef("pki: ca or issue")
	}
	switch args[0] {
	case "ca":
		fs := flag.NewFlagSet("pki ca", flag.ContinueOnError)
		dir := fs.String("dir", "", "directory for ca.pem and ca-key.pem (0600)")
		cn := fs.String("cn", "anysched CA", "the CA's common name")
		validity := fs.Duration("validity", 5*365*24*time.Hour, "how long the CA is valid")
		if err := e.parse(fs, args[1:]); err != nil {
			return err
		}
		if err := need("--dir", *dir); err != nil {
			return err
		}
		if _, err := os.Stat(filepath.Join(*dir, "ca-key.pem")); err == nil {
			return fmt.Errorf("pki ca: %s already holds a CA; remove it first to make a new one", *dir)
		}
		if err := os.MkdirAll(*dir, 0o700); err != nil {
			return fmt.Errorf("pki ca: %w", err)
		}
		ca, err := pki.NewCA(*cn, *validity)
		if err != nil {
			return err
		}
		cert, key, err := ca.WriteCA(*dir)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "CA %q valid until %s\n  certificate: %s\n  key:         %s (keep it offline)\n", *cn, ca.Cert.NotAfter.Format(time.DateOnly), cert, key)
		return nil
	case "issue":
		fs := flag.NewFlagSet("pki issue", flag.ContinueOnError)
		caDir := fs.String("ca-dir", "", "directory of the CA (ca.pem, ca-key.pem)")
		out := fs.String("out", "", "directory for NAME.pem and NAME-key.pem (default: --ca-dir)")
		name := fs.String("name", "", "file name (default: the CN)")
		var l pki.Leaf
		fs.StringVar(&l.CN, "cn", "", "the identity: an operator's name, or a daemon's etcd user (anysched-center, anysched-regional.REGION.INSTANCE, anysched-checker.REGION.ID)")
		fs.StringVar(&l.Role, "role", "", "admin API role carried by the certificate: viewer, operator or admin")
		hosts := fs.String("hosts", "", "comma-separated DNS names and IP addresses (a server certificate)")
		fs.BoolVar(&l.Server, "server", false, "a server certificate")
		fs.BoolVar(&l.Client, "client", false, "a client certificate")
		fs.DurationVar(&l.Validity, "validity", 365*24*time.Hour, "how long the certificate is valid")
		if err := e.parse(fs, args[1:]); err != nil {
			return err
		}
		if err := need("--ca-dir", *caDir, "--cn", l.CN); err != nil {
			return err
		}
		if l.Role != "" {
			if _, err := authz.ParseRole(l.Role); err != nil {
				return usagef("--role: %v", err)
			}
		}
		if *hosts != "" {
			l.Hosts = strings.Split(*hosts, ",")
		}
		if l.Server && len(l.Hosts) == 0 {
			return usagef("--server needs --hosts: the names and addresses clients dial")
		}
		if !l.Server && !l.Client {
			return usagef("pki issue: --server, --client or both")
		}
		ca, err := pki.LoadCA(filepath.Join(*caDir, "ca.pem"), filepath.Join(*caDir, "ca-key.pem"))
		if err != nil {
			return err
		}
		if *out == "" {
			*out = *caDir
		}
		if *name == "" {
			*name = l.CN
		}
		cert, key, err := ca.WriteLeaf(*out, *name, l)
		if err != nil {
			return err
		}
		fmt.Fprintf(e.out, "issued %q (role %q)\n  certificate: %s\n  key:         %s\n", l.CN, l.Role, cert, key)
		return nil
	}
	return usagef("pki: %q is not ca or issue", args[0])
}
