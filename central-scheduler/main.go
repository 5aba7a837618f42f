// Command central-scheduler is the provincial scheduler: it announces the
// covering prefix, answers for every city as the fallback, hosts the admin
// gRPC API, and runs an embedded etcd when no cluster is configured.
package main

import (
	"context"
	"io"

	"github.com/anysched/anysched/internal/wiring/app/center"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/obs"
)

func main() { daemon.Main("central-scheduler", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := config.DefaultCenter()
	f, cleanup := daemon.Center(&cfg, stderr)
	if err := f.Load(args, &cfg, stdout); err != nil {
		return err
	}
	if *cleanup {
		return daemon.Cleanup(cfg.Anycast.Interface, stdout)
	}
	log, err := obs.NewLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	return center.Run(ctx, cfg, log)
}
