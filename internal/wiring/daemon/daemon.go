// Package daemon is the plumbing every anysched daemon main shares: one flag
// path (defaults, then the config file, then the flags that were given),
// --check-config, signal handling, and exit codes (0 clean, 1 runtime
// failure, 2 bad configuration).
//
// A main builds its configuration's defaults, gets its command line over
// them (Center, Regional, Checker: New with the Base they embed, and the
// daemon's own overrides), and calls Load:
//
//	cfg := config.DefaultRegional()
//	f, cleanup := daemon.Regional(&cfg, stderr)
//	if err := f.Load(args, &cfg, stdout); err != nil {
//		return err // a ConfigError, or ErrCheckedOnly after --check-config or --help
//	}
package daemon

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/yamlstrict"
	"github.com/anysched/anysched/netconfig"
)

// ConfigError marks a failure caused by configuration: exit code 2.
type ConfigError struct{ Err error }

func (e *ConfigError) Error() string { return e.Err.Error() }
func (e *ConfigError) Unwrap() error { return e.Err }

// ConfigIf marks err a ConfigError when it wraps one of targets: a
// component that finds at run time that its configuration cannot work.
func ConfigIf(err error, targets ...error) error {
	for _, t := range targets {
		if errors.Is(err, t) {
			return &ConfigError{Err: err}
		}
	}
	return err
}

// ExitCode maps run's error to the process exit code.
func ExitCode(err error) int {
	var ce *ConfigError
	switch {
	case err == nil, errors.Is(err, context.Canceled), errors.Is(err, ErrCheckedOnly):
		return 0
	case errors.As(err, &ce), errors.Is(err, flag.ErrHelp):
		return 2
	default:
		return 1
	}
}

// Config is a daemon's configuration as Load handles it: a pointer to the
// struct the file decodes into, which validates itself.
type Config interface {
	Validate() error
}

// Flags is a daemon's command line: the flags every daemon takes and the
// overrides the daemon adds. An override flag that is given replaces the
// value it names after the config file is read, whatever the file says.
type Flags struct {
	Config      string // --config FILE
	CheckConfig bool   // --check-config

	fs      *flag.FlagSet
	applies map[string]func() // by flag name: set the value the flag overrides
	output  io.Writer         // the usage after a mistake
}

// New defines the flags every daemon takes on a new flag set named name,
// writing the usage after a mistake to output: --config, --check-config,
// and the overrides of base (--log-level, --log-format, --admin-listen,
// --etcd-endpoints). --help prints the usage to Load's stdout.
func New(name string, output io.Writer, base *config.Base) *Flags {
	f := &Flags{fs: flag.NewFlagSet(name, flag.ContinueOnError), applies: map[string]func(){}, output: output}
	f.fs.SetOutput(io.Discard) // Load prints the usage, where it belongs
	f.fs.Usage = func() {}
	f.fs.StringVar(&f.Config, "config", "", "configuration `file` (YAML); without it, the defaults and the flags")
	f.fs.BoolVar(&f.CheckConfig, "check-config", false, "validate the configuration, print every problem, and exit (2 when invalid)")
	f.String("log-level", "override log.level: debug, info, warn or error", &base.Log.Level)
	f.String("log-format", "override log.format: text or json", &base.Log.Format)
	f.String("admin-listen", "override admin.listen, the `host:port` of /metrics, /healthz and /readyz", &base.Admin.Listen)
	f.List("etcd-endpoints", "override etcd.endpoints: comma-separated client `URLs`", &base.Etcd.Endpoints)
	return f
}

// CommonFlags are the flags New defines, which every daemon takes.
func CommonFlags() []string {
	return []string{"config", "check-config", "log-level", "log-format", "admin-listen", "etcd-endpoints"}
}

// Scheduler defines the flags both schedulers add: --instance-id (an
// override) and --cleanup, whose value it returns (an action the main
// takes once the configuration is valid).
func (f *Flags) Scheduler(c *config.Common) (cleanup *bool) {
	f.String("instance-id", "override instance_id, the `name` this instance registers under", &c.InstanceID)
	return f.fs.Bool("cleanup", false, "remove the Anycast interface a crashed run left behind (anycast.interface), and exit")
}

// Center is the central scheduler's command line over cfg: the common
// flags, the schedulers' and --grpc-listen.
func Center(cfg *config.Center, output io.Writer) (f *Flags, cleanup *bool) {
	f = New("central-scheduler", output, &cfg.Base)
	cleanup = f.Scheduler(&cfg.Common)
	f.String("grpc-listen", "override grpc.listen, the admin gRPC API's `host:port` (schedctl --server)", &cfg.GRPC.Listen)
	return f, cleanup
}

// Regional is a regional scheduler's command line over cfg: the common
// flags, the schedulers' and --region.
func Regional(cfg *config.Regional, output io.Writer) (f *Flags, cleanup *bool) {
	f = New("regional-scheduler", output, &cfg.Base)
	cleanup = f.Scheduler(&cfg.Common)
	f.String("region", "override region, the `name` of the city this scheduler answers for", &cfg.Region)
	return f, cleanup
}

// Checker is the health checker's command line over cfg: the common
// flags, --region, --checker-id, --interval and --timeout.
func Checker(cfg *config.Checker, output io.Writer) *Flags {
	f := New("healthcheck", output, &cfg.Base)
	f.String("region", "override region, the `name` of the city whose servers it probes", &cfg.Region)
	f.String("checker-id", "override checker_id, the `name` its verdicts are published under", &cfg.CheckerID)
	f.Duration("interval", "override interval between probes of a server (at least timeout)", &cfg.Interval)
	f.Duration("timeout", "override timeout of one probe (at most interval)", &cfg.Timeout)
	return f
}

// VisitAll calls fn for each flag, in lexical order.
func (f *Flags) VisitAll(fn func(*flag.Flag)) { f.fs.VisitAll(fn) }

// usage prints how to call the daemon and every flag.
func (f *Flags) usage(w io.Writer) {
	fmt.Fprintf(w, "usage: %s [--config FILE] [--check-config] [flags]\n\n", f.fs.Name())
	fmt.Fprintln(w, "The configuration is the defaults, then the --config file, then the flags given;")
	fmt.Fprintln(w, "an override flag replaces the config key it names (docs/operations.md, Configuration).")
	fmt.Fprintln(w)
	f.fs.SetOutput(w)
	f.fs.PrintDefaults()
	f.fs.SetOutput(io.Discard)
}

// String defines an override of *dst.
func (f *Flags) String(name, usage string, dst *string) {
	v := f.fs.String(name, "", usage)
	f.applies[name] = func() { *dst = *v }
}

// List defines an override of *dst given as comma-separated values (empty
// ones dropped).
func (f *Flags) List(name, usage string, dst *[]string) {
	v := f.fs.String(name, "", usage)
	f.applies[name] = func() {
		*dst = nil
		for e := range strings.SplitSeq(*v, ",") {
			if e = strings.TrimSpace(e); e != "" {
				*dst = append(*dst, e)
			}
		}
	}
}

// Duration defines an override of *dst.
func (f *Flags) Duration(name, usage string, dst *time.Duration) {
	v := f.fs.Duration(name, 0, usage)
	f.applies[name] = func() { *dst = *v }
}

// Load parses args, decodes the --config file over the defaults already in
// cfg, applies the override flags that were given, and validates cfg. Every
// failure is a ConfigError: a bad flag, a stray argument, an unreadable or
// undecodable file (unknown keys included), and every validation problem,
// each with its key path. With --check-config a valid configuration is
// reported on stdout and Load returns ErrCheckedOnly. --help (or -h)
// prints the usage on stdout and returns ErrCheckedOnly: help asked for is
// no mistake.
func (f *Flags) Load(args []string, cfg Config, stdout io.Writer) error {
	if err := f.fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			f.usage(stdout)
			return ErrCheckedOnly
		}
		f.usage(f.output)
		return &ConfigError{err}
	}
	if f.fs.NArg() > 0 {
		return &ConfigError{fmt.Errorf("unexpected arguments: %s", strings.Join(f.fs.Args(), " "))}
	}
	// Decoding and value problems are reported together: the file's
	// values that decode are validated even when others do not.
	var decodeErr error
	if f.Config != "" {
		decodeErr = config.LoadFile(f.Config, cfg)
		if _, ok := yamlstrict.AsErrors(decodeErr); decodeErr != nil && !ok {
			return &ConfigError{decodeErr} // unreadable
		}
	}
	f.fs.Visit(func(fl *flag.Flag) {
		if apply, ok := f.applies[fl.Name]; ok {
			apply()
		}
	})
	if err := config.Problems(f.Config, decodeErr, cfg.Validate()); err != nil {
		return &ConfigError{err}
	}
	if f.CheckConfig {
		fmt.Fprintln(stdout, "configuration OK")
		return ErrCheckedOnly
	}
	return nil
}

// ErrCheckedOnly ends a run early and successfully: after --check-config,
// --help, or an action such as --cleanup.
var ErrCheckedOnly = errors.New("configuration checked")

// SignalContext is cancelled by SIGINT or SIGTERM; SIGHUP is ignored until
// Hangups handles it. After the first signal the default handling is
// restored, so a second signal kills the process at once.
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	signal.Ignore(syscall.SIGHUP) // see Hangups
	ctx, stop := signal.NotifyContext(parent, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-ctx.Done()
		stop()
	}()
	return ctx, stop
}

// Reload is one thing a daemon reloads on SIGHUP (logrotate's postrotate,
// a renewed certificate).
type Reload struct {
	What string // for the log: "access log", "https certificates"
	Do   func() error
}

// Hangups calls every reload on each SIGHUP until ctx ends; each failure is
// logged here and the others still run. SignalContext ignores SIGHUP
// before this starts, and it is ignored again when this returns, so a
// hangup never ends a daemon (Go's default). signal.Ignore undoes every
// signal.Notify of the process: where several daemons share one (tests),
// SIGHUP reaches them only while all of them run.
func Hangups(log *slog.Logger, reloads ...Reload) func(context.Context) error {
	return func(ctx context.Context) error {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, syscall.SIGHUP)
		defer signal.Ignore(syscall.SIGHUP)
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-ch:
				for _, r := range reloads {
					if err := r.Do(); err != nil {
						log.Error("reload on SIGHUP failed", "what", r.What, "err", err)
						continue
					}
					log.Info("reloaded on SIGHUP", "what", r.What)
				}
			}
		}
	}
}

// Main runs run and exits with its code, printing an error once, prefixed
// with the daemon's name.
func Main(name string, run func(ctx context.Context, args []string, stdout, stderr io.Writer) error) {
	ctx, stop := SignalContext(context.Background())
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	code := ExitCode(err)
	if code != 0 && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
	}
	os.Exit(code)
}

// Cleanup is a scheduler's --cleanup: it removes the Anycast interface and
// the service address on lo that a crashed run left behind, says so, and
// returns ErrCheckedOnly to end the run.
func Cleanup(iface string, stdout io.Writer) error {
	if err := netconfig.Cleanup(iface); err != nil {
		return err
	}
	if err := netconfig.CleanupLocal(); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "removed %s (if it existed)\n", iface)
	return ErrCheckedOnly
}
