package main

import (
	"bytes"
	"errors"
	"flag"
	"strings"
	"testing"
)

// TestHelp: lab --help (and help, -h) lists every command and succeeds;
// each command's --help lists its flags and succeeds; no command or an
// unknown one is a usage error (exit 2), which names what was wrong.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "help"} {
		var out bytes.Buffer
		if err := run([]string{arg}, &out); err != nil {
			t.Fatalf("lab %s: %v", arg, err)
		}
		for _, c := range []string{"demo", "up", "load", "status", "chaos", "down", "etcd-member", "edge"} {
			if !strings.Contains(out.String(), "\n  "+c+" ") {
				t.Errorf("lab %s does not list %s:\n%s", arg, c, out.String())
			}
		}
	}
	for _, c := range commands {
		if c.name == "help" {
			continue
		}
		var out bytes.Buffer
		if err := run([]string{c.name, "--help"}, &out); !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "-cities") {
			t.Errorf("lab %s --help: %v\n%s", c.name, err, out.String())
		}
	}
	for _, args := range [][]string{nil, {"bogus"}, {"--cities", "2"}} {
		err := run(args, &bytes.Buffer{})
		if !errors.Is(err, errUsage) || (len(args) > 0 && !strings.Contains(err.Error(), args[0])) {
			t.Errorf("lab %q: %v, want a usage error naming it", args, err)
		}
	}
}
