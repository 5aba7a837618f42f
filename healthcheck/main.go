// Command healthcheck is the health-check agent: it probes the edge servers
// of its region and publishes its verdicts to etcd under a lease, for every
// scheduler to merge.
package main

import (
	"context"
	"flag"
	"io"
	"strings"

	"github.com/anysched/anysched/internal/app"
	"github.com/anysched/anysched/internal/config"
	"github.com/anysched/anysched/internal/daemon"
	"github.com/anysched/anysched/internal/obs"
)

func main() { daemon.Main("healthcheck", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("healthcheck", flag.ContinueOnError)
	fs.SetOutput(stderr)
	cfgFile := fs.String("config", "", "configuration file (YAML)")
	check := fs.Bool("check-config", false, "validate the configuration, print every problem, and exit (2 when invalid)")
	region := fs.String("region", "", "override region")
	id := fs.String("checker-id", "", "override checker_id")
	endpoints := fs.String("etcd-endpoints", "", "override etcd.endpoints (comma-separated)")
	interval := fs.Duration("interval", 0, "override interval")
	adminListen := fs.String("admin-listen", "", "override admin.listen")
	logLevel := fs.String("log-level", "", "override log.level")
	if err := fs.Parse(args); err != nil {
		return &daemon.ConfigError{Err: err}
	}
	cfg := config.DefaultChecker()
	if *cfgFile != "" {
		if err := config.LoadFile(*cfgFile, &cfg); err != nil {
			return &daemon.ConfigError{Err: err}
		}
	}
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "region":
			cfg.Region = *region
		case "checker-id":
			cfg.CheckerID = *id
		case "etcd-endpoints":
			cfg.Etcd.Endpoints = strings.Split(*endpoints, ",")
		case "interval":
			cfg.Interval = *interval
			if cfg.Timeout > *interval {
				cfg.Timeout = *interval / 2
			}
		case "admin-listen":
			cfg.Admin.Listen = *adminListen
		case "log-level":
			cfg.Log.Level = *logLevel
		}
	})
	if err := daemon.Validated(&daemon.Flags{CheckConfig: *check}, cfg.Validate, stdout); err != nil {
		return err
	}
	log, err := obs.NewLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	return app.RunHealthcheck(ctx, cfg, log)
}
