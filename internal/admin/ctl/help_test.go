package ctl

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"io"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/anysched/anysched/proto/anysched/v1"
)

// helpEnv is a test env whose dial fails the test: help never dials.
func helpEnv(t *testing.T, out, errOut io.Writer) *env {
	e := testEnv(&fakeAdmin{}, out, errOut)
	e.dial = func(g globals) (pb.AdminClient, io.Closer, error) {
		t.Errorf("dialed %s for help", g.server)
		return nil, nil, errors.New("no dial for help")
	}
	return e
}

// schedctl --help, -h and help print the usage to stdout and succeed:
// every command, the help command, and the global flags with
// ANYSCHED_SERVER.
func TestRootHelp(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}, {"--server", "x:1", "help"}} {
		var out, errOut bytes.Buffer
		if err := run(context.Background(), args, helpEnv(t, &out, &errOut)); err != nil {
			t.Errorf("%v: %v", args, err)
		}
		if errOut.Len() != 0 {
			t.Errorf("%v: stderr %q", args, errOut.String())
		}
		want := []string{"Usage:\n", "schedctl help [COMMAND]", "$ANYSCHED_SERVER", "-server address", "-tls-ca string", "-timeout duration"}
		for _, c := range commands() {
			want = append(want, c.synopsisLines()...)
		}
		for _, w := range want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: stdout lacks %q:\n%s", args, w, out.String())
			}
		}
	}
	// Still mistakes, on stderr: no command, an unknown one, help for an unknown one.
	for _, args := range [][]string{nil, {"frob"}, {"help", "frob"}} {
		var out, errOut bytes.Buffer
		err := run(context.Background(), args, helpEnv(t, &out, &errOut))
		if !errors.Is(err, ErrUsage) || out.Len() != 0 || !strings.Contains(errOut.String(), "Usage:") {
			t.Errorf("%v: error %v, stdout %q; want a usage error and the usage on stderr", args, err, out.String())
		}
	}
}

// Every command of the table answers COMMAND --help, COMMAND -h and
// schedctl help COMMAND: success, on stdout, without dialing, listing
// every flag its flag sets define with its usage, and no NaN default. A
// help flag after other arguments or flags still asks for help.
func TestEveryCommandHelp(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "ca.pem") // the real dial fails on it
	for _, c := range commands() {
		for _, args := range [][]string{
			{c.name, "--help"},
			{c.name, "-h"},
			{"help", c.name},
			{"--server", "127.0.0.1:1", "--tls-ca", missing, "--timeout", "1ms", c.name, "x", "--bogus", "--help"},
		} {
			t.Run(strings.Join(args, " "), func(t *testing.T) {
				var out, errOut bytes.Buffer
				e := helpEnv(t, &out, &errOut)
				if err := run(context.Background(), args, e); err != nil {
					t.Fatalf("error %v; stderr %s", err, errOut.String())
				}
				text := out.String()
				if errOut.Len() != 0 {
					t.Errorf("stderr %q", errOut.String())
				}
				if !strings.HasPrefix(text, "usage: "+c.synopsisLines()[0]+"\n") {
					t.Errorf("does not start with the synopsis:\n%s", text)
				}
				if len(e.helpShown) == 0 {
					t.Fatalf("no flag set shown:\n%s", text)
				}
				for _, fs := range e.helpShown {
					fs.VisitAll(func(f *flag.Flag) {
						_, usage := flag.UnquoteUsage(f)
						if !strings.Contains(text, "  -"+f.Name+" ") && !strings.Contains(text, "  -"+f.Name+"\n") || !strings.Contains(text, usage) {
							t.Errorf("flag -%s of %q or its usage %q missing:\n%s", f.Name, fs.Name(), usage, text)
						}
					})
				}
				if strings.Contains(text, "NaN") {
					t.Errorf("a NaN default:\n%s", text)
				}
				if !c.offline && !strings.Contains(text, "-server address") {
					t.Errorf("global flags missing:\n%s", text)
				}
			})
		}
	}
}

// Every flag a command defines is in its synopsis, the line the usage
// lists: what was once missing (drain's --reason, status's -o yaml)
// cannot go missing again.
func TestSynopsisListsEveryFlag(t *testing.T) {
	for _, c := range commands() {
		e := helpEnv(t, io.Discard, io.Discard)
		if err := run(context.Background(), []string{"help", c.name}, e); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		syn := strings.Join(c.synopsisLines(), "\n")
		for _, fs := range e.helpShown {
			fs.VisitAll(func(f *flag.Flag) {
				if !strings.Contains(syn, "-"+f.Name) {
					t.Errorf("%s: synopsis lacks -%s (of %q):\n%s", c.name, f.Name, fs.Name(), syn)
				}
			})
			if o := fs.Lookup("o"); o != nil {
				for _, format := range o.Value.(*output).formats {
					if !strings.Contains(syn, format) {
						t.Errorf("%s: synopsis lacks -o %s:\n%s", c.name, format, syn)
					}
				}
			}
		}
	}
}

// Drain's help names --reason, status's lists
// -o yaml, token's shows no NaN, drill and pki show each subcommand.
func TestHelpContents(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want []string
	}{
		{[]string{"drain", "--help"}, []string{"  -reason string\n"}},
		{[]string{"status", "--help"}, []string{"output format: table, yaml or json (default table)"}},
		{[]string{"token", "--help"}, []string{"  -desired-kbps kbps\n    \tdesired bitrate in kbps (unset: the scheduler's default profile)\n  -gift N\n"}},
		{[]string{"drill", "--help"}, []string{"drill failover:\n", "-i-know-this-is-production", "drill etcd-loss:\n", "-members uint"}},
		{[]string{"help", "drill", "etcd-loss"}, []string{"-leader"}},
		{[]string{"pki", "-h"}, []string{"pki ca:\n", "pki issue:\n", "-ca-dir string"}},
	} {
		var out bytes.Buffer
		if err := run(context.Background(), tc.args, helpEnv(t, &out, io.Discard)); err != nil {
			t.Errorf("%v: %v", tc.args, err)
		}
		for _, w := range tc.want {
			if !strings.Contains(out.String(), w) {
				t.Errorf("%v: lacks %q:\n%s", tc.args, w, out.String())
			}
		}
	}
	// help etcd-loss alone shows that subcommand only.
	var out bytes.Buffer
	_ = run(context.Background(), []string{"drill", "etcd-loss", "--help"}, helpEnv(t, &out, io.Discard))
	if strings.Contains(out.String(), "drill failover:") || strings.Contains(out.String(), "\n  -no-watch\n") || !strings.Contains(out.String(), "-leader") {
		t.Errorf("drill etcd-loss --help shows failover's flags:\n%s", out.String())
	}
}

// token's optional numbers: unset they stay NaN (left out of the token),
// given they must be finite numbers.
func TestOptionalFloat(t *testing.T) {
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	v := optFloat(fs, "n", "a number")
	if err := fs.Parse(nil); err != nil || *v == *v {
		t.Fatalf("unset: %v, %v", *v, err)
	}
	if err := fs.Parse([]string{"-n", "2500"}); err != nil || *v != 2500 {
		t.Fatalf("-n 2500: %v, %v", *v, err)
	}
	for _, bad := range []string{"NaN", "Inf", "fast"} {
		if err := fs.Parse([]string{"-n", bad}); err == nil {
			t.Errorf("-n %s accepted", bad)
		}
	}
}
