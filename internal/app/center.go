package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/anysched/anysched/internal/adminapi"
	"github.com/anysched/anysched/internal/allocator"
	"github.com/anysched/anysched/internal/audit"
	"github.com/anysched/anysched/internal/authz"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/console"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/etcdauth"
	"github.com/anysched/anysched/internal/etcdserver"
	"github.com/anysched/anysched/internal/netutil"
	"github.com/anysched/anysched/internal/signing"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/version"
)

// RunCenter runs the central scheduler until ctx ends.
func RunCenter(ctx context.Context, c config.Center, log *slog.Logger, opts ...daemon.Option) error {
	log = log.With("role", RoleCentral)
	endpoints := c.Etcd.Endpoints
	var emb *etcdserver.Embedded
	if len(endpoints) == 0 {
		var err error
		emb, err = etcdserver.StartEmbedded(ctx, c.Etcd.Embedded, etcdserver.EmbeddedOptions{}, log)
		if err != nil {
			return err
		}
		defer emb.Close()
		endpoints = []string{emb.ClientURL}
	}
	cli, err := store.Connect(c.Etcd, endpoints, log)
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
	s := New(RoleCentral, "", c.Common, st, log)
	s.DefaultRegion = c.DefaultRegion
	if s.announcer, err = s.newAnnouncer(c.Common); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	gate, err := s.newGate(c.Alloc.Viewers)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	s.qoe = gate
	if c.Alloc.PlanFallenCities {
		s.planning = s.newRegions(c.Alloc.Alloc, gate)
		s.qoe = s.planning
	}
	if s.Syncer.Verifier, err = signing.LoadVerifier(c.Snapshot.TrustedKeys); err != nil {
		return &daemon.ConfigError{Err: fmt.Errorf("snapshot.trusted_keys: %w", err)}
	}
	applyPolicy := adminapi.ApplyPolicy{MaxRemovalShare: c.Apply.MaxRemovalShare, HistoryKeep: c.Apply.HistoryKeep}
	if c.Apply.SigningKeyFile != "" {
		key, err := signing.LoadPrivateKey(c.Apply.SigningKeyFile)
		if err != nil {
			return &daemon.ConfigError{Err: fmt.Errorf("apply.signing_key_file: %w", err)}
		}
		applyPolicy.Signer = signing.NewSigner(key)
		log.Info("applied topologies are signed", "key_id", applyPolicy.Signer.KeyID())
	} else {
		log.Warn("no apply.signing_key_file: applied topologies are unsigned, and schedulers with snapshot.trusted_keys will refuse them")
	}
	if err := s.Syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	trail := audit.New(cli, c.Etcd.Prefix, audit.Options{Keep: c.Audit.Keep, MaxAge: c.Audit.MaxAge}, s.Registry, log)
	svc := &adminapi.Service{Store: st, Logger: log.With("component", "adminapi"), Engine: s.Engine, Health: s.Availability, Drains: s.Ops.Drains, Lab: c.Lab, Etcd: emb, LabEtcdMembers: c.LabEtcdMembers, ID: s.ID, Traffic: s.traffic,
		Trail: trail, AllowProductionDrills: c.Drills.AllowProduction, Apply: applyPolicy, Limits: c.Anycast.Limits()}
	grpcSrv, hs, err := adminapi.NewServer(c.GRPC, svc, log.With("component", "adminapi"))
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	// The console: the same service, role table and audit trail as gRPC;
	// a local caller has the gRPC listener's local role.
	localRole := authz.None
	if c.GRPC.LocalRole != "" {
		if localRole, err = authz.ParseRole(c.GRPC.LocalRole); err != nil {
			return &daemon.ConfigError{Err: fmt.Errorf("grpc.local_role: %w", err)}
		}
	}
	con, err := s.mountConsole(svc, adminapi.NewGate(trail, log.With("component", "adminapi")), localRole, false)
	if err != nil {
		return err
	}
	l, err := s.listen()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", c.GRPC.Listen)
	if err != nil {
		s.bound.close()
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
	comps := append(s.components(), serveGRPC, con.Run)
	if s.planning != nil {
		comps = append(comps, s.planning.Run)
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
	return s.runServing(ctx, comps...)
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

// newRegions builds the center's planners of fallen cities: each shares
// its city's capacity through the city's claims, ranked after the city's
// own schedulers, and adopts the plan the city last published.
func (s *Scheduler) newRegions(c config.Alloc, gate *allocator.Gate) *allocator.Regions {
	boards := func(region string) allocator.Board {
		return &store.ClaimBoard{Store: s.Store, Region: region, Instance: s.ID, TTL: max(3*c.Period, 10*time.Second)}
	}
	return allocator.NewRegions(allocator.Config{
		Instance: s.ID, Period: c.Period, SessionTTL: c.SessionTTL, SolveTimeout: c.SolveTimeout, MaxSessions: c.MaxSessions,
		Auth: c.Auth, ArrivalReserve: c.ArrivalReserve, Params: ModelParams(c.Model), Default: profile(c.DefaultProfile),
		IdleAfter: c.IdleAfter, States: s.Store, StateInterval: c.StateInterval, Gate: gate,
	}, boards, s.Engine, s.Registry, s.Logger)
}

// newGate builds the center's viewer-token gate for QoE services.
func (s *Scheduler) newGate(c config.Viewers) (*allocator.Gate, error) {
	v, err := newVerifier(c)
	if err != nil {
		return nil, err
	}
	return allocator.NewGate(c.Auth, v, profile(c.DefaultProfile), s.Registry)
}

// mountConsole serves the operator console on the admin listener (and
// sends / there), calling svc through gate. A plaintext caller on a
// loopback admin listener is "local" with localRole, as on the gRPC
// listener; beyond loopback the configuration demands mutual TLS.
func (s *Scheduler) mountConsole(svc *adminapi.Service, gate *adminapi.Gate, localRole authz.Role, readOnly bool) (*console.Console, error) {
	loopback := false
	if host, _, err := net.SplitHostPort(s.common.Admin.Listen); err == nil {
		loopback = netutil.LoopbackHost(host)
	}
	name := s.Role + " " + s.ID
	con, err := console.New(console.Config{Service: svc, Gate: gate, ReadOnly: readOnly, Loopback: loopback, LocalRole: localRole,
		Gatherer: s.Registry, Scheduler: name, Logger: s.Logger.With("component", "console")})
	if err != nil {
		return nil, err
	}
	s.Admin.Extra[console.Prefix] = con.Handler()
	s.Admin.Extra["GET /{$}"] = http.RedirectHandler(console.Prefix, http.StatusFound)
	return con, nil
}
