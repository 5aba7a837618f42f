// Package daemon is the plumbing every anysched daemon main shares: common
// flags layered over the config file, signal handling, and exit codes
// (0 clean, 1 runtime failure, 2 bad configuration).
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/anysched/anysched/internal/config"
)

// ConfigError marks a failure caused by configuration: exit code 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ExitCode maps run's error to the process exit code.
func ExitCode(err error) int {
	var ce *ConfigError
	switch {
	case err == nil, errors.Is(err, context.Canceled):
		return 0
	case errors.As(err, &ce), errors.Is(err, flag.ErrHelp):
		return 2
	default:
		return 1
	}
}

// Flags are the flags every scheduler daemon takes. Flags override the file.
type Flags struct {
	Config        string
	CheckConfig   bool
	Cleanup       bool
	logLevel      string
	logFormat     string
	adminListen   string
	etcdEndpoints string
	instanceID    string
}

// Register defines the common flags on fs.
func Register(fs *flag.FlagSet) *Flags {
	f := &Flags{}
	fs.StringVar(&f.Config, "config", "", "configuration file (YAML)")
	fs.BoolVar(&f.CheckConfig, "check-config", false, "validate the configuration, print every problem, and exit (2 when invalid)")
	fs.BoolVar(&f.Cleanup, "cleanup", false, "remove the Anycast interface a crashed run left behind (anycast.interface), and exit")
	fs.StringVar(&f.logLevel, "log-level", "", "override log.level (debug, info, warn, error)")
	fs.StringVar(&f.logFormat, "log-format", "", "override log.format (text, json)")
	fs.StringVar(&f.adminListen, "admin-listen", "", "override admin.listen")
	fs.StringVar(&f.etcdEndpoints, "etcd-endpoints", "", "override etcd.endpoints (comma-separated URLs)")
	fs.StringVar(&f.instanceID, "instance-id", "", "override instance_id")
	return f
}

// Load parses args, reads the config file over the defaults in cfg, and
// applies the flags that were set. apply is called for daemon-specific flags.
func Load(fs *flag.FlagSet, f *Flags, args []string, c *config.Common, cfg any, apply func(set map[string]bool)) error {
	if err := fs.Parse(args); err != nil {
		return &ConfigError{err}
	}
	if fs.NArg() > 0 {
		return &ConfigError{fmt.Errorf("unexpected arguments: %s", strings.Join(fs.Args(), " "))}
	}
	if f.Config != "" {
		if err := config.LoadFile(f.Config, cfg); err != nil {
			return &ConfigError{err}
		}
	}
	set := map[string]bool{}
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if set["log-level"] {
		c.Log.Level = f.logLevel
	}
	if set["log-format"] {
		c.Log.Format = f.logFormat
	}
	if set["admin-listen"] {
		c.Admin.Listen = f.adminListen
	}
	if set["etcd-endpoints"] {
		c.Etcd.Endpoints = nil
		for e := range strings.SplitSeq(f.etcdEndpoints, ",") {
			if e = strings.TrimSpace(e); e != "" {
				c.Etcd.Endpoints = append(c.Etcd.Endpoints, e)
			}
		}
	}
	if set["instance-id"] {
		c.InstanceID = f.instanceID
	}
	if apply != nil {
		apply(set)
	}
	return nil
}

// Validated runs validate; on failure it prints every problem and returns a
// ConfigError. With --check-config it reports success and returns errStop.
func Validated(f *Flags, validate func() error, stdout io.Writer) error {
	if err := validate(); err != nil {
		return &ConfigError{fmt.Errorf("invalid configuration:\n%w", err)}
	}
	if f.CheckConfig {
		fmt.Fprintln(stdout, "configuration OK")
		return ErrCheckedOnly
	}
	return nil
}

// ErrCheckedOnly ends a --check-config run successfully.
var ErrCheckedOnly = errors.New("configuration checked")

// SignalContext is cancelled by SIGINT or SIGTERM. After the first signal the
// default handling is restored, so a second signal kills the process at once.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// Main runs run and exits with its code, printing a runtime error once.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := SignalContext(context.Background())
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if errors.Is(err, ErrCheckedOnly) {
		os.Exit(0)
	}
	code := ExitCode(err)
	if code != 0 && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	os.Exit(code)
}
