package app

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"time"

	healthpb "google.golang.org/grpc/health/grpc_health_v1"

	"github.com/anysched/anysched/internal/adminapi"
	"github.com/anysched/anysched/internal/allocator"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/store"
	"github.com/anysched/anysched/internal/version"
)

// RunCenter runs the central scheduler until ctx ends.
func RunCenter(ctx context.Context, c config.Center, log *slog.Logger, opts ...Option) error {
	log = log.With("role", RoleCentral)
	endpoints := c.Etcd.Endpoints
	var emb *store.Embedded
	if len(endpoints) == 0 {
		var err error
		emb, err = store.StartEmbedded(ctx, c.Etcd.Embedded, store.EmbeddedOptions{}, log)
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
	st := store.New(cli, c.Etcd.Prefix, log)
	s := New(RoleCentral, "", c.Common, st, log)
	s.DefaultRegion = c.DefaultRegion
	if s.announcer, err = s.newAnnouncer(c.Common); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if s.qoe, err = s.newGate(c.Alloc); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	if err := s.Syncer.LoadCache(); err != nil {
		log.Warn("snapshot cache unusable; waiting for the store", "err", err)
	}
	grpcSrv, hs, err := adminapi.NewServer(c.GRPC, &adminapi.Service{Store: st, Logger: log.With("component", "adminapi"), Engine: s.Engine, Health: s.Availability, Drains: s.Ops.Drains, Lab: c.Lab, Etcd: emb, LabEtcdMembers: c.LabEtcdMembers, ID: s.ID, Traffic: s.traffic}, log)
	if err != nil {
		return &daemon.ConfigError{Err: err}
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
	comps := append(s.components(), serveGRPC)
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
	collect(opts).listening(l)
	return s.runServing(ctx, comps...)
}

// newGate builds the center's viewer-token gate for QoE services.
func (s *Scheduler) newGate(c config.Viewers) (*allocator.Gate, error) {
	v, err := newVerifier(c)
	if err != nil {
		return nil, err
	}
	return allocator.NewGate(c.Auth, v, profile(c.DefaultProfile), s.Registry)
}
