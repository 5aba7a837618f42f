package docs_test

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// loopbackPorts are the ports the loopback configs listen on; the test
// skips when one is taken (a demo running on this machine).
var loopbackPorts = []int{19090, 19100, 19101, 19102, 19103, 19201, 12379, 12380, 18080, 18081, 18082, 18083, 15353, 15354, 15355, 15356}

// TestLoopbackREADME runs the sh blocks of deploy/examples/loopback/README.md
// as written, line by line, with the binaries built into a temporary bin/
// and the state under a temporary directory instead of
// /tmp/anysched-loopback, and checks what each command promises: the apply
// succeeds, status lists 4 ready instances, curl gets a 302, dig an A
// record, the drill is refused with its reason.
func TestLoopbackREADME(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the daemons and runs a province: not in -short")
	}
	for _, tool := range []string{"bash", "curl", "dig"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s is not installed (scripts/install-deps.sh installs it)", tool)
		}
	}
	for _, p := range loopbackPorts {
		ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Skipf("port %d is taken (a loopback province running here?): %v", p, err)
		}
		ln.Close()
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir()
	bin := filepath.Join(tmp, "bin")
	build := exec.Command("go", "build", "-o", bin+"/", "./central-scheduler", "./regional-scheduler", "./schedctl", "./healthcheck")
	build.Dir = root
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// The configs, with the state directory moved.
	state := filepath.Join(tmp, "state")
	confs := filepath.Join(tmp, "loopback")
	if err := os.MkdirAll(confs, 0o755); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(root, "deploy/examples/loopback/*.yaml"))
	if err != nil || len(files) == 0 {
		t.Fatalf("loopback configs: %v %v", files, err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(confs, filepath.Base(f)), []byte(strings.ReplaceAll(string(b), "/tmp/anysched-loopback", state)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	readme, err := os.ReadFile(filepath.Join(root, "deploy/examples/loopback/README.md"))
	if err != nil {
		t.Fatal(err)
	}
	lines := shLines(string(readme))
	if len(lines) < 10 {
		t.Fatalf("only %d commands in the README's sh blocks", len(lines))
	}
	subst := strings.NewReplacer("bin/", bin+"/", "deploy/examples/loopback/", confs+"/", "/tmp/anysched-loopback", state)

	var daemons []*exec.Cmd
	t.Cleanup(func() {
		for _, c := range daemons {
			_ = syscall.Kill(-c.Process.Pid, syscall.SIGTERM)
		}
		for _, c := range daemons {
			done := make(chan struct{})
			go func() { _ = c.Wait(); close(done) }()
			select {
			case <-done:
			case <-time.After(20 * time.Second):
				_ = syscall.Kill(-c.Process.Pid, syscall.SIGKILL)
				<-done
			}
		}
	})
	seen := map[string]bool{}
	checker := false // hefei's health checker runs
	for i, line := range lines {
		cmd := subst.Replace(line)
		switch {
		case line == "make build":
			continue // built above
		case strings.HasSuffix(line, "&"):
			c := exec.Command("bash", "-c", "exec "+strings.TrimSuffix(cmd, "&"))
			c.Dir = root
			logf, err := os.Create(filepath.Join(tmp, fmt.Sprintf("daemon-%d.log", i)))
			if err != nil {
				t.Fatal(err)
			}
			c.Stdout, c.Stderr = logf, logf
			c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			if err := c.Start(); err != nil {
				t.Fatalf("%s: %v", line, err)
			}
			daemons = append(daemons, c)
			checker = checker || strings.Contains(line, "healthcheck")
			t.Cleanup(func() {
				if t.Failed() {
					b, _ := os.ReadFile(logf.Name())
					t.Logf("log of %s (last 3000 bytes):\n%s", line, tail(b, 3000))
				}
				logf.Close()
			})
			continue
		}
		check, what := expectation(line, checker)
		seen[what] = true
		deadline := time.Now().Add(45 * time.Second)
		for {
			out, err := runLine(root, cmd, 20*time.Second)
			why := check(out, err)
			if why == "" {
				t.Logf("$ %s\n%s", line, out)
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("README command %q: %s\noutput:\n%s", line, why, out)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	for _, what := range []string{"apply", "status", "curl 302", "dig A", "drill refused", "json", "checker metrics"} {
		if !seen[what] {
			t.Errorf("the README has no command checked as %q", what)
		}
	}
}

// runLine runs one README line with bash in dir, bounded in time.
func runLine(dir, line string, timeout time.Duration) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, "bash", "-c", line)
	c.Dir = dir
	c.WaitDelay = time.Second
	out, err := c.CombinedOutput()
	return string(out), err
}

var (
	ipv4Line   = regexp.MustCompile(`(?m)^\d+\.\d+\.\d+\.\d+$`)
	readyLine  = regexp.MustCompile(`(?m)^\S+\s+(central|regional)\b.*\bready\b`)
	http302    = regexp.MustCompile(`(?m)^HTTP/1\.1 302 `)
	hefeiLoc   = regexp.MustCompile(`(?mi)^Location: http://10\.1\.\d+\.\d+:8080/`)
	resultHead = regexp.MustCompile(`(?mi)^X-Anysched-Result: CZ`)
	serverUp   = regexp.MustCompile(`(?m)^anysched_health_server_up\{[^}]*region="hefei"[^}]*\} (\S+)$`)
	// hefei's row in the status's region table, its last column CHECKERS.
	hefeiChecked = regexp.MustCompile(`(?m)^hefei\s+\d+\s.*\s1$`)
)

// expectation says what a README line must print (or how it must fail),
// as a check that returns why the output falls short ("" when it does
// not), and a name for the kind of check.
func expectation(line string, checker bool) (func(out string, err error) string, string) {
	ok := func(out string, err error) string {
		if err != nil {
			return fmt.Sprintf("failed: %v", err)
		}
		return ""
	}
	both := func(a, b func(string, error) string) func(string, error) string {
		return func(out string, err error) string {
			if why := a(out, err); why != "" {
				return why
			}
			return b(out, err)
		}
	}
	switch {
	case strings.Contains(line, "drill failover"):
		return func(out string, err error) string {
			if err == nil {
				return "the drill was not refused"
			}
			if !strings.Contains(out, "announce nothing themselves (announce.mode none)") {
				return "refused without naming announce.mode none"
			}
			return ""
		}, "drill refused"
	case strings.Contains(line, " apply "):
		return both(ok, func(out string, _ error) string {
			if !strings.Contains(out, "revision") {
				return "no revision in the output"
			}
			return ""
		}), "apply"
	case strings.Contains(line, " status"):
		return both(ok, func(out string, _ error) string {
			if n := len(readyLine.FindAllString(out, -1)); n < 4 {
				return fmt.Sprintf("%d ready instances, want 4", n)
			}
			if checker && !hefeiChecked.MatchString(out) {
				return "hefei's row does not end with CHECKERS 1"
			}
			return ""
		}), "status"
	case strings.HasPrefix(line, "curl") && strings.Contains(line, "/metrics"):
		return both(ok, func(out string, _ error) string {
			up := serverUp.FindAllStringSubmatch(out, -1)
			if len(up) == 0 {
				return "no anysched_health_server_up"
			}
			for _, m := range up {
				if m[1] != "0" {
					return "a server of hefei is up, though nothing listens at its address"
				}
			}
			return ""
		}), "checker metrics"
	case strings.HasPrefix(line, "curl") && strings.Contains(line, "format=json"):
		return both(ok, func(out string, _ error) string {
			if !strings.Contains(out, `"result"`) || !strings.Contains(out, `"location"`) {
				return "not a JSON decision with a location"
			}
			return ""
		}), "json"
	case strings.HasPrefix(line, "curl") && strings.Contains(line, "-D -"):
		return both(ok, func(out string, _ error) string {
			switch {
			case !http302.MatchString(out):
				return "no 302"
			case !hefeiLoc.MatchString(out):
				return "no Location on a hefei server"
			case !resultHead.MatchString(out):
				return "no X-Anysched-Result: CZ (X-Anysched-Debug)"
			}
			return ""
		}), "curl 302"
	case strings.HasPrefix(line, "curl"):
		return both(ok, func(out string, _ error) string {
			if !strings.Contains(out, `"revision"`) {
				return "no revision in the snapshot page"
			}
			return ""
		}), "curl"
	case strings.HasPrefix(line, "dig"):
		return both(ok, func(out string, _ error) string {
			if !ipv4Line.MatchString(out) {
				return "no A record"
			}
			return ""
		}), "dig A"
	}
	return ok, "runs"
}

// shLines returns the commands of the ```sh blocks of a Markdown
// document: comments and blank lines dropped, continuation lines joined.
func shLines(md string) []string {
	var out []string
	in, cont := false, ""
	sc := bufio.NewScanner(strings.NewReader(md))
	for sc.Scan() {
		l := sc.Text()
		if strings.HasPrefix(l, "```") {
			in = !in && strings.TrimSpace(strings.TrimPrefix(l, "```")) == "sh"
			continue
		}
		if !in {
			continue
		}
		l = strings.TrimSpace(stripComment(l))
		if strings.HasSuffix(l, `\`) {
			cont += strings.TrimSuffix(l, `\`) + " "
			continue
		}
		l, cont = strings.TrimSpace(cont+l), ""
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// stripComment cuts a shell comment: a # at the start or after a blank,
// outside quotes.
func stripComment(l string) string {
	var quote rune
	for i, r := range l {
		switch {
		case quote != 0:
			if r == quote {
				quote = 0
			}
		case r == '\'' || r == '"':
			quote = r
		case r == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
			return l[:i]
		}
	}
	return l
}

func tail(b []byte, n int) []byte {
	if len(b) > n {
		return b[len(b)-n:]
	}
	return b
}
