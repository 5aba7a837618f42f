// Package ctl is schedctl, the operator CLI: it talks to the central
// scheduler's admin gRPC API. It lives here, not in package main, so tests run
// it in-process against real daemons.
//
// This file is the root: global flags, the command table, usage, dialing and
// how errors are rendered. Each command is in its own file (apply.go, get.go,
// ...), and print.go holds the table, JSON and YAML printers they share.
package ctl

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/anysched/anysched/internal/security/tlsutil"
	"github.com/anysched/anysched/internal/wiring/config"
	pb "github.com/anysched/anysched/proto/anysched/v1"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
)

// command is one schedctl command.
type command struct {
	name string
	// synopsis is its line(s) in the usage, after "schedctl [global flags] ".
	synopsis []string
	// offline commands run without the admin API (the global flags are
	// parsed, and ignored).
	offline bool
	// timeout replaces the 60 s default of --timeout when that is not given.
	timeout time.Duration
	run     func(ctx context.Context, e *env, args []string) error
}

// commands is the command table, in the order the usage lists them.
func commands() []command {
	return []command{
		{name: "apply", synopsis: []string{"apply -f FILE [--yes] [--dry-run] [--force] [--base-revision N] [-o table|json]"}, run: applyCmd},
		{name: "history", synopsis: []string{"history [--limit N] [-o table|json|yaml]"}, run: historyCmd},
		{name: "diff", synopsis: []string{"diff REV [REV] | diff -f FILE   [-o table|json|yaml]   (REV alone: against the current revision)"}, run: diffCmd},
		{name: "rollback", synopsis: []string{"rollback REV [--yes] [--dry-run] [--force] [-o table|json]"}, run: rollbackCmd},
		{name: "backup", synopsis: []string{"backup --out FILE [-o table|json]   (topology and history, drains, balance, key ids, roles; no secret; admin)"}, run: backupCmd},
		{name: "restore", synopsis: []string{"restore -f FILE [--force [--yes]] [-o table|json]   (into an empty store, checked whole first; admin)"}, run: restoreCmd},
		{name: "get", synopsis: []string{"get topology|regions|nodes|servers|zones|services [-o table|yaml|json]"}, run: getCmd},
		{name: "zones", synopsis: []string{
			"zones import --csv FILE | --czf FILE [--region-map FILE | --region-from-name] [-f TOPOLOGY] [--replace | --merge | --move] [--zones-only] [--out FILE]",
			"zones export --csv | --czf [-f TOPOLOGY] [--out FILE]   (with -f, neither needs the admin API)",
		}, run: zonesCmd},
		{name: "status", synopsis: []string{"status [-o table|yaml|json]"}, run: statusCmd},
		{name: "explain", synopsis: []string{"explain --client-ip IP --host HOST [--path PATH] [--region R] [-o table|json]"}, run: explainCmd},
		{name: "balance", synopsis: []string{
			"balance get [-o table|yaml|json]   (the in-node balance policy: stored document, effective policy, reweighed servers)",
			"balance set -f FILE [--dry-run] [--yes] [--force] [-o table|json]",
			"balance reset [--dry-run] [--yes] [-o table|json]   (no document: the defaults)",
		}, run: balanceCmd},
		{name: "drain", synopsis: []string{"drain server|node|region NAME [--reason TEXT] [--from TIME] [--until TIME] [--dry-run] [--force]   (TIME: RFC 3339, now, +2h, 22:00)"}, run: drainCmd},
		{name: "drains", synopsis: []string{"drains [-o table|yaml|json]   (each drain's window and whether it is pending, active or ended)"}, run: drainsCmd},
		{name: "undrain", synopsis: []string{"undrain server|node|region NAME"}, run: undrainCmd},
		{name: "drill", synopsis: []string{
			"drill failover --region R --duration D [--i-know-this-is-production] [--no-watch]",
			"drill etcd-loss --duration D [--members N] [--leader]   (lab only; N of the lab's etcd members, default all; --leader: the leader first)",
		}, timeout: drillTimeout, run: drillCmd},
		{name: "maintenance", synopsis: []string{
			"maintenance REGION --until TIME [--from TIME] [--reason TEXT] [--dry-run] [--force]   (the region drained and its route withdrawn in the window; admin)",
			"maintenance list [-o table|yaml|json]",
			"maintenance cancel REGION",
		}, run: maintenanceCmd},
		{name: "rollout", synopsis: []string{
			"rollout CITY [--ready-timeout D] [--local-timeout D] [--settle D] [-o table|json]   (its scheduler started: in the topology, ready and announcing, its STBs no longer answered by the center)",
			"rollout CITY --undo [--withdraw-timeout D] [--takeover-timeout D] [--window D] [-o table|json]   (its schedulers stopped: withdrawn, the center answers its STBs, none failed)",
		}, timeout: rolloutTimeout, run: rolloutCmd},
		{name: "plan", synopsis: []string{"plan failures [--region R]... [--budget D] [-o table|json|yaml]   (the loss of each city: can its fallback cities take its viewers, at what bitrates; a proposed order and reserves)"}, timeout: planFailuresTimeout, run: planCmd},
		{name: "audit", synopsis: []string{"audit [--limit N] [--since DURATION] [-o table|json|yaml]"}, run: auditCmd},
		{name: "whoami", synopsis: []string{"whoami [-o table|json|yaml]"}, run: whoamiCmd},
		{name: "etcd-roles", synopsis: []string{"etcd-roles --endpoints URL[,URL] [--cacert F] --cert F --key F [--prefix /anysched/] --identity NAME ... [--prune] [--center-maintenance=false] [--dry-run]   (an external etcd; root certificate)"}, offline: true, run: etcdRolesCmd},
		{name: "token", synopsis: []string{"token --key-id ID --secret-file FILE --sub VIEWER [--ttl D] [--issuer ISS] [--audience AUD] [--network CIDR] [--desired-kbps N] [--danmaku-per-hour N] [--gift N]"}, offline: true, run: tokenCmd},
		{name: "pki", synopsis: []string{
			"pki ca --dir DIR [--cn NAME] [--validity D]",
			"pki issue --ca-dir DIR --cn NAME [--role viewer|operator|admin] [--server --hosts H,...] [--client] [--out DIR] [--name FILE]",
		}, offline: true, run: pkiCmd},
		{name: "keygen", synopsis: []string{"keygen --signing FILE   (topology signing key pair: FILE and FILE.pub)"}, offline: true, run: keygenCmd},
		{name: "version", synopsis: []string{"version"}, offline: true, run: versionCmd},
	}
}

// drillTimeout bounds a drill command when --timeout is not given: a drill
// is bounded by its own --duration and followed to the end, and the 60 s
// default would cut long drills short.
const drillTimeout = time.Hour

// synopsisLines is how a command is listed in the usage.
func (c command) synopsisLines() []string {
	prefix := "schedctl [global flags] "
	if c.offline {
		prefix = "schedctl "
	}
	lines := make([]string, len(c.synopsis))
	for i, s := range c.synopsis {
		lines[i] = prefix + s
	}
	return lines
}

// usage is the text `schedctl` alone prints, before the global flags.
func usage() string {
	var b strings.Builder
	b.WriteString("schedctl: operate an anysched province through the central scheduler.\n\nUsage:\n")
	for _, c := range commands() {
		for _, l := range c.synopsisLines() {
			b.WriteString("  " + l + "\n")
		}
	}
	b.WriteString("  schedctl help [COMMAND]   (or: schedctl COMMAND --help)\n")
	b.WriteString("\nGlobal flags, before the command (--server defaults to $" + serverEnv + ", then " + defaultServer + "):\n")
	return b.String()
}

// serverEnv names the environment variable that replaces --server's
// default, so a shell set up for one province needs no --server on every
// command.
const serverEnv = "ANYSCHED_SERVER"

// defaultServer is the center's default grpc.listen.
const defaultServer = "127.0.0.1:9090"

// globals are the flags before the command: how to reach the admin API.
type globals struct {
	server  string
	tls     config.ClientTLS
	timeout time.Duration
}

// env is one invocation's surroundings. Run builds the real one; tests
// build theirs with a fake admin API and clock.
type env struct {
	stdin       io.Reader
	out, errOut io.Writer
	clock       clock
	// loc is where the operator's local times are (--from 22:00); nil:
	// time.Local.
	loc    *time.Location
	getenv func(string) string
	// isTerminal: standard input is a terminal an operator answers on
	// (apply and rollback confirm there); nil: not one.
	isTerminal func() bool
	// dial connects to the admin API the global flags name.
	dial func(globals) (pb.AdminClient, io.Closer, error)

	cmd   command        // the command running
	admin pb.AdminClient // set once dialed, for commands that are not offline

	// help: the command was asked for its help (-h or --help among its
	// arguments, or schedctl help COMMAND). Nothing is dialed; the
	// command's flag parsing prints its help to out instead of parsing,
	// and ends the command with errHelp.
	help bool
	// helpShown is every flag set whose help was printed, in order (a
	// command with subcommands shows each one's).
	helpShown []*flag.FlagSet
}

// Run executes one schedctl command. Its errors read "schedctl COMMAND:
// what was wrong"; errors.Is(err, ErrUsage) for command-line mistakes.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	return run(ctx, args, &env{stdin: os.Stdin, out: stdout, errOut: stderr, clock: wallClock{}, getenv: os.Getenv, dial: dial, isTerminal: stdinIsTerminal})
}

func run(ctx context.Context, args []string, e *env) error {
	fs := flag.NewFlagSet("schedctl", flag.ContinueOnError)
	var g globals
	def := e.getenv(serverEnv)
	if def == "" {
		def = defaultServer
	}
	fs.StringVar(&g.server, "server", def, "central scheduler admin gRPC `address` (host:port; default from $"+serverEnv+")")
	fs.StringVar(&g.tls.CAFile, "tls-ca", "", "CA certificate that signed the server's certificate (enables TLS)")
	fs.StringVar(&g.tls.CertFile, "tls-cert", "", "client certificate for mutual TLS")
	fs.StringVar(&g.tls.KeyFile, "tls-key", "", "client key for mutual TLS")
	fs.StringVar(&g.tls.ServerName, "tls-server-name", "", "server name to verify, if not the host of --server")
	fs.DurationVar(&g.timeout, "timeout", 60*time.Second, "deadline for the whole command")
	printUsage := func(w io.Writer) {
		fmt.Fprint(w, usage())
		fs.SetOutput(w)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args, printUsage, e.out, e.errOut); err != nil {
		return wrap("", helpDone(err))
	}
	if fs.NArg() == 0 {
		printUsage(e.errOut)
		return ErrUsage
	}
	name, rest := fs.Arg(0), fs.Args()[1:]
	if name == "help" { // schedctl help [COMMAND [SUBCOMMAND]]
		if len(rest) == 0 {
			printUsage(e.out)
			return nil
		}
		name, rest, e.help = rest[0], rest[1:], true
	}
	i := slices.IndexFunc(commands(), func(c command) bool { return c.name == name })
	if i < 0 {
		printUsage(e.errOut)
		return wrap("", usagef("unknown command %q", name))
	}
	e.cmd = commands()[i]
	if e.help = e.help || asksHelp(rest); e.help {
		err := e.cmd.run(ctx, e, rest)
		if errors.Is(err, errHelp) && !e.cmd.offline {
			fmt.Fprintf(e.out, "\nGlobal flags, before the command (--server defaults to $%s, then %s):\n", serverEnv, defaultServer)
			fs.SetOutput(e.out)
			fs.PrintDefaults()
		}
		return wrap(name, helpDone(err))
	}
	if e.cmd.offline {
		return wrap(name, e.cmd.run(ctx, e, rest))
	}
	timeout := g.timeout
	if e.cmd.timeout != 0 && !flagSet(fs, "timeout") {
		timeout = e.cmd.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	admin, conn, err := e.dial(g)
	if err != nil {
		return wrap("", err)
	}
	defer conn.Close()
	e.admin = admin
	return wrap(name, e.cmd.run(ctx, e, rest))
}

// asksHelp reports whether a command's arguments ask for its help: -h,
// -help or --help anywhere before a "--". A flag value that is one of
// those words is given as --flag=--help.
func asksHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--h", "--help":
			return true
		}
	}
	return false
}

// errHelp ends a command whose help was printed; Run returns nil for it.
var errHelp = errors.New("help shown")

// helpDone turns errHelp into success: help that was asked for is no
// mistake.
func helpDone(err error) error {
	if errors.Is(err, errHelp) {
		return nil
	}
	return err
}

// helpEach shows the help of each of a command's subcommands, for
// COMMAND --help without one: run is the command, subs its subcommands.
func (e *env) helpEach(ctx context.Context, run func(context.Context, *env, []string) error, subs ...string) error {
	for _, s := range subs {
		if err := run(ctx, e, []string{s}); !errors.Is(err, errHelp) {
			return err
		}
	}
	return errHelp
}

// subcommand is one of a command's subcommands.
type subcommand struct {
	name string
	run  func(ctx context.Context, e *env, args []string) error
}

// dispatch runs the subcommand args[0] names, with the arguments after
// it; without one, def with all of args (nil: the usage error usage).
// COMMAND --help shows every subcommand's help, def's first.
func (e *env) dispatch(ctx context.Context, args []string, subs []subcommand, def func(context.Context, *env, []string) error, usage string) error {
	if len(args) > 0 {
		for _, s := range subs {
			if s.name == args[0] {
				return s.run(ctx, e, args[1:])
			}
		}
	}
	if e.help {
		runs := []func(context.Context, *env, []string) error{}
		if def != nil {
			runs = append(runs, def)
		}
		for _, s := range subs {
			runs = append(runs, s.run)
		}
		for _, run := range runs {
			if err := run(ctx, e, nil); !errors.Is(err, errHelp) {
				return err
			}
		}
		return errHelp
	}
	if def == nil {
		return usagef("%s", usage)
	}
	return def(ctx, e, args)
}

// stdinIsTerminal reports whether standard input is a character device.
func stdinIsTerminal() bool {
	fi, err := os.Stdin.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// flagSet reports whether the named flag was given on the command line.
func flagSet(fs *flag.FlagSet, name string) bool {
	set := false
	fs.Visit(func(f *flag.Flag) { set = set || f.Name == name })
	return set
}

// dial connects to the admin API: TLS when any --tls-* flag is given, and
// the server's message size limit both ways (a province's topology is
// larger than gRPC's 4 MiB default).
func dial(g globals) (pb.AdminClient, io.Closer, error) {
	creds := insecure.NewCredentials()
	if g.tls.Enabled() {
		tc, err := tlsutil.Client(g.tls)
		if err != nil {
			return nil, nil, fmt.Errorf("TLS: %w", err)
		}
		creds = credentials.NewTLS(tc)
	}
	conn, err := grpc.NewClient(g.server,
		grpc.WithTransportCredentials(creds),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(pb.MaxMessageBytes), grpc.MaxCallSendMsgSize(pb.MaxMessageBytes)),
	)
	if err != nil {
		return nil, nil, fmt.Errorf("--server %s: %w", g.server, err)
	}
	return pb.NewAdminClient(conn), conn, nil
}

// parseFlags parses args into fs, which prints nothing itself. Asked for
// help (-h, --help), it prints the usage to out and returns errHelp; on a
// mistake it prints the usage to errOut and returns the mistake as a usage
// error.
func parseFlags(fs *flag.FlagSet, args []string, printUsage func(io.Writer), out, errOut io.Writer) error {
	fs.SetOutput(io.Discard)
	err := fs.Parse(args)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, flag.ErrHelp):
		printUsage(out)
		return errHelp
	default:
		printUsage(errOut)
		return usagef("%v", err)
	}
}

// parse parses a command's flags; it takes no arguments after them (a
// stray word is a mistake, such as an unquoted --reason, not something to
// drop silently).
func (e *env) parse(fs *flag.FlagSet, args []string) error {
	err := e.parseLeading(fs, args)
	if err == nil && fs.NArg() > 0 {
		err = usagef("unexpected argument %q", fs.Arg(0))
	}
	return err
}

// parseLeading parses a command's flags up to the first argument that is
// not one, and leaves the rest in fs.Args(). When the command was asked
// for its help it shows fs's help instead, whatever the arguments, and
// returns errHelp: the command ends there, before it uses the admin API,
// which is not dialed for help.
func (e *env) parseLeading(fs *flag.FlagSet, args []string) error {
	if e.help {
		e.commandUsage(fs, e.out)
		return errHelp
	}
	return parseFlags(fs, args, func(w io.Writer) { e.commandUsage(fs, w) }, e.out, e.errOut)
}

// commandUsage prints the running command's synopsis (once) and every
// flag of fs with its usage, under fs's name when it is a subcommand's.
func (e *env) commandUsage(fs *flag.FlagSet, w io.Writer) {
	if len(e.helpShown) == 0 {
		for i, l := range e.cmd.synopsisLines() {
			if i == 0 {
				fmt.Fprintln(w, "usage: "+l)
			} else {
				fmt.Fprintln(w, "       "+l)
			}
		}
	}
	e.helpShown = append(e.helpShown, fs)
	if fs.Name() != e.cmd.name && hasFlags(fs) {
		fmt.Fprintln(w, fs.Name()+":")
	}
	fs.SetOutput(w)
	fs.PrintDefaults()
}

// hasFlags reports whether fs defines any flag.
func hasFlags(fs *flag.FlagSet) bool {
	n := 0
	fs.VisitAll(func(*flag.Flag) { n++ })
	return n > 0
}

// optionalFloat is a number flag that may be left unset (NaN: the token
// leaves the field out); its help shows no default rather than "NaN".
type optionalFloat struct{ v *float64 }

// optFloat defines an optionalFloat on fs, unset (NaN) until given.
func optFloat(fs *flag.FlagSet, name, usage string) *float64 {
	v := math.NaN()
	fs.Var(optionalFloat{&v}, name, usage)
	return &v
}

func (f optionalFloat) String() string {
	if f.v == nil || math.IsNaN(*f.v) {
		return "" // as the zero value: the help prints no default
	}
	return strconv.FormatFloat(*f.v, 'g', -1, 64)
}

func (f optionalFloat) Set(s string) error {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(v) || math.IsInf(v, 0) {
		return errors.New("parse error") // as the flag package says it for its numbers
	}
	*f.v = v
	return nil
}

// ErrUsage marks a command-line mistake (exit code 2).
var ErrUsage = errors.New("usage error")

// usageError is a command-line mistake, said in the words of the command
// line ("missing --host"); errors.Is(err, ErrUsage) holds for it.
type usageError string

func (e usageError) Error() string      { return string(e) }
func (usageError) Is(target error) bool { return target == ErrUsage }

func usagef(format string, args ...any) error { return usageError(fmt.Sprintf(format, args...)) }

// need is a usage error naming every required flag left empty, given as
// name, value pairs; nil when all are set.
func need(pairs ...string) error {
	var missing []string
	for i := 0; i+1 < len(pairs); i += 2 {
		if pairs[i+1] == "" {
			missing = append(missing, pairs[i])
		}
	}
	if len(missing) == 0 {
		return nil
	}
	return usagef("missing %s", list(missing, "and"))
}

// wrap gives every error of Run one form, "schedctl COMMAND: what was
// wrong", and renders admin API errors. The bare ErrUsage passes as is: the
// usage was printed, there is nothing to add.
func wrap(name string, err error) error {
	if err == nil || err == ErrUsage {
		return err
	}
	if st, ok := status.FromError(err); ok {
		err = apiError{st}
	}
	if name == "" {
		return fmt.Errorf("schedctl: %w", err)
	}
	return fmt.Errorf("schedctl %s: %w", name, err)
}

// apiError is an admin API error as an operator reads it: the message,
// then every field violation on its own line (a rejected topology names
// each problem). It keeps the status, so status.Code still works on it.
type apiError struct{ st *status.Status }

func (e apiError) GRPCStatus() *status.Status { return e.st }

func (e apiError) Error() string {
	var b strings.Builder
	switch e.st.Code() { // said first: the message alone reads like a fault
	case codes.PermissionDenied:
		b.WriteString("permission denied: ")
	case codes.Unauthenticated:
		b.WriteString("not authenticated: ")
	}
	b.WriteString(e.st.Message())
	for _, d := range e.st.Details() {
		br, ok := d.(*errdetails.BadRequest)
		if !ok {
			continue
		}
		for _, v := range br.GetFieldViolations() {
			if v.GetField() == "" {
				fmt.Fprintf(&b, "\n  %s", v.GetDescription())
			} else {
				fmt.Fprintf(&b, "\n  %s: %s", v.GetField(), v.GetDescription())
			}
		}
	}
	if e.st.Code() == codes.Unavailable {
		b.WriteString("\n(is the central scheduler running and reachable? see --server)")
	}
	if e.st.Code() == codes.Unauthenticated {
		b.WriteString("\n(the admin API wants a client certificate: --tls-ca, --tls-cert, --tls-key)")
	}
	return b.String()
}
