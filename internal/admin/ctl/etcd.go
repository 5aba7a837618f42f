package ctl

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/wiring/config"
)

// etcdRolesTimeout bounds etcd-roles: it talks to etcd, not to the admin
// API, so the global --timeout does not apply.
const etcdRolesTimeout = time.Minute

// strList is a repeatable flag.
type strList []string

func (l *strList) String() string { return strings.Join(*l, ",") }
func (l *strList) Set(s string) error {
	*l = append(*l, s)
	return nil
}

// etcdRolesCmd provisions an external etcd cluster's users and roles for
// the province's daemons (docs/security.md), as the center does for its
// embedded etcd. It talks to etcd with the operator's root certificate.
func etcdRolesCmd(ctx context.Context, e *env, args []string) error {
	fs := flag.NewFlagSet("etcd-roles", flag.ContinueOnError)
	endpoints := fs.String("endpoints", "", "etcd client URLs, comma-separated (https://...)")
	cacert := fs.String("cacert", "", "CA certificate that signed etcd's server certificate")
	cert := fs.String("cert", "", "client certificate with CN root")
	key := fs.String("key", "", "its key")
	prefix := fs.String("prefix", "/anysched/", "the province's key prefix (etcd.prefix)")
	var ids strList
	fs.Var(&ids, "identity", "an identity to provision, repeatable: anysched-regional.<region>.<instance-id>[+checker] or anysched-checker.<region>.<checker-id> (region center: province-wide; anysched-center is implied)")
	dry := fs.Bool("dry-run", false, "print what would change, change nothing")
	prune := fs.Bool("prune", false, "delete anysched users and roles that are not listed")
	maintain := fs.Bool("center-maintenance", true, "grant "+etcdauth.CenterIdentity+" etcd's root role, the only one etcd lets compact, defragment and disarm alarms: the center's etcd housekeeping (false: the center stays confined to --prefix and only watches; set etcd.housekeeping.maintain: false and keep house by hand)")
	if err := e.parse(fs, args); err != nil {
		return err
	}
	if err := need("--endpoints", *endpoints, "--cert", *cert, "--key", *key); err != nil {
		return err
	}
	parsed, err := etcdauth.ParseIdentities(ids)
	if err != nil {
		return usagef("--identity %v", err)
	}
	c := config.Etcd{Endpoints: strings.Split(*endpoints, ","), DialTimeout: 5 * time.Second, Prefix: *prefix,
		TLS: config.ClientTLS{CAFile: *cacert, CertFile: *cert, KeyFile: *key}}
	for _, ep := range c.Endpoints {
		if !strings.HasPrefix(ep, "https://") {
			return usagef("--endpoints: %q is not https:// (etcd's auth rests on client certificates)", ep)
		}
	}
	cli, err := etcdclient.Connect(c, c.Endpoints, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, etcdRolesTimeout)
	defer cancel()
	o := etcdauth.Options{Prefix: *prefix, Prune: *prune, CenterRoot: *maintain}
	changes, err := etcdauth.Plan(ctx, cli, parsed, o)
	if err != nil {
		return err
	}
	if len(changes) == 0 {
		fmt.Fprintln(e.out, "nothing to change: users, roles and auth are in place")
		return nil
	}
	verb := ""
	if *dry {
		verb = "would "
	}
	for _, ch := range changes {
		fmt.Fprintf(e.out, "%s%s\n", verb, ch)
	}
	if *dry {
		fmt.Fprintf(e.out, "%d changes (dry run: nothing changed)\n", len(changes))
		return nil
	}
	if err := etcdauth.Apply(ctx, cli, changes); err != nil {
		return err
	}
	fmt.Fprintf(e.out, "%d changes made\n", len(changes))
	return nil
}
