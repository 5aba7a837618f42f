// Command healthcheck is the health-check agent: it probes the edge servers
// of its region and publishes its verdicts to etcd under a lease, for every
// scheduler to merge.
package main

import (
	"context"
	"io"

	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
	"github.com/anysched/anysched/internal/wiring/healthd"
	"github.com/anysched/anysched/internal/wiring/obs"
)

func main() { daemon.Main("healthcheck", run) }

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := config.DefaultChecker()
	f := daemon.Checker(&cfg, stderr)
	if err := f.Load(args, &cfg, stdout); err != nil {
		return err
	}
	log, err := obs.NewLogger(stderr, cfg.Log.Level, cfg.Log.Format)
	if err != nil {
		return &daemon.ConfigError{Err: err}
	}
	return healthd.Run(ctx, cfg, log)
}
