// Package center is the central scheduler's wiring: the shared scheduler
// of internal/wiring/app, with what only the center runs: the embedded etcd and
// its users, etcd's housekeeping, the admin gRPC API and the console over
// it, the audit trail, and the planners of fallen cities. Only central-scheduler imports it, so
// that a city scheduler links no etcd server.
package center

import (
	"context"
	"crypto/x509"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/anysched/anysched/internal/admin/adminapi"
	"github.com/anysched/anysched/internal/admin/authz"
	"github.com/anysched/anysched/internal/allocation/allocator"
	"github.com/anysched/anysched/internal/etcd/etcdauth"
	"github.com/anysched/anysched/internal/etcd/etcdclient"
	"github.com/anysched/anysched/internal/etcd/etcdguard"
	"github.com/anysched/anysched/internal/etcd/etcdhousekeep"
	"github.com/anysched/anysched/internal/etcd/etcdserver"
	"github.com/anysched/anysched/internal/etcd/keyspace"
	"github.com/anysched/anysched/internal/province/audit"
	"github.com/anysched/anysched/internal/province/instance"
	"github.com/anysched/anysched/internal/province/opstate"
	"github.com/anysched/anysched/internal/province/store"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/security/tlsutil"
	"github.com/anysched/anysched/internal/wiring/app"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/version"
)

// Run runs the central scheduler until ctx ends.
func Run(ctx context.Context, c config.Center, log *slog.Logger, opts ...daemon.Option) error {
	log = log.With("role", instance.Central.String())
	endpoints := c.Etcd.Endpoints
	var emb *etcdserver.Embedded
	if len(endpoints) == 0 {
		var err error
		emb, err = etcdserver.StartEmbedded(ctx, c.Etcd.Embedded, etcdserver.EmbeddedOptions{KeepRevisions: c.Etcd.Housekeeping.KeepRevisions}, log)
		if err != nil {
			return err
		}
		defer emb.Close()
		endpoints = []string{emb.ClientURL}
	}
	meter := etcdclient.NewWriteMeter(c.Etcd.Prefix)
	cli, err := etcdclient.Connect(c.Etcd, endpoints, log, etcdclient.WithWriteMeter(meter))
	if err != nil {
		return err
	}
	defer cli.Close()
	if emb != nil && c.Etcd.Embedded.TLS.Enabled() {
		if err := provisionEmbedded(ctx, cli, c.Etcd, log); err != nil {
			return err
		}
	}
	st := store.New(cli, c.Etcd.Prefix, log)
	s := app.New(instance.Central, "", c.Common, st, log)
	s.Registry.MustRegister(meter)
	s.DefaultRegion = c.DefaultRegion
	gate, err := newGate(s, c.Alloc.Alloc)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	s.QoE = gate
	var planning *allocator.Regions
	if c.Alloc.PlanFallenCities {
		planning = newRegions(s, c.Alloc.Alloc, gate)
		s.QoE, s.Planning = planning, planning
	}
	if s.Syncer.Verifier, err = signing.LoadVerifier(c.Snapshot.TrustedKeys); err != nil {
		return &daemon.ConfigError{Err: fmt.Errorf("snapshot.trusted_keys: %w", err)}
	}
	s.VerifyOpstate(c.Snapshot.OpstateSignatures)
	applyPolicy := adminapi.ApplyPolicy{MaxRemovalShare: c.Apply.MaxRemovalShare, HistoryKeep: c.Apply.HistoryKeep}
	if c.Apply.SigningKeyFile != "" {
		key, err := signing.LoadPrivateKey(c.Apply.SigningKeyFile)
		if err != nil {
			return &daemon.ConfigError{Err: fmt.Errorf("apply.signing_key_file: %w", err)}
		}
		applyPolicy.Signer = signing.NewSigner(key)
		log.Info("applied topologies, drains, drills and the balance policy are signed", "key_id", applyPolicy.Signer.KeyID())
	} else {
		log.Warn("no apply.signing_key_file: applied topologies and operator state are unsigned, and schedulers with snapshot.trusted_keys will refuse them")
	}
	if err := s.Syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	trail := audit.New(cli, c.Etcd.Prefix, audit.Options{Keep: c.Audit.Keep, MaxAge: c.Audit.MaxAge}, s.Registry, log)
	house := etcdhousekeep.New(cli, c.Etcd.Housekeeping, etcdhousekeep.Options{Lead: housekeepingLead(st, s.ID)}, s.Registry, log.With("component", "etcdhousekeep"))
	guard := etcdguard.New(cli, c.Etcd.Prefix, c.Etcd.WriteGuard, etcdguard.Options{Lead: housekeepingLead(st, s.ID)}, s.Registry, log.With("component", "etcdguard"))
	svc := &adminapi.Service{Store: st, Logger: log.With("component", "adminapi"), Engine: s.Engine, Health: s.Availability, Drains: s.Ops.Drains, Lab: c.Lab, LabEtcdMembers: c.LabEtcdMembers, ID: s.ID, Traffic: s.Traffic,
		Trail: trail, AllowProductionDrills: c.Drills.AllowProduction, Apply: applyPolicy, Limits: c.Anycast.Limits(), EtcdHousekeeping: etcdStatus(house, guard, c.Etcd.Prefix),
		QoEModel: c.Alloc.Alloc.Config.Params}
	if emb != nil { // not a nil *Embedded in the interface: the drill asks svc.Etcd == nil
		svc.Etcd = emb
	}
	grpcSrv, hs, err := adminapi.NewServer(c.GRPC, svc, log.With("component", "adminapi"))
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	// The console: the same service, role table and audit trail as gRPC;
	// a local caller has console.local_role (viewer by default: a browser
	// on the center's host may run any page's script).
	localRole := authz.None
	if c.Console.LocalRole != "" {
		if localRole, err = authz.ParseRole(c.Console.LocalRole); err != nil {
			return &daemon.ConfigError{Err: fmt.Errorf("console.local_role: %w", err)}
		}
	}
	// Certificates carry a role only from the operators' CA: the admin
	// listener also accepts the scrapers' (an empty pool: none does).
	roleCAs := x509.NewCertPool()
	if f := c.RoleCAFile(); f != "" {
		if roleCAs, err = tlsutil.Pool(f); err != nil {
			return &daemon.ConfigError{Err: fmt.Errorf("console.client_ca_file: %w", err)}
		}
	}
	con, err := s.MountConsole(svc, adminapi.NewGate(trail, log.With("component", "adminapi")), localRole, false, roleCAs)
	if err != nil {
		return err
	}
	l, err := s.Listen()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.GRPC.Listen)
	if err != nil {
		s.CloseListeners()
		return fmt.Errorf("grpc listener: %w", err)
	}
	l.GRPC = ln.Addr().String()
	if emb != nil {
		l.Etcd = strings.TrimPrefix(strings.TrimPrefix(emb.ClientURL, "http://"), "https://")
	}
	log.Info("central scheduler starting", "id", s.ID, "version", version.String(), "grpc", ln.Addr().String(), "etcd", endpoints, "embedded_etcd", emb != nil)
	serveGRPC := func(ctx context.Context) error {
		hs.SetServingStatus("", healthpb.HealthCheckResponse_SERVING)
		errc := make(chan error, 1)
		go func() { errc <- grpcSrv.Serve(ln) }()
		select {
		case err := <-errc:
			return fmt.Errorf("grpc: %w", err)
		case <-ctx.Done():
			hs.Shutdown()
			stopped := make(chan struct{})
			go func() { grpcSrv.GracefulStop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(5 * time.Second):
				grpcSrv.Stop()
			}
			return nil
		}
	}
	// Ended drain windows: the schedulers stopped applying them by
	// themselves; the housekeeping center deletes and audits them.
	endDrains := func(ctx context.Context) error { return svc.RunDrainHousekeeping(ctx, housekeepingLead(st, s.ID)) }
	comps := append(s.Components(), serveGRPC, con.Run, house.Run, guard.Run, endDrains)
	if applyPolicy.Signer != nil {
		comps = append(comps, signOpstate(cli, c.Etcd.Prefix, applyPolicy.Signer, log))
	}
	if planning != nil {
		comps = append(comps, planning.Run)
	}
	if emb != nil {
		comps = append(comps, func(ctx context.Context) error {
			for {
				errc, changed := emb.Err()
				select {
				case err := <-errc:
					return fmt.Errorf("embedded etcd: %w", err)
				case <-changed: // stopped or restarted by a drill
				case <-ctx.Done():
					return nil
				}
			}
		})
	}
	daemon.CollectOptions(opts).Listening(l)
	return s.Serve(ctx, comps...)
}

// signOpstate signs, once at start, the operator state a center of the
// release before wrote unsigned, so that schedulers that require signed
// state keep the operator's drains and balance policy; it tries again
// until etcd answers.
func signOpstate(cli *clientv3.Client, prefix string, s *signing.Signer, log *slog.Logger) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			n, err := opstate.SignUnsigned(ctx, cli, prefix, s)
			if err == nil {
				if n > 0 {
					log.Info("signed the operator state a center of the release before wrote unsigned", "component", "opstate", "values", n)
				}
				<-ctx.Done()
				return nil
			}
			log.Warn("could not sign the unsigned operator state yet; trying again", "component", "opstate", "err", err)
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(10 * time.Second):
			}
		}
	}
}

// provisionEmbedded gives the embedded etcd the users and roles of
// etcd.embedded.identities (and the center's own, with the root role, so
// that it can do this again at every start), revokes and deletes what is
// no longer listed, and turns etcd's auth on. It changes nothing when all
// is in place.
func provisionEmbedded(ctx context.Context, cli *clientv3.Client, c config.Etcd, log *slog.Logger) error {
	ids, err := etcdauth.ParseIdentities(c.Embedded.Identities)
	if err != nil {
		return &daemon.ConfigError{Err: fmt.Errorf("etcd.embedded.identities: %w", err)}
	}
	pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	changes, err := etcdauth.Provision(pctx, cli, ids, etcdauth.Options{Prefix: c.Prefix, CenterRoot: true, Prune: true})
	for _, ch := range changes {
		log.Info("embedded etcd: "+ch.What, "component", "etcdauth")
	}
	if err != nil {
		return fmt.Errorf("embedded etcd: provisioning users and roles: %w", err)
	}
	log.Info("embedded etcd: users and roles in place, auth on", "component", "etcdauth", "identities", len(ids)+1, "changes", len(changes))
	return nil
}

// housekeepingLead is who keeps etcd's house: the registered center with
// the smallest instance id (this one until another is seen); the others
// only watch. Registrations live under leases, which etcd keeps alive
// under NOSPACE, so the choice holds when the house needs keeping most,
// and a center that died hands over when its lease expires.
// etcdStatus is what the housekeeper saw, with the write guard's
// revocations among the problems an operator must act on.
func etcdStatus(house *etcdhousekeep.Housekeeper, guard *etcdguard.Guard, prefix string) func() etcdhousekeep.Status {
	return func() etcdhousekeep.Status {
		st := house.Status()
		for _, r := range guard.Revoked() {
			st.Problems = append(st.Problems, fmt.Sprintf("etcd writes of %s revoked since %s: %s (investigate the host, then delete %s%s%s to grant them back)",
				r.Identity, r.At.Format(time.RFC3339), r.Reason, prefix, keyspace.PrefixGuardRevoked, r.Identity))
		}
		return st
	}
}

func housekeepingLead(st *store.Store, id string) func(context.Context) (bool, error) {
	return func(ctx context.Context) (bool, error) {
		ins, err := st.Instances(ctx)
		if err != nil {
			return false, err
		}
		for _, in := range ins {
			if in.Role == instance.Central && in.ID < id {
				return false, nil
			}
		}
		return true, nil
	}
}

// newRegions builds the center's planners of fallen cities: each shares
// its city's capacity through the city's claims, ranked after the city's
// own schedulers, and adopts the plan the city last published.
func newRegions(s *app.Scheduler, c config.Alloc, gate *allocator.Gate) *allocator.Regions {
	boards := func(region string) allocator.Board {
		return &store.ClaimBoard{Store: s.Store, Region: region, Instance: s.ID, TTL: max(3*c.Period, 10*time.Second)}
	}
	cfg := c.Config
	cfg.Instance, cfg.States, cfg.Gate = s.ID, s.Store, gate
	return allocator.NewRegions(cfg, boards, s.Engine, s.Registry, s.Logger)
}

// newGate builds the center's viewer-token gate for QoE services.
func newGate(s *app.Scheduler, c config.Alloc) (*allocator.Gate, error) {
	v, err := app.NewVerifier(c.Viewers)
	if err != nil {
		return nil, err
	}
	return allocator.NewGate(c.Auth, v, c.Default, s.Registry)
}
