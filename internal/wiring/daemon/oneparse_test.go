package daemon_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/anysched/anysched/internal/wiring/daemon"
)

// TestCheckConfigOnePass: --check-config reports the file's decoding
// problems and its value problems together, with a "did you mean" for a
// misspelt key and the field path of a garbage certificate; a value that
// failed to decode draws no second, misleading, complaint.
func TestCheckConfigOnePass(t *testing.T) {
	dir := t.TempDir()
	garbage := filepath.Join(dir, "cert.pem")
	if err := os.WriteFile(garbage, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	file := write(t, `region: hefei
etcd:
  endpoints: [http://127.0.0.1:2379]
trusted_proxy: [10.0.0.1]
http:
  trusted_proxy: [10.0.0.1]
  max_connections: lots
log:
  level: loud
snapshot:
  max_staleness: soon
  confirm_interval: 10m
admin:
  tls:
    cert_file: `+garbage+`
    key_file: `+garbage+`
    client_ca_file: `+garbage+`
`)
	_, _, err := regional("--config", file, "--check-config")
	if code := daemon.ExitCode(err); code != 2 {
		t.Fatalf("exit code %d (%v), want 2", code, err)
	}
	text := err.Error()
	for _, want := range []string{
		"config: " + file + ":\n",
		`trusted_proxy: unknown field (did you mean "http.trusted_proxies"?) (line 4)`,
		`http.trusted_proxy: unknown field (did you mean "trusted_proxies"?) (line 6)`,
		`http.max_connections: invalid value`,
		`snapshot.max_staleness: invalid value`,
		`log.level: "loud" is not one of`,
		"admin.tls.cert_file: " + garbage + " holds no PEM certificate",
		"admin.tls.client_ca_file: " + garbage + " holds no PEM certificate",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("lacks %q:\n%s", want, text)
		}
	}
	// max_staleness kept its default (5m) when it failed: a complaint
	// comparing confirm_interval to it would be about a value nobody wrote.
	if strings.Contains(text, "snapshot.confirm_interval") || strings.Contains(text, "http.max_connections: must be") {
		t.Errorf("a value error about a field that failed to decode:\n%s", text)
	}
}
