package daemon_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/province/health"
	"github.com/anysched/anysched/internal/security/signing"
	"github.com/anysched/anysched/internal/wiring/config"
	"github.com/anysched/anysched/internal/wiring/daemon"
)

func write(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// checker is the healthcheck daemon's command line, as its main builds it.
func checker(args ...string) (config.Checker, string, error) {
	cfg := config.DefaultChecker()
	var out, errb bytes.Buffer
	f := daemon.Checker(&cfg, &errb)
	err := f.Load(args, &cfg, &out)
	return cfg, out.String() + errb.String(), err
}

// regional is the regional scheduler's command line, as its main builds it.
func regional(args ...string) (config.Regional, bool, error) {
	cfg := config.DefaultRegional()
	var out bytes.Buffer
	f, cleanup := daemon.Regional(&cfg, &out)
	err := f.Load(args, &cfg, &out)
	return cfg, *cleanup, err
}

// TestLayers: defaults, then the file, then the flags that were given.
func TestLayers(t *testing.T) {
	// Two endpoints name a cluster: the checker must then know the
	// center's key.
	pub := filepath.Join(t.TempDir(), "signing.pub")
	if _, err := signing.WriteKeyPair(filepath.Join(t.TempDir(), "signing.key"), pub); err != nil {
		t.Fatal(err)
	}
	file := write(t, "region: hefei\nchecker_id: from-file\netcd:\n  endpoints: [http://127.0.0.1:2379]\nlog:\n  level: warn\ninterval: 2s\nsnapshot:\n  trusted_keys: ["+pub+"]\n")
	cfg, _, err := checker("--config", file, "--checker-id", "from-flag", "--etcd-endpoints", "http://127.0.0.1:2379, ,http://127.0.0.2:2379", "--log-format", "json")
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Region != "hefei" || cfg.Log.Level != "warn" || cfg.Interval != 2*time.Second {
		t.Errorf("file values lost: %+v", cfg)
	}
	if cfg.CheckerID != "from-flag" || cfg.Log.Format != "json" || !slices.Equal(cfg.Etcd.Endpoints, []string{"http://127.0.0.1:2379", "http://127.0.0.2:2379"}) {
		t.Errorf("flags not applied over the file: %+v", cfg)
	}
	if cfg.Timeout != health.DefaultCheckerOptions().Timeout || cfg.Admin.Listen != config.DefaultChecker().Admin.Listen {
		t.Errorf("defaults lost: %+v", cfg)
	}
	// An override given empty empties the value (and validation says so).
	if _, _, err := checker("--config", file, "--region", ""); err == nil || !strings.Contains(err.Error(), "region: required") {
		t.Errorf("empty --region: %v", err)
	}

	r, cleanup, err := regional("--config", write(t, "etcd:\n  endpoints: [http://127.0.0.1:2379]\n"), "--region", "wuhu", "--instance-id", "wuhu-9", "--admin-listen", "127.0.0.1:9999", "--cleanup")
	if err != nil {
		t.Fatal(err)
	}
	if r.Region != "wuhu" || r.InstanceID != "wuhu-9" || r.Admin.Listen != "127.0.0.1:9999" || !cleanup {
		t.Errorf("scheduler flags: %+v, cleanup %v", r, cleanup)
	}
}

// TestConfigErrors: every way a command line or file can be wrong exits 2,
// naming what is wrong.
func TestConfigErrors(t *testing.T) {
	good := write(t, "region: hefei\netcd:\n  endpoints: [http://127.0.0.1:2379]\n")
	for _, tt := range []struct {
		name string
		args []string
		want []string
	}{
		{"stray argument", []string{"--config", good, "extra", "--log-level", "debug"}, []string{"unexpected arguments: extra --log-level debug"}},
		{"unknown flag", []string{"--bogus"}, []string{"flag provided but not defined: -bogus"}},
		{"scheduler flag on the checker", []string{"--instance-id", "x"}, []string{"flag provided but not defined: -instance-id"}},
		{"missing file", []string{"--config", filepath.Join(t.TempDir(), "none.yaml")}, []string{"config: open ", "no such file"}},
		{"unknown key", []string{"--config", write(t, "region: hefei\nintervall: 1s\n")}, []string{"config: ", `intervall: unknown field (did you mean "interval"?) (line 2)`}},
		{"invalid", []string{"--config", good, "--log-level", "loud", "--admin-listen", "nowhere"}, []string{"config: invalid:\n", `log.level: "loud" is not one of`, `admin.listen: not host:port: "nowhere"`}},
		{"interval below timeout", []string{"--config", good, "--interval", "200ms"}, []string{"timeout: 250ms must be at most interval 200ms"}},
		{"bad duration", []string{"--interval", "soon"}, []string{`invalid value "soon" for flag -interval`}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, out, err := checker(tt.args...)
			if code := daemon.ExitCode(err); code != 2 {
				t.Fatalf("exit code %d (err %v), want 2", code, err)
			}
			var ce *daemon.ConfigError
			if !errors.As(err, &ce) {
				t.Errorf("%T is not a ConfigError", err)
			}
			text := out + err.Error()
			for _, w := range tt.want {
				if !strings.Contains(text, w) {
					t.Errorf("output lacks %q:\n%s", w, text)
				}
			}
		})
	}
	// --interval with a --timeout that fits is fine: nothing is adjusted behind the operator's back.
	cfg, _, err := checker("--config", good, "--interval", "200ms", "--timeout", "100ms")
	if err != nil || cfg.Interval != 200*time.Millisecond || cfg.Timeout != 100*time.Millisecond {
		t.Errorf("interval and timeout: %+v, %v", cfg.CheckerOptions, err)
	}
}

func TestCheckConfig(t *testing.T) {
	_, out, err := checker("--config", write(t, "region: hefei\netcd:\n  endpoints: [http://127.0.0.1:2379]\n"), "--check-config")
	if !errors.Is(err, daemon.ErrCheckedOnly) || daemon.ExitCode(err) != 0 || !strings.Contains(out, "configuration OK") {
		t.Fatalf("--check-config: %v, code %d, output %q", err, daemon.ExitCode(err), out)
	}
	_, out, err = checker("--check-config")
	if daemon.ExitCode(err) != 2 || strings.Contains(out, "configuration OK") {
		t.Fatalf("--check-config of an invalid configuration: %v, output %q", err, out)
	}
}

func TestExitCode(t *testing.T) {
	for _, tt := range []struct {
		err  error
		want int
	}{
		{nil, 0},
		{context.Canceled, 0},
		{daemon.ErrCheckedOnly, 0},
		{&daemon.ConfigError{Err: errors.New("x")}, 2},
		{fmt.Errorf("wrapped: %w", &daemon.ConfigError{Err: errors.New("x")}), 2},
		{&daemon.ConfigError{Err: flag.ErrHelp}, 2},
		{errors.New("runtime"), 1},
	} {
		if got := daemon.ExitCode(tt.err); got != tt.want {
			t.Errorf("ExitCode(%v) = %d, want %d", tt.err, got, tt.want)
		}
	}
}

// daemons builds the three daemons' command lines as their mains do.
func daemons(stderr io.Writer) map[string]*daemon.Flags {
	center, regional, checker := config.DefaultCenter(), config.DefaultRegional(), config.DefaultChecker()
	c, _ := daemon.Center(&center, stderr)
	r, _ := daemon.Regional(&regional, stderr)
	return map[string]*daemon.Flags{"central-scheduler": c, "regional-scheduler": r, "healthcheck": daemon.Checker(&checker, stderr)}
}

// flagNames is every flag of f, sorted.
func flagNames(f *daemon.Flags) []string {
	var names []string
	f.VisitAll(func(fl *flag.Flag) { names = append(names, fl.Name) })
	return names
}

// The three daemons take the same common flags (the health checker's
// --log-format and --log-level included), the two schedulers the same
// scheduler flags, and every flag says what it does.
func TestCommonFlags(t *testing.T) {
	ds := daemons(io.Discard)
	for name, f := range ds {
		names := flagNames(f)
		for _, c := range daemon.CommonFlags() {
			if !slices.Contains(names, c) {
				t.Errorf("%s lacks --%s: %v", name, c, names)
			}
		}
		f.VisitAll(func(fl *flag.Flag) {
			if len(fl.Usage) < 10 {
				t.Errorf("%s --%s: usage %q says too little", name, fl.Name, fl.Usage)
			}
		})
	}
	for _, s := range []string{"instance-id", "cleanup"} {
		if !slices.Contains(flagNames(ds["central-scheduler"]), s) || !slices.Contains(flagNames(ds["regional-scheduler"]), s) {
			t.Errorf("a scheduler lacks --%s", s)
		}
	}
}

// --help and -h print the usage with every flag on stdout and end the run
// successfully (exit 0) before any validation; a mistake prints it on
// stderr and exits 2.
func TestHelp(t *testing.T) {
	for _, arg := range []string{"--help", "-h", "-help"} {
		var stderr bytes.Buffer
		for name, f := range daemons(&stderr) {
			var stdout bytes.Buffer
			err := f.Load([]string{arg}, invalid{}, &stdout)
			if !errors.Is(err, daemon.ErrCheckedOnly) || daemon.ExitCode(err) != 0 {
				t.Errorf("%s %s: %v, exit %d", name, arg, err, daemon.ExitCode(err))
			}
			out := stdout.String()
			if !strings.HasPrefix(out, "usage: "+name+" [--config FILE]") {
				t.Errorf("%s %s: usage line missing:\n%s", name, arg, out)
			}
			f.VisitAll(func(fl *flag.Flag) {
				_, usage := flag.UnquoteUsage(fl)
				if !strings.Contains(out, "  -"+fl.Name) || !strings.Contains(out, usage) {
					t.Errorf("%s %s: --%s or its usage missing:\n%s", name, arg, fl.Name, out)
				}
			})
		}
		if stderr.Len() != 0 {
			t.Errorf("%s: stderr %q", arg, stderr.String())
		}
	}
	var stdout, stderr bytes.Buffer
	cfg := config.DefaultChecker()
	err := daemon.Checker(&cfg, &stderr).Load([]string{"--bogus"}, &cfg, &stdout)
	if daemon.ExitCode(err) != 2 || stdout.Len() != 0 || !strings.Contains(stderr.String(), "usage: healthcheck") {
		t.Errorf("--bogus: %v, stdout %q, stderr %q", err, stdout.String(), stderr.String())
	}
}

// invalid is a configuration that never validates: --help must not get
// as far as validating.
type invalid struct{}

func (invalid) Validate() error { return errors.New("validated") }
