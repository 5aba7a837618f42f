package app_test

import (
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/anysched/anysched/internal/testbed/etcdtest"
	"github.com/anysched/anysched/internal/testbed/testcerts"
	"github.com/anysched/anysched/internal/wiring/config"
)

// An STB given an https:// URL gets the same redirect as over HTTP, with
// the certificate of the name it asked for (curl, SNI by --resolve). Its
// decision is in access_log.file, which SIGHUP reopens after a rotation.
func TestSTBHTTPSAndAccessLogFile(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("curl not installed (scripts/install-deps.sh)")
	}
	// As SignalContext does, before the daemons handle it (signal.Ignore
	// after their signal.Notify would undo it).
	signal.Ignore(syscall.SIGHUP)
	e := etcdtest.Start(t)
	cc := centerConfig(t)
	cc.Etcd.Endpoints = []string{e.Endpoint()}
	runCenter(t, &cc)
	ca, cert, key := testcerts.Host(t, t.TempDir(), "live.iptv.example")
	rc := regionalConfig(t, cc, "hefei")
	rc.Etcd.Endpoints = []string{e.Endpoint()}
	rc.HTTPS.Listen = anyPort
	rc.HTTP.Listen = anyPort // the same server on both: fast path and TLS through net/http
	rc.HTTPS.Certificates = []config.CertificateFiles{{CertFile: cert, KeyFile: key}}
	rc.HTTP.TrustedProxies = []config.Network{config.MustParseNetwork("127.0.0.0/8")}
	logFile := filepath.Join(t.TempDir(), "access.log")
	rc.AccessLog.Enabled, rc.AccessLog.File = true, logFile
	if err := rc.Validate(); err != nil {
		t.Fatal(err)
	}
	runRegional(t, &rc)
	waitUp(t, "center admin API", func() bool { _, err := schedctl(t, cc.GRPC.Listen, "status"); return err == nil })
	if out, err := schedctl(t, cc.GRPC.Listen, "apply", "--yes", "-f", "../../../deploy/examples/topology.yaml"); err != nil {
		t.Fatalf("apply: %v\n%s", err, out)
	}
	_, port, _ := net.SplitHostPort(rc.HTTPS.Listen)
	get := func() (string, error) {
		out, err := exec.Command(curl, "-sS", "--max-time", "5", "-o", "/dev/null", "-w", "%{http_code} %{redirect_url} %{ssl_verify_result}",
			"--resolve", "live.iptv.example:"+port+":127.0.0.1", "--cacert", ca,
			"-H", "X-Forwarded-For: 100.68.0.9", "https://live.iptv.example:"+port+"/cctv1/index.m3u8").CombinedOutput()
		return string(out), err
	}
	var out string
	waitUp(t, "https answers", func() bool { out, err = get(); return err == nil && strings.HasPrefix(out, "302 ") })
	// wuhu's STB, asked of hefei's scheduler: a wuhu edge, the certificate verified (0).
	f := strings.Fields(out)
	if len(f) != 3 || !strings.HasPrefix(f[1], "http://10.2.") || f[2] != "0" {
		t.Fatalf("curl over https: %q", out)
	}
	if code, loc, _ := stbGet(rc.HTTP.Listen, "live.iptv.example", "/cctv1/index.m3u8", "100.68.0.9"); code != 302 || loc != f[1] {
		t.Fatalf("over http: %d %q, over https %q", code, loc, f[1])
	}

	contains := func(file, s string) bool { b, _ := os.ReadFile(file); return strings.Contains(string(b), s) }
	waitUp(t, "the decision in the access log", func() bool { return contains(logFile, `"client":"100.68.0.9"`) })

	// logrotate: move the file, SIGHUP, and the next lines go to a new one.
	if err := os.Rename(logFile, logFile+".1"); err != nil {
		t.Fatal(err)
	}
	waitUp(t, "a new access log after SIGHUP", func() bool {
		if err := syscall.Kill(syscall.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
		if _, err := get(); err != nil {
			return false
		}
		return contains(logFile, `"client":"100.68.0.9"`)
	})
}
