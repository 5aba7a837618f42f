// Command regional-scheduler is a city's scheduler: it announces the Anycast
// service address inside its city and answers the city's set-top boxes.
package main

import (
	"context"
	"io"

	"github.com/anysched/anysched/internal/wiring/app"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/obs"
)

func main() { daemon.Main("regional-scheduler", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := config.DefaultRegional()
	f, cleanup := daemon.Regional(&cfg, stderr)
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
	return app.RunRegional(ctx, cfg, log)
}
