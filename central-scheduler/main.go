// Command central-scheduler is the provincial scheduler: it announces the
// covering prefix, answers for every city as the fallback, hosts the admin
// gRPC API, and runs an embedded etcd when no cluster is configured.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"

	"github.com/anysched/anysched/internal/app"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/obs"
	"github.com/anysched/anysched/netconfig"
)

func main() { daemon.Main("central-scheduler", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("central-scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := daemon.Register(fs)
	grpcListen := fs.String("grpc-listen", "", "override grpc.listen")
	cfg := config.DefaultCenter()
	err := daemon.Load(fs, f, args, &cfg.Common, &cfg, func(set map[string]bool) {
		if set["grpc-listen"] {
			cfg.GRPC.Listen = *grpcListen
		}
	})
	if err != nil {
		return err
	}
	if err := daemon.Validated(f, cfg.Validate, stdout); err != nil {
		return err
	}
	if f.Cleanup {
		if err := netconfig.Cleanup(cfg.Anycast.Interface); err != nil {
			return err
		}
		if err := netconfig.CleanupLocal(); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "removed %s (if it existed)\n", cfg.Anycast.Interface)
		return daemon.ErrCheckedOnly
	}
	log, err := obs.NewLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	return app.RunCenter(ctx, cfg, log)
}
