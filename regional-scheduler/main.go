// Command regional-scheduler is a city's scheduler: it announces the Anycast
// service address inside its city and answers the city's set-top boxes.
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

func main() { daemon.Main("regional-scheduler", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("regional-scheduler", flag.ContinueOnError)
	fs.SetOutput(stderr)
	f := daemon.Register(fs)
	region := fs.String("region", "", "override region")
	cfg := config.DefaultRegional()
	err := daemon.Load(fs, f, args, &cfg.Common, &cfg, func(set map[string]bool) {
		if set["region"] {
			cfg.Region = *region
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
	return app.RunRegional(ctx, cfg, log)
}
