package health

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/anysched/anysched/internal/testbed/port"
	"github.com/anysched/anysched/internal/testbed/wait"
)

// startNginx runs a real nginx on a loopback port held for the test,
// confined to a temp dir, and returns its base URL and a function that kills
// it and waits for it to exit. The test is skipped when the nginx binary is
// absent (.ci/run installs Debian's).
func startNginx(t *testing.T) (string, func()) {
	t.Helper()
	bin, err := exec.LookPath("nginx")
	if err != nil {
		t.Skip("nginx not installed (apt-get install nginx)")
	}
	dir := t.TempDir()
	// nginx cannot be asked which port it bound: it listens on a port this
	// test holds (reuseport: SO_REUSEPORT, as the holding socket), which no
	// other process can take, before nginx starts or after it is killed.
	addr := port.Hold(t).Addr()

	// master_process off: one process, so that killing it really closes the
	// port (a killed master would leave its workers serving).
	conf := fmt.Sprintf(`master_process off;
worker_processes 1;
pid %[1]s/nginx.pid;
error_log %[1]s/error.log info;
events { worker_connections 64; }
http {
    access_log off;
    client_body_temp_path %[1]s/client_body;
    proxy_temp_path %[1]s/proxy;
    fastcgi_temp_path %[1]s/fastcgi;
    uwsgi_temp_path %[1]s/uwsgi;
    scgi_temp_path %[1]s/scgi;
    server {
        listen %[2]s reuseport;
        location /nginx_status { stub_status; }
        location /health { return 200 "ok"; }
    }
}
`, dir, addr)
	confPath := filepath.Join(dir, "nginx.conf")
	if err := os.WriteFile(confPath, []byte(conf), 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"-c", confPath, "-p", dir, "-g", "daemon off;"}
	if nginxHasErrorLogFlag(bin) {
		// Otherwise nginx opens its compiled-in error log before reading
		// the config (harmless, but outside the temp dir).
		args = append(args, "-e", filepath.Join(dir, "error.log"))
	}
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	kill := func() {
		cmd.Process.Kill()
		<-exited
	}
	t.Cleanup(func() {
		kill()
		if t.Failed() {
			if b, err := os.ReadFile(filepath.Join(dir, "error.log")); err == nil {
				t.Logf("nginx error.log:\n%s", b)
			}
		}
	})

	base := "http://" + addr
	p := &Prober{Timeout: time.Second}
	wait.ForErr(t, "nginx listening", wait.DefaultTimeout, func() error {
		select {
		case <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "error.log"))
			t.Fatalf("nginx exited: %v\n%s", cmd.ProcessState, b)
		default:
		}
		if res := p.Probe(context.Background(), Target{URL: base + "/health"}); !res.OK {
			return errors.New(res.Err)
		}
		return nil
	})
	return base, kill
}

// nginxHasErrorLogFlag reports whether nginx knows -e (1.19.5 and later).
func nginxHasErrorLogFlag(bin string) bool {
	out, _ := exec.Command(bin, "-v").CombinedOutput()
	m := regexp.MustCompile(`nginx/(\d+)\.(\d+)\.(\d+)`).FindStringSubmatch(string(out))
	if m == nil {
		return false
	}
	v := [3]int{}
	for i := range v {
		v[i], _ = strconv.Atoi(m[i+1])
	}
	return v[0] > 1 || (v[0] == 1 && (v[1] > 19 || (v[1] == 19 && v[2] >= 5)))
}

func TestNginxEndToEnd(t *testing.T) {
	base, kill := startNginx(t)

	p := &Prober{Timeout: time.Second}
	res := p.Probe(context.Background(), Target{URL: base + "/health"})
	if !res.OK || res.HasLoad || res.Kind != "" {
		t.Fatalf("/health: %+v", res)
	}
	res = p.Probe(context.Background(), Target{URL: base + "/nginx_status"})
	if !res.OK || !res.HasLoad || res.Load.Connections < 1 || res.Load.Requests < 1 {
		t.Fatalf("/nginx_status: %+v", res)
	}
	res = p.Probe(context.Background(), Target{URL: base + "/nope"})
	if res.OK || res.Kind != KindStatus {
		t.Fatalf("/nope: %+v", res)
	}

	// The checker's clock is a fake one: detection is counted in intervals,
	// exactly, whatever the machine's load; the probes are real.
	c := startClocked(t, CheckerOptions{Interval: time.Second, Rise: 2, Fall: 2}, nil,
		Target{Server: "nginx-1", URL: base + "/nginx_status", CapacityMbps: 10000})
	up := c.until(t, 1, "nginx-1", 0, 1, isUp)
	if up.Load.Connections < 1 || up.Load.Requests < 1 || up.RTT <= 0 || up.Reason != "" {
		t.Fatalf("up report %+v", up)
	}
	t.Logf("up: rtt %v, load %+v", up.RTT, up.Load)

	kill() // and gone: the port refuses from now on
	killed := c.clk.Now()
	down := c.until(t, 1, "nginx-1", len(c.rs.list("nginx-1")), 10, isDown)
	took := down.At.Sub(killed)
	o := c.Options()
	bound := o.Interval + o.FastInterval*time.Duration(o.Fall-1)
	t.Logf("down %v after the kill (bound %v): %s", took, bound, down.Reason)
	if took <= 0 || took > bound {
		t.Errorf("down %v after the kill, want within %v", took, bound)
	}
	if !strings.HasPrefix(down.Reason, KindRefused) {
		t.Errorf("reason %q", down.Reason)
	}
}
